#if PostgreSQL
import Foundation
import Logging
import PostgresNIO

/// The directory from group to database (schema version 9, ``ServerSchema/directoryMigration``), in
/// the home database: which of a deployment's PostgreSQL primaries holds each group's rows. A gateway
/// given `--group-database NAME=URL` sends every request of a group to the database the directory
/// names for it; a group without an entry lives in the home database. `kvtool sync directory`
/// wraps these; the SQL is one row per group, which an owner may as well write itself:
///
/// ```sql
/// INSERT INTO kvsync_group_home (group_id, database) VALUES ('group.app', 'b')
///     ON CONFLICT (group_id) DO UPDATE SET database = EXCLUDED.database, placed_at = now();
/// ```
public enum SyncDirectory {
    /// Where the directory places a group.
    public enum Place: Sendable, Hashable, CustomStringConvertible {
        /// The home database (no entry, or the entry `home`).
        case home
        /// The database a gateway knows by this name (`--group-database NAME=URL`).
        case named(String)
        /// Held while it is moved: its requests are refused, to be retried, until it is placed again.
        case held

        public var description: String {
            switch self {
            case .home: SyncDirectory.home
            case .named(let name): name
            case .held: "held"
            }
        }
    }

    /// The name of the home database (the gateway's `--database`).
    public static let home = "home"

    /// Whether `name` can name a database in the directory: 1 to 63 letters, digits, `-` and `_` (the
    /// table's own check; a name is never an address).
    public static func isValidName(_ name: String) -> Bool {
        (1...63).contains(name.utf8.count) && name.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x2D || byte == 0x5F
        }
    }

    /// Places `group` in the database named `database` (``home``: the home database), or holds it
    /// (`nil`), as the home database's owner. Gateways see it within their cache's lifetime.
    public static func place(group: String, in database: String?, on owner: ServerURL,
                             logger: Logger = SyncTokens.quietLogger) async throws {
        if let database, !isValidName(database) {
            throw ReplicationError.server("'\(database)' cannot name a database in the directory: 1 to 63 letters, digits, - and _")
        }
        _ = try await SyncTokens.withOwner(owner, logger: logger) { connection in
            try await connection.query("""
                INSERT INTO kvsync_group_home (group_id, database) VALUES (\(group), \(database))
                ON CONFLICT (group_id) DO UPDATE SET database = EXCLUDED.database, placed_at = now()
                """, logger: logger)
        }
    }

    /// Every entry of the directory, by group (a group without one lives in the home database).
    public static func list(on owner: ServerURL, logger: Logger = SyncTokens.quietLogger) async throws -> [(group: String, place: Place)] {
        try await SyncTokens.withOwner(owner, logger: logger) { connection in
            var found: [(group: String, place: Place)] = []
            let rows = try await connection.query("SELECT group_id, database FROM kvsync_group_home ORDER BY group_id", logger: logger)
            for try await (group, database) in rows.decode((String, String?).self) { found.append((group, place(database))) }
            return found
        }
    }

    /// Where the directory on `connection` (the home database) places `group`.
    package static func place(of group: String, on connection: PostgresConnection, logger: Logger) async throws -> Place {
        let rows = try await connection.query("SELECT database FROM kvsync_group_home WHERE group_id = \(group)", logger: logger)
        for try await (database) in rows.decode(String?.self) { return place(database) }
        return .home
    }

    static func place(_ database: String?) -> Place {
        guard let database else { return .held }
        return database == home ? .home : .named(database)
    }
}
#endif
