#if PostgreSQL
import Foundation
import Logging
import PostgresNIO
import SyncKitPostgres

extension SyncGateway {
    /// A connection of the gateway's own to `target`, one of its databases (its start's check, and the
    /// watch, whose connection also carries the `LISTEN`): with a host list, to the first host that is
    /// what `target_session_attrs` asks for (``ServerURL/connectChoosing(id:logger:timeout:)``), and
    /// the pool is pointed at that host too (``DatabaseLink/point(at:configuration:)``): after a
    /// failover the watch's connection finds the promoted standby, `LISTEN`s there at once, and
    /// requests (and the revocation sweep) lease connections there from then on.
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
}
#endif
