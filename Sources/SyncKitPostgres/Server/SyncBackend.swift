#if PostgreSQL
import Foundation
import Logging
import PostgresNIO

/// An app's backend and the synced data (issue 50): the owner grants a backend login groups, and the
/// backend reads their state and writes values that devices receive like any device's change
/// (`kvtool sync backend` and `kvtool sync server` wrap these). Each call is one connection and one
/// statement of the SQL functions ``ServerSchema/backendAccessMigration`` ships, which a backend may
/// as well call itself:
///
/// ```sql
/// SELECT * FROM kvsync_server_put_json('group.app', 'collection', 'devices', convert_to('phone-1', 'UTF8'),
///                                      '{"token": "abc"}', 'push-service');
/// ```
public enum SyncBackend {
    /// What a server write answered, as the push answers a device's change.
    public struct WriteResult: Sendable, Equatable {
        public enum Outcome: String, Sendable {
            /// Written: ``version`` is its sequence number, ``clock`` its stamp.
            case applied
            /// `expectedVersion` was not the key's version: ``version``, ``value``, ``clock`` and
            /// ``device`` are the server's current row (no version: the key has no row).
            case conflict
            /// A validator of the collection refused it with ``reason``; the rest as for a conflict.
            case rejected
        }
        public var outcome: Outcome
        public var version: Int64?
        public var value: [UInt8]?
        public var clock: UInt64?
        public var device: String?
        public var reason: String?
    }

    /// A row of the state, as a backend reads it through `kvsync_state_json`.
    public struct Row: Sendable, Equatable {
        public var version: Int64
        public var clock: UInt64
        public var device: String
        /// The value's CBOR bytes; `nil` for a tombstone.
        public var value: [UInt8]?
        /// The value as JSON text (`kvsync_cbor_to_jsonb`); `nil` for a tombstone.
        public var json: String?
    }

    /// Lets `login` read and write `group` (as the owner: `owner` is a connection as the schema's
    /// owner). The login must exist.
    public static func grant(login: String, group: String, on owner: ServerURL, logger: Logger = SyncTokens.quietLogger) async throws {
        try SyncServerSetup.checkName(login, of: "backend")
        try await SyncTokens.withOwner(owner, logger: logger) { connection in
            var exists = false
            for try await (found) in try await connection.query("SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = \(login))", logger: logger)
                .decode(Bool.self) {
                exists = found
            }
            guard exists else {
                throw ReplicationError.invalidCredential("no role \(login): kvtool sync setup --backend-login \(login) makes it")
            }
            try await connection.query("INSERT INTO kvsync_backend_grants (login, group_id) VALUES (\(login), \(group)) ON CONFLICT DO NOTHING",
                                       logger: logger)
        }
    }

    /// Takes `group` back from `login`; whether it had it.
    @discardableResult
    public static func revoke(login: String, group: String, on owner: ServerURL, logger: Logger = SyncTokens.quietLogger) async throws -> Bool {
        try await SyncTokens.withOwner(owner, logger: logger) { connection in
            var removed = false
            for try await (_) in try await connection.query(
                "DELETE FROM kvsync_backend_grants WHERE login = \(login) AND group_id = \(group) RETURNING 1", logger: logger).decode(Int.self) {
                removed = true
            }
            return removed
        }
    }

    /// Writes `value` (CBOR bytes, as devices store them) to a key, as device `server:<author>`.
    public static func put(_ value: [UInt8], group: String, kind: String = "collection", name: String, key: [UInt8], author: String,
                           expectedVersion: Int64? = nil, on server: ServerURL, logger: Logger = SyncTokens.quietLogger) async throws -> WriteResult {
        try await write(on: server, logger: logger) { connection in
            try await connection.query("""
                SELECT * FROM kvsync_server_put(\(group), \(kind), \(name), \(ByteBuffer(bytes: key)), \(ByteBuffer(bytes: value)),
                                                \(author), \(expectedVersion))
                """, logger: logger)
        }
    }

    /// Writes the JSON text `json`, encoded by the server to deterministic CBOR (`kvsync_jsonb_to_cbor`).
    public static func put(json: String, group: String, kind: String = "collection", name: String, key: [UInt8], author: String,
                           expectedVersion: Int64? = nil, on server: ServerURL, logger: Logger = SyncTokens.quietLogger) async throws -> WriteResult {
        try await write(on: server, logger: logger) { connection in
            try await connection.query("""
                SELECT * FROM kvsync_server_put_json(\(group), \(kind), \(name), \(ByteBuffer(bytes: key)), \(json)::jsonb,
                                                     \(author), \(expectedVersion))
                """, logger: logger)
        }
    }

    /// Deletes a key (a tombstone devices receive).
    public static func delete(group: String, kind: String = "collection", name: String, key: [UInt8], author: String,
                              expectedVersion: Int64? = nil, on server: ServerURL, logger: Logger = SyncTokens.quietLogger) async throws -> WriteResult {
        try await write(on: server, logger: logger) { connection in
            try await connection.query("""
                SELECT * FROM kvsync_server_delete(\(group), \(kind), \(name), \(ByteBuffer(bytes: key)), \(author), \(expectedVersion))
                """, logger: logger)
        }
    }

    /// The key's row as the caller may see it (a backend login: in its granted groups only); `nil`
    /// when it has none, or may not see it.
    public static func get(group: String, kind: String = "collection", name: String, key: [UInt8],
                           on server: ServerURL, logger: Logger = SyncTokens.quietLogger) async throws -> Row? {
        try await withConnection(server, logger: logger) { connection in
            var row: Row?
            for try await (version, clock, device, value, json) in try await connection.query("""
                SELECT j.version, j.hlc, j.device, s.value, j.value_json::text FROM kvsync_state_json j
                JOIN kvsync_state s ON s.group_id = j.group_id AND s.kind = j.kind AND s.name = j.name AND s.key = j.key
                WHERE j.group_id = \(group) AND j.kind = \(kind) AND j.name = \(name) AND j.key = \(ByteBuffer(bytes: key))
                """, logger: logger).decode((Int64, Int64, String, ByteBuffer?, String?).self) {
                row = Row(version: version, clock: UInt64(bitPattern: clock), device: device, value: value.map { Array($0.readableBytesView) },
                          json: json)
            }
            return row
        }
    }

    private static func write(on server: ServerURL, logger: Logger,
                              _ statement: @escaping @Sendable (PostgresConnection) async throws -> PostgresRowSequence) async throws -> WriteResult {
        try await withConnection(server, logger: logger) { connection in
            var result: WriteResult?
            for try await (outcome, version, value, clock, device, reason) in try await statement(connection)
                .decode((String, Int64?, ByteBuffer?, Int64?, String?, String?).self) {
                guard let known = WriteResult.Outcome(rawValue: outcome) else {
                    throw ReplicationError.server("the server answered a write with '\(outcome)', which this release does not know")
                }
                result = WriteResult(outcome: known, version: version, value: value.map { Array($0.readableBytesView) },
                                     clock: clock.map { UInt64(bitPattern: $0) }, device: device, reason: reason)
            }
            guard let result else { throw ReplicationError.server("the server answered a write with no row") }
            return result
        }
    }

    /// One connection as the URL's login (a backend's cannot migrate: the schema is the owner's).
    private static func withConnection<R: Sendable>(_ server: ServerURL, logger: Logger,
                                                    _ body: @escaping @Sendable (PostgresConnection) async throws -> R) async throws -> R {
        let connection = try await ServerConnection.connect(server, logger: logger, maxValueBytes: 1 << 20)
        return try await connection.closing { try await connection.mapErrors { try await body(connection.connection) } }
    }
}
#endif
