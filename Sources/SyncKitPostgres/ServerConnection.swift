#if PostgreSQL
import Foundation
import Logging
import NIOCore
import KVStore
import PostgresNIO

/// One change as it travels to the server.
struct OutgoingChange: Sendable {
    var kind: String
    var name: String
    var key: [UInt8]
    /// `nil`: a delete.
    var value: [UInt8]?
    var clock: UInt64
    var base: Int64
    var token: UInt64
}

/// What the server did with one change of a batch.
enum PushOutcome: Sendable {
    /// Appended (or appended before: a push sent twice); `version` is its sequence number.
    case applied(version: Int64)
    /// Its base was not the current version: the server's current row (`problem` says why that row
    /// cannot be used as it is: a value over the size limit, say).
    case conflict(version: Int64, value: [UInt8]?, clock: UInt64, device: String, problem: String?)
}

/// One row of the server's change log (or, in a resync, of its current state).
struct ServerChange: Sendable {
    var sequence: Int64
    var device: String
    var kind: String
    var name: String
    var key: [UInt8]
    var value: [UInt8]?
    var clock: UInt64
    /// The token its device sent it with (unique per device and group).
    var token: UInt64 = 0
    /// Why the row cannot be applied as it came (a column missing or over its limit), found while
    /// reading it: the row is quarantined, never applied.
    var problem: String?
    /// Whether `value` holds the row's value (false when it was over the limit and not read).
    var valueKept = true
}

/// A connection to the replication server, speaking only the fixed statements of ``ServerSchema``.
final class ServerConnection: @unchecked Sendable {
    let connection: PostgresConnection
    let logger: Logger
    /// A value longer than this is refused without being read into memory.
    let maxValueBytes: Int

    /// Connection ids for postgres-nio's logging.
    private static let lastID = Locked(0)

    /// How long one statement or transaction may take before it is abandoned and the connection
    /// closed (``Replicator/Options/statementTimeout``).
    let operationTimeout: Duration

    private init(connection: PostgresConnection, logger: Logger, maxValueBytes: Int, operationTimeout: Duration) {
        self.connection = connection
        self.logger = logger
        self.maxValueBytes = maxValueBytes
        self.operationTimeout = operationTimeout
    }

    static func connect(_ url: ServerURL, logger: Logger, maxValueBytes: Int,
                        operationTimeout: Duration = defaultOperationTimeout,
                        connectTimeout: Duration = defaultConnectTimeout) async throws -> ServerConnection {
        do {
            // The TCP connect has its own timeout; the start-up exchange after it does not, and a
            // server that accepts and then closes while it starts can leave it waiting for good. So
            // the whole connect is abandoned after `connectTimeout` (and closed if it ever ends).
            let connection = try await withDeadline(connectTimeout, what: "the connection") {
                try await PostgresConnection.connect(configuration: url.configuration, id: lastID.withLock { $0 += 1; return $0 }, logger: logger)
            } abandoned: { late in
                try? await late.close()
            }
            return ServerConnection(connection: connection, logger: logger, maxValueBytes: maxValueBytes,
                                    operationTimeout: operationTimeout)
        } catch {
            throw ReplicationError.server("cannot connect to \(url): \(describe(error))")
        }
    }

    func close() async {
        try? await connection.close()
    }

    func migrate() async throws {
        try await mapErrors { [self] in try await ServerSchema.migrate(connection, logger: logger) }
    }

