#if PostgreSQL
import Logging
import PostgresNIO

extension ServerStatements {
    /// Wakes the live devices of `group` (`pg_notify` on the sync channel, in its own transaction when
    /// the connection is in none): what a pusher sends after its push commits (``WakeUps``).
    package func wake(group: String) async throws {
        _ = try await connection.query("SELECT pg_notify(\(ServerSchema.channel), \(group))", logger: logger)
    }

    /// Replaces `kvsync_push` with this library's revision, or (`wakeInside`) with the same body
    /// notifying inside the push's transaction, as up to revision 6: `kvtool bench pushers` compares the
    /// two on one server
    /// (the owner's connection; ``ServerSchema/migrate(_:logger:)`` puts this library's back).
    package static func installPush(wakeInside: Bool, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query(PostgresQuery(unsafeSQL: ServerSchema.pushFunction(scopeChecks: ServerSchema.scopeChecks, wakeInside: wakeInside)),
                                   logger: logger)
    }

    /// Where the logs of those of `groups` that have pushed end (`kvsync_groups.last_seq`), through
    /// `kvsync_group_ends` (schema version 9), in pieces of ``ServerSchema/groupEndsLimit``: a gateway's
    /// poll of the groups it has live streams for.
    package func groupEnds(_ groups: [String]) async throws -> [String: Int64] {
        var ends: [String: Int64] = [:]
        for start in stride(from: 0, to: groups.count, by: ServerSchema.groupEndsLimit) {
            let piece = Array(groups[start..<min(groups.count, start + ServerSchema.groupEndsLimit)])
            for try await (group, last) in try await connection.query("SELECT group_id, last_seq FROM kvsync_group_ends(\(piece))",
                                                                       logger: logger).decode((String, Int64).self) {
                ends[group] = last
            }
        }
        return ends
    }
}
#endif
