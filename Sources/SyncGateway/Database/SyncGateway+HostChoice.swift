#if PostgreSQL
import Foundation
import Logging
import PostgresNIO
import SyncKitPostgres

extension SyncGateway {
    /// A connection of the gateway's own to `target`, one of its databases (its start's check, the watch, `LISTEN`, the
    /// revocation sweep): with a host list, to the first host that is what `target_session_attrs` asks
    /// for (``ServerURL/connectChoosing(id:logger:timeout:)``), and the pool is pointed at that host too
    /// (``DatabaseLink/point(at:configuration:)``): after a failover the watch's connection finds the
    /// promoted standby, and requests lease connections there from then on.
    func connectToDatabase(_ target: GroupDatabase, id: Int, timeout: Duration) async throws -> PostgresConnection {
        let (database, link) = (target.url, target.link)
        let (connection, host) = try await database.connectChoosing(id: id, logger: options.logger, timeout: timeout)
        guard database.endpoints.count > 1 else { return connection }
        let connections = options.limits.databaseConnections
        let moved = try link.point(at: "\(host)") { try database.poolConfiguration(connections: connections, to: host) }
        if moved {
            options.log?(GatewayLogEvent(level: .info, event: "recovered",
                                         message: "the database's \(database.targetSessionAttributes.rawValue) server is now \(ServerURL.shown(host)): the pool connects there"))
        }
        return connection
    }

    /// Waits `backoff`, or less: until the watch finds the database answering again after a change of
    /// its status since `changes` (a failover's new primary found), so that a connection of the
    /// gateway's own (`LISTEN`) follows it at once rather than after its backoff.
    func pause(_ backoff: Duration, unlessAnsweringSince changes: Int, in target: GroupDatabase) async {
        let end = ContinuousClock.now + backoff
        while ContinuousClock.now < end && !Task.isCancelled {
            let status = target.link.status
            if status.up && status.changes != changes { return }
            try? await Task.sleep(for: min(.milliseconds(50), end - ContinuousClock.now))
        }
    }
}
#endif