    /// Sends one batch in one server transaction; one outcome per change, in order.
    func push(group: String, device: String, changes: [OutgoingChange], maxClockSkew: Duration) async throws -> [PushOutcome] {
        let skew = maxClockSkew.components
        let maxSkewMilliseconds = skew.seconds * 1000 + skew.attoseconds / 1_000_000_000_000_000
        return try await mapErrors { [self] in
            var tokens: [Int64] = [], kinds: [String] = [], names: [String] = [], keys: [ByteBuffer] = []
            var values: [ByteBuffer] = [], deleted: [Bool] = [], clocks: [Int64] = [], bases: [Int64] = []
            for change in changes {
                tokens.append(Int64(bitPattern: change.token))
                kinds.append(change.kind)
                names.append(change.name)
                keys.append(ByteBuffer(bytes: change.key))
                values.append(ByteBuffer(bytes: change.value ?? []))
                deleted.append(change.value == nil)
                clocks.append(Int64(bitPattern: change.clock))
                bases.append(change.base)
            }
            var outcomes = [PushOutcome?](repeating: nil, count: changes.count)
            let rows = try await connection.query("""
                SELECT idx, left(outcome, 20), version, octet_length(s_value),
                       CASE WHEN octet_length(s_value) <= \(maxValueBytes) THEN s_value END, s_hlc,
                       CASE WHEN octet_length(s_device) <= \(Self.maxNameBytes) THEN s_device END
                FROM kvsync_push(\(group), \(device), \(tokens), \(kinds), \(names), \(keys), \(values), \(deleted), \(clocks), \(bases),
                                 \(maxSkewMilliseconds))
                """, logger: logger)
            for try await (index, outcome, version, length, value, clock, serverDevice)
                    in rows.decode((Int, String, Int64, Int?, ByteBuffer?, Int64?, String?).self) {
                if outcome == "clock_ahead" {
                    // The whole batch was refused: `version` is how far ahead of the server's clock
                    // its latest stamp is, in milliseconds.
                    throw ReplicationError.clockAhead(by: .milliseconds(version), limit: maxClockSkew)
                }
                guard (1...changes.count).contains(index) else {
                    throw ReplicationError.server("kvsync_push answered for change \(index) of \(changes.count)")
                }
                switch outcome {
                case "applied", "duplicate":
                    outcomes[index - 1] = .applied(version: version)
                case "conflict":
                    // A current row this device cannot use is settled by quarantine, not refused
                    // whole: one bad row must not stop every later push.
                    var problem: String?
                    if clock == nil || clock! < 0 || serverDevice == nil {
                        problem = "the current state has no clock, or no device id of at most \(Self.maxNameBytes) bytes"
                    } else if let length, value == nil {
                        problem = "its value is \(length) bytes, over the \(maxValueBytes)-byte limit"
                    }
                    outcomes[index - 1] = .conflict(version: version, value: value.map { Array($0.readableBytesView) },
                                                    clock: UInt64(max(0, clock ?? 0)), device: serverDevice ?? "", problem: problem)
                default:
                    throw ReplicationError.server("kvsync_push answered '\(outcome)'")
                }
            }
            return try outcomes.enumerated().map { index, outcome in
                guard let outcome else { throw ReplicationError.server("kvsync_push gave no outcome for change \(index + 1)") }
                return outcome
            }
        }
    }

    /// The server's id (``ServerSchema``, version 2).
    func serverID() async throws -> String {
        try await mapErrors { [self] in
            var id: String?
            for try await (found) in try await connection.query("SELECT server_id::text FROM kvsync_schema", logger: logger)
                .decode(String.self) {
                id = found
            }
            guard let id, !id.isEmpty else { throw ReplicationError.server("kvsync_schema has no server id") }
            return id
        }
    }

    /// One page of a group's log after a cursor.
    struct ChangesPage: Sendable {
        /// The group's pruning horizon.
        var prunedThrough: Int64 = 0
        /// The group's last sequence number.
        var lastSequence: Int64 = 0
        /// The change at the cursor itself, if the log still has it.
        var atCursor: CursorMark?
        /// Changes after the cursor, in sequence order (none when the cursor is before the horizon or
        /// after the last sequence).
        var changes: [ServerChange] = []
    }

    /// The group's log after `cursor`: up to `limit` changes, and what a device needs to check that the
    /// log it follows is still the one it saw.
    func changes(group: String, after cursor: Int64, limit: Int) async throws -> ChangesPage {
        try await mapErrors { [self] in
            var page = ChangesPage()
            for try await (pruned, last) in try await connection.query(
                "SELECT pruned_through, last_seq FROM kvsync_groups WHERE group_id = \(group)", logger: logger)
                .decode((Int64, Int64).self) {
                page.prunedThrough = pruned
                page.lastSequence = last
            }
            if cursor < page.prunedThrough || cursor > page.lastSequence { return page }
            for try await (device, token) in try await connection.query(
                "SELECT left(device, \(Self.maxNameBytes + 1)::int), token FROM kvsync_changes WHERE group_id = \(group) AND seq = \(cursor)",
                logger: logger).decode((String, Int64).self) {
                page.atCursor = CursorMark(device: device, token: UInt64(bitPattern: token))
            }
            let rows = try await connection.query("""
                SELECT seq, CASE WHEN octet_length(device) <= \(Self.maxNameBytes) THEN device END,
                       CASE WHEN octet_length(kind) <= \(Self.maxNameBytes) THEN kind END,
                       CASE WHEN octet_length(name) <= \(Self.maxNameBytes) THEN name END,
                       CASE WHEN octet_length(key) <= \(Store.maxKeySize) THEN key END, octet_length(value),
                       CASE WHEN octet_length(value) <= \(maxValueBytes) THEN value END, hlc, token
                FROM kvsync_changes WHERE group_id = \(group) AND seq > \(cursor) ORDER BY seq LIMIT \(limit)
                """, logger: logger)
            page.changes = try await decodeChanges(rows)
            return page
        }
    }

