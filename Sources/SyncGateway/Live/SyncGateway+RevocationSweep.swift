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
    /// How long a sweep's query may take before the connection is dropped.
    static let sweepTimeout: Duration = .seconds(2)
    /// How long the sweep's connecting may take (a few milliseconds to a database that answers). An
    /// attempt made while the database was unreachable holds the sweep this long after it returns:
    /// with the retry below, a revocation made during an outage closes its streams within about
    /// 1.5 s of the database's return, plus a query (measured: up to 5.07 s on a loaded CI machine
    /// with 2 s and 0.5 s, against the 5 s the streams must close in).
    static let sweepConnectTimeout: Duration = .seconds(1)
    /// How soon a failed sweep is tried again.
    static let revocationRetry: Duration = .milliseconds(250)

    /// Every ``revocationSweep``, ends the streams of credentials revoked, changed or deleted since
    /// (and of expired ones). The revocations come from the database's log after a cursor (and from
    /// its last ``revocationWindow``: a revocation numbered before one already seen may commit after
    /// it), on a connection of this sweep's own that is opened anew at the next sweep when it fails:
    /// however long the database was away, no revocation made meanwhile is missed, and the first
    /// sweep after it returns sees them.
    func followRevocations(in target: GroupDatabase, after start: Int64) async {
        var cursor = start
        // The entries the last sweep saw: the window shows them again, and each is acted on once.
        var seen = Set<Int64>()
        var connection: PostgresConnection?
        let logger = options.logger
        // After a failed sweep the next comes sooner: the first one after the database is back must not
        // wait a whole period.
        var pause = Self.revocationSweep
        // Whether the last sweep failed (its error was logged).
        var failing = false
        while !Task.isCancelled {
            try? await Task.sleep(for: pause)
            pause = Self.revocationSweep
            // No stream to close: the sweep is as current as it needs to be.
            guard hub.count > 0 else { metrics.swept(); continue }
            var revoked = Set<Int64>()
            do {
                // Each step has a deadline: a database behind a network that drops packets silently
                // must not hold the sweep.
                if connection == nil || connection!.isClosed {
                    let fresh = try await withDeadline(Self.sweepConnectTimeout, what: "the database") {
                        try await self.connectToDatabase(target, id: 1, timeout: Self.sweepConnectTimeout)
                    } abandoned: { late in
                        try? await late.close()
                    }
                    connection = fresh
                    try await withDeadline(Self.sweepTimeout, what: "the database", onTimeout: { try? await fresh.close() }) {
                        try await ServerStatements.assumeGatewayRole(fresh, local: false, logger: logger)
                    }
                }
                let (open, after) = (connection!, cursor)
                let entries = try await withDeadline(Self.sweepTimeout, what: "the database", onTimeout: { try? await open.close() }) {
                    try await ServerStatements.revocations(after: after, window: Self.revocationWindow, on: open, logger: logger)
                }
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
                options.logger.warning("cannot look for revoked credentials: \(ServerStatements.describe(error))")
                metrics.error()
                // Logged once until a sweep succeeds again (it is tried every 250 ms meanwhile).
                if !failing {
                    failing = true
                    options.log?(GatewayLogEvent(level: .error, event: "error",
                                                 message: "cannot look for revoked credentials: \(ServerStatements.describe(error))"))
                }
                if let open = connection { try? await open.close() }
                connection = nil
                pause = Self.revocationRetry
            }
            // A credential's id is its database's: only streams of groups placed there are closed for it.
            hub.close(credentials: revoked, expiredBy: Date()) { [directory] group in directory.mayBe(group, in: target.name) }
        }
        if let connection { try? await connection.close() }
    }
}
#endif
