#if PostgreSQL
import Foundation
import KVStore
import Logging
import NIOCore
import PostgresNIO
import SyncKitPostgres

extension SyncGateway {
    /// How often the watch asks the database whether it answers (`SELECT 1` on a connection of its
    /// own, which also carries the database's `LISTEN`), and how often it tries to reach it again
    /// while it does not.
    static let probeInterval: Duration = .milliseconds(500)
    static let probeRetry: Duration = .milliseconds(250)
    /// How long a probe (a connection, or its query) may go without an answer before the database is
    /// taken for unreachable: with ``probeInterval``, a database behind a network that went silent is
    /// found within 2 s; one that stopped closes the watch's connection, and is found at once.
    static let probeTimeout: Duration = .milliseconds(1_500)
    /// What a device is told to wait before it tries again while the database is unreachable.
    static let unreachableRetryAfter = 2

    /// The home database's pool, or ``DatabaseLink/Unreachable`` when it does not answer (the request
    /// is refused at once, and nothing is asked of the database). A group's requests use
    /// ``pool(for:)``, which the directory routes.
    func pool() throws -> PostgresClient {
        try home.pool()
    }

    /// The answer while the database is unreachable: 503 in a line of the gateway's own words (never a
    /// library's), with `Retry-After`. The database's address is not in it: devices need not learn it.
    static func unreachable(_ reason: String) -> GatewayResponse {
        var response = GatewayResponse.failure("the gateway cannot reach its database (\(reason)); try again")
        response.retryAfter = unreachableRetryAfter
        return response
    }

    /// Watches `target` on a connection of its own until cancelled: a probe every
    /// ``probeInterval`` (at once when the connection closes); when one fails, the database is
    /// unreachable (``DatabaseLink/markDown(_:now:)``, logged once, and the pool replaced) until one
    /// succeeds again (logged: `recovered`). A connection that closed is opened again before anything
    /// is concluded: only a database that cannot be reached, or does not answer, is down.
    ///
    /// `listening`: the same connection carries the database's `LISTEN` (``listen(on:to:)``, a child
    /// task of the connection's), so that each database costs the gateway its pool and one connection
    /// more. The `LISTEN` lives and dies with the connection: when a probe fails (its deadline closes
    /// the connection) or the connection closes, it ends, and the next connection `LISTEN`s again (and
    /// wakes every stream, for the notifications it may have missed meanwhile). With a host list that
    /// next connection is the read-write server's (``connectToDatabase(_:id:timeout:)``): after a
    /// failover the watch finds the promoted standby, points the pool there, and `LISTEN`s there at
    /// once. A read replica (``ReadReplica``, named ``ReadReplica/watchName``) is watched the same way
    /// but does not `LISTEN` (a hot standby refuses it): while it is down, pulls read the primary.
    func watchDatabase(_ target: GroupDatabase, listening: Bool) async {
        let (logger, database, link) = (options.logger, target.url, target.link)
        let endpoint = database.shownEndpoint
        while !Task.isCancelled {
            let failure: (any Error)?
            do {
                // With a host list, the one now read-write (and the pool is pointed there).
                let connection = try await connectToDatabase(target, id: 3, timeout: Self.probeTimeout)
                failure = await withDiscardingTaskGroup(returning: (any Error)?.self) { tasks in
                    if listening {
                        tasks.addTask { await self.listen(on: connection, to: target) }
                    }
                    let failure = await probe(connection, of: target, endpoint: endpoint, logger: logger)
                    // The connection's end is the LISTEN's: closed before the group waits for it.
                    tasks.cancelAll()
                    try? await connection.close()
                    return failure
                }
            } catch {
                failure = error
            }
            if Task.isCancelled { break }
            // Closed between probes: opened again at once, and nothing concluded yet.
            guard let failure else { continue }
            let reason = Self.unreachableWords(failure)
            if link.markDown(reason) {
                metrics.error()
                options.log?(GatewayLogEvent(level: .error, event: "error",
                                             message: "the database at \(endpoint) is unreachable (\(reason)): "
                                                 + (target.name == ReadReplica.watchName ? "pulls read the primary until it answers" : "requests are answered 503 until it answers")))
            }
            try? await Task.sleep(for: Self.probeRetry)
        }
    }

    /// Probes `target` on `connection` every ``probeInterval``, each within ``probeTimeout`` (past it
    /// the connection is closed), marking the database up after each answer, until a probe fails (its
    /// error is returned), the connection closes between probes, or the task is cancelled (nil).
    private func probe(_ connection: PostgresConnection, of target: GroupDatabase, endpoint: String, logger: Logger) async -> (any Error)? {
        while !Task.isCancelled {
            do {
                try await withDeadline(Self.probeTimeout, what: "the database", typedTimeout: true, onTimeout: { try? await connection.close() }) {
                    try await ServerStatements.probe(connection, logger: logger)
                }
            } catch {
                return error
            }
            if let down = target.link.markUp() {
                options.log?(GatewayLogEvent(level: .info, event: "recovered",
                                             message: "the database at \(endpoint) answers again, after \(Self.seconds(down)) unreachable"))
            }
            // The next probe, sooner when the connection closes (a server that stops closes it).
            let next = ContinuousClock.now + Self.probeInterval
            while ContinuousClock.now < next && !connection.isClosed && !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(50))
            }
            if connection.isClosed { return nil }
        }
        return nil
    }

    /// Why a connection to the database failed, in a few words of the gateway's own: the socket's
    /// error, the server's reason for a connection it refused or ended, or that it did not answer.
    static func unreachableWords(_ error: any Error) -> String {
        let inner = (error as? PostgresTransactionError)?.closureError ?? error
        if let unreachable = inner as? DatabaseLink.Unreachable { return unreachable.reason }
        if let reason = unreachableReason(inner) { return reason }
        if inner is DeadlinePassed {
            return "no answer within \(seconds(probeTimeout))"
        }
        if let error = inner as? PSQLError {
            switch error.serverInfo?[.sqlState] {
            case "57P01", "57P02": return "it is shutting down"
            case "57P03": return "it is starting up or shutting down"
            case "53300": return "it has no connection slot free"
            case "28P01", "28000": return "it refused the gateway's login"
            case "3D000": return "its database does not exist"
            case let state?: return "it answered with an error, SQLSTATE \(state)"
            case nil: return "the connection to it closed"
            }
        }
        return "the connection to it failed"
    }

    /// Whether `error` is the connection's, not the statement's (the database went away, or the pool
    /// could not reach it): answered as unreachable, in the gateway's words.
    static func isConnectionFailure(_ error: any Error) -> Bool {
        if error is Refusal || error is ReplicationError || error is PostgresDecodingError { return false }
        guard let error = error as? PSQLError else { return true }
        guard let state = error.serverInfo?[.sqlState] else { return true }
        return state.hasPrefix("08") || state.hasPrefix("57P")
    }

    /// `1.5 s`.
    static func seconds(_ duration: Duration) -> String {
        let tenths = (duration.wholeMilliseconds + 50) / 100
        return tenths % 10 == 0 ? "\(tenths / 10) s" : "\(tenths / 10).\(tenths % 10) s"
    }
}
#endif