    /// The group's current state, every key with its version, read while no push of the group can
    /// commit, and the last sequence number that state includes.
    func currentState(group: String) async throws -> (lastSequence: Int64, rows: [ServerChange]) {
        try await mapErrors { [self] in
            try await connection.withTransaction(logger: logger) { connection in
                var last: Int64 = 0
                // Waits for the group's pushes in flight and holds the next ones back until COMMIT.
                for try await (found) in try await connection.query(
                    "SELECT last_seq FROM kvsync_groups WHERE group_id = \(group) FOR SHARE", logger: logger).decode(Int64.self) {
                    last = found
                }
                let rows = try await connection.query("""
                    SELECT version, CASE WHEN octet_length(device) <= \(Self.maxNameBytes) THEN device END,
                           CASE WHEN octet_length(kind) <= \(Self.maxNameBytes) THEN kind END,
                           CASE WHEN octet_length(name) <= \(Self.maxNameBytes) THEN name END,
                           CASE WHEN octet_length(key) <= \(Store.maxKeySize) THEN key END, octet_length(value),
                           CASE WHEN octet_length(value) <= \(self.maxValueBytes) THEN value END, hlc, token
                    FROM kvsync_state WHERE group_id = \(group) ORDER BY kind, name, key
                    """, logger: logger)
                return (last, try await self.decodeChanges(rows))
            }
        }
    }

    /// Removes the group's log entries and tombstones older than `age`; returns the new horizon.
    func prune(group: String, olderThan age: Duration) async throws -> Int64 {
        try await mapErrors { [self] in
            let seconds = Double(age.components.seconds) + Double(age.components.attoseconds) / 1e18
            return try await connection.withTransaction(logger: logger) { connection in
                try await connection.query("SELECT 1 FROM kvsync_groups WHERE group_id = \(group) FOR UPDATE", logger: logger)
                var horizon: Int64 = 0
                for try await (found) in try await connection.query("""
                    SELECT coalesce(max(seq), 0) FROM kvsync_changes
                    WHERE group_id = \(group) AND created_at < now() - make_interval(secs => \(seconds))
                    """, logger: logger).decode(Int64.self) {
                    horizon = found
                }
                guard horizon > 0 else { return 0 }
                try await connection.query("DELETE FROM kvsync_changes WHERE group_id = \(group) AND seq <= \(horizon)", logger: logger)
                try await connection.query("""
                    DELETE FROM kvsync_state WHERE group_id = \(group) AND value IS NULL AND version <= \(horizon)
                    """, logger: logger)
                try await connection.query("""
                    UPDATE kvsync_groups SET pruned_through = greatest(pruned_through, \(horizon)) WHERE group_id = \(group)
                    """, logger: logger)
                return horizon
            }
        }
    }

    /// The longest device id, kind or name read from the server; longer ones are refused unread (and
    /// ``Replicator``'s checks allow 200 bytes).
    static let maxNameBytes = 200

    /// Rows of the log or the state. Every variable-length column comes with its limit applied in the
    /// statement, so that a planted row cannot make this process allocate more than the limits.
    private func decodeChanges(_ rows: PostgresRowSequence) async throws -> [ServerChange] {
        var changes: [ServerChange] = []
        for try await (sequence, device, kind, name, key, length, value, clock, token)
                in rows.decode((Int64, String?, String?, String?, ByteBuffer?, Int?, ByteBuffer?, Int64, Int64).self) {
            // A row no replicator writes is kept as far as it was read, with its problem: the
            // replicator quarantines it and goes on (a stall would let one row stop a device).
            var problem: String?
            if device == nil || kind == nil || name == nil {
                problem = "its device id, kind or name is missing or over \(Self.maxNameBytes) bytes"
            } else if key == nil {
                problem = "its key is over \(Store.maxKeySize) bytes"
            } else if clock < 0 {
                problem = "its clock \(clock) is negative"
            } else if let length, value == nil {
                problem = "its value is \(length) bytes, over the \(maxValueBytes)-byte limit"
            }
            changes.append(ServerChange(sequence: sequence, device: device ?? "", kind: kind ?? "", name: name ?? "",
                                        key: key.map { Array($0.readableBytesView) } ?? [],
                                        value: value.map { Array($0.readableBytesView) },
                                        clock: UInt64(max(0, clock)), token: UInt64(bitPattern: token), problem: problem,
                                        valueKept: !(length != nil && value == nil)))
        }
        return changes
    }

