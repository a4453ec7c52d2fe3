#if PostgreSQL
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPServerKit
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import SyncKitPostgres
import SyncWire

extension SyncGateway {
    /// How often revoked credentials are looked for (their streams close within this and a query).
    static let revocationSweep: Duration = .seconds(2)
    /// How far back each sweep also looks, whatever its cursor.
    static let revocationWindow: Duration = .seconds(30)
    /// How long a sweep may take, from asking the pool for a connection to its transaction's end,
    /// before it is given up (and tried again after ``revocationRetry``): a database behind a network
    /// that drops packets silently, or a pool every connection of which is busy, does not hold it.
    static let sweepTimeout: Duration = .seconds(2)
    /// How soon a failed sweep is tried again.
    static let revocationRetry: Duration = .milliseconds(250)

    /// Every ``revocationSweep``, ends the streams of credentials revoked, changed or deleted since
    /// (and of expired ones). The revocations come from the database's log after a cursor (and from
    /// its last ``revocationWindow``: a revocation numbered before one already seen may commit after
    /// it), read in a transaction on a connection leased from `target`'s pool, as the gateway's role.
    /// A sweep that fails (the database unreachable: ``GroupDatabase/pool()`` refuses at once; or no
    /// answer within ``sweepTimeout``) is tried again after ``revocationRetry``, from the same
    /// cursor: however long the database was away, no revocation made meanwhile is missed, and the
    /// first sweep after it returns sees them.
    func followRevocations(in target: GroupDatabase, after start: Int64) async {
        var cursor = start
        // The entries the last sweep saw: the window shows them again, and each is acted on once.
        var seen = Set<Int64>()
        let logger = options.logger
        // After a failed sweep the next comes sooner: the first one after the database is back must not
        // wait a whole period.
        var pause = Self.revocationSweep
        // Whether the last sweep failed (its error was logged).
        var failing = false
        // The read in a task of its own, cancelled at its deadline and when the loop is (the gateway
        // ends), as the poll's (``pollLiveGroups(of:)``): a read left waiting on a pool that shut down
        // would hold the gateway past its end.
        func revocations(after cursor: Int64) async throws -> [ServerStatements.Revocation] {
            let client = try target.pool()
            let read = Task {
                try await client.withTransaction(logger: logger) { connection in
                    try await ServerStatements.assumeGatewayRole(connection, local: true, logger: logger)
                    return try await ServerStatements.revocations(after: cursor, window: Self.revocationWindow, on: connection, logger: logger)
                }
            }
            return try await withTaskCancellationHandler {
                try await withDeadline(Self.sweepTimeout, what: "the database", onTimeout: { read.cancel() }) { try await read.value }
            } onCancel: {
                read.cancel()
            }
        }
        while !Task.isCancelled {
            try? await Task.sleep(for: pause)
            pause = Self.revocationSweep
            // No stream to close: the sweep is as current as it needs to be.
            guard hub.count > 0 else { metrics.swept(); continue }
            var revoked = Set<Int64>()
            do {
                let entries = try await revocations(after: cursor)
                // (Those numbered before the gateway started were settled when their devices authenticated.)
                revoked = Set(entries.filter { $0.sequence > start && !seen.contains($0.sequence) }.map(\.credential))
                seen = Set(entries.map(\.sequence))
                cursor = max(cursor, entries.map(\.sequence).max() ?? cursor)
                metrics.swept()
                if failing {
                    failing = false
                    options.log?(GatewayLogEvent(level: .info, event: "recovered", message: "the revocation sweep reaches the database again"))
                }
            } catch {
                if Task.isCancelled { break }
                let words = (error as? DatabaseLink.Unreachable).map { "the database is unreachable (\($0.reason))" }
                    ?? ServerStatements.describe(error)
                options.logger.warning("cannot look for revoked credentials: \(words)")
                metrics.error()
                // Logged once until a sweep succeeds again (it is tried every 250 ms meanwhile).
                if !failing {
                    failing = true
                    options.log?(GatewayLogEvent(level: .error, event: "error", message: "cannot look for revoked credentials: \(words)"))
                }
                pause = Self.revocationRetry
            }
            // A credential's id is its database's: only streams of groups placed there are closed for it.
            hub.close(credentials: revoked, expiredBy: Date()) { [directory] group in directory.mayBe(group, in: target.name) }
        }
    }
}
#endif