    /// How long one statement or transaction may take before it is abandoned and the connection closed.
    static let defaultOperationTimeout: Duration = .seconds(120)

    /// How long connecting (TCP, then PostgreSQL's start-up exchange) may take before it is abandoned.
    static let defaultConnectTimeout: Duration = .seconds(10)

    var isClosed: Bool { connection.isClosed }

    /// Runs `body`, turning PostgreSQL's errors into one-line ``ReplicationError``s. A server that died
    /// mid-statement (`pg_ctl stop -m immediate`) must not leave a replicator waiting forever on a
    /// reply: after `operationTimeout` the operation is abandoned with an error and the connection
    /// closed (the replicator then connects anew).
    func mapErrors<R: Sendable>(_ body: @escaping @Sendable () async throws -> R) async throws -> R {
        guard !connection.isClosed else { throw ReplicationError.server("the connection to the server is closed") }
        let connection = self.connection
        return try await withDeadline(operationTimeout, what: "the server", onTimeout: { try? await connection.close() },
                                      abandonWhen: { connection.isClosed ? "the connection to the server closed mid-statement" : nil }) {
            try await Self.mapErrors(body)
        }
    }

    /// Runs `body`, turning PostgreSQL's errors into one-line ``ReplicationError``s.
    static func mapErrors<R>(_ body: () async throws -> R) async throws -> R {
        do {
            return try await body()
        } catch let error as ReplicationError {
            throw error
        } catch let error as PostgresTransactionError {
            if let inner = error.closureError as? ReplicationError { throw inner }
            throw ReplicationError.server(describe(error))
        } catch {
            throw ReplicationError.server(describe(error))
        }
    }
}

/// One line about a PostgreSQL error: the server's message where there is one (PSQLError's own
/// description hides it).
func describe(_ error: any Error) -> String {
    if let error = error as? PostgresTransactionError {
        if let inner = error.closureError { return describe(inner) }
        if let inner = error.commitError { return "COMMIT failed: " + describe(inner) }
        if let inner = error.beginError { return "BEGIN failed: " + describe(inner) }
        return "transaction failed"
    }
    if let error = error as? PSQLError {
        if let message = error.serverInfo?[.message] {
            let code = error.serverInfo?[.sqlState].map { " (SQLSTATE \($0))" } ?? ""
            return message + code
        }
        if let underlying = error.underlying { return "\(error.code): \(underlying)" }
        return "\(error.code)"
    }
    if let error = error as? PostgresDecodingError {
        return "a column of type \(error.postgresType) does not decode as \(error.targetType)"
    }
    return String(describing: error).split(separator: "\n").first.map(String.init) ?? "unknown error"
}

/// Runs `body` in a task of its own and returns what it returns, or throws once `timeout` has passed
/// without waiting for it any longer: a task that ignores cancellation (a connect to a server that went
/// silent, say) cannot hold its caller, as it would in a task group, which waits for all its children.
/// `onTimeout` runs when the deadline wins, and `abandoned` gets what `body` returns after that.
func withDeadline<R: Sendable>(_ timeout: Duration, what: String,
                               onTimeout: @escaping @Sendable () async -> Void = {},
                               abandonWhen: @escaping @Sendable () -> String? = { nil },
                               _ body: @escaping @Sendable () async throws -> R,
                               abandoned: @escaping @Sendable (R) async -> Void = { _ in }) async throws -> R {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<R, any Error>) in
        let finished = Locked(false)
        let finish: @Sendable (Result<R, any Error>) -> Bool = { result in
            let first = finished.withLock { done -> Bool in
                defer { done = true }
                return !done
            }
            if first { continuation.resume(with: result) }
            return first
        }
        // Checked every 100 ms: the deadline, and whether to give up sooner (a connection that
        // closed while a statement was out: postgres-nio does not always fail that statement when a
        // server shutting down drops it).
        let timer = Task {
            let deadline = ContinuousClock.now + timeout
            while !Task.isCancelled {
                try? await Task.sleep(for: min(.milliseconds(100), deadline - ContinuousClock.now))
                if Task.isCancelled { return }
                if ContinuousClock.now >= deadline {
                    if finish(.failure(ReplicationError.server("no answer from \(what) within \(timeout)"))) { await onTimeout() }
                    return
                }
                if let reason = abandonWhen() {
                    if finish(.failure(ReplicationError.server(reason))) { await onTimeout() }
                    return
                }
            }
        }
        Task {
            do {
                let value = try await body()
                if !finish(.success(value)) { await abandoned(value) }
            } catch {
                _ = finish(.failure(error))
            }
            timer.cancel()
        }
    }
}
#endif
