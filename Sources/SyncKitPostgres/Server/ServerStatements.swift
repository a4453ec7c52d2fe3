#if PostgreSQL
import Foundation
import KVStore
import Logging
import NIOCore
import PostgresNIO
import SyncWire

/// The fixed statements of ``ServerSchema`` on one PostgreSQL connection: a device's own (through
/// ``ServerConnection``, which bounds each in time), or a sync gateway's transaction scoped to one
/// group. Every variable-length column read comes with its limit applied in the statement.
package struct ServerStatements: Sendable {
    let connection: PostgresConnection
    let logger: Logger
    /// A value longer than this is refused without being read into memory.
    let maxValueBytes: Int

    package init(connection: PostgresConnection, logger: Logger, maxValueBytes: Int) {
        (self.connection, self.logger, self.maxValueBytes) = (connection, logger, maxValueBytes)
    }

    /// The `LISTEN`/`NOTIFY` channel; the payload is the group id.
    package static var channel: String { ServerSchema.channel }

    /// The role a gateway's scoped transactions run as.
    package static var gatewayRole: String { ServerSchema.gatewayRole }

    /// Creates the tables, or brings them up to the current version.
    package static func migrate(_ connection: PostgresConnection, logger: Logger) async throws {
        try await ServerConnection.mapErrors { try await ServerSchema.migrate(connection, logger: logger) }
    }

    /// The schema's version is this library's (what a sync gateway, which never migrates, checks at
    /// start); else the error says which step is missing.
    package static func checkSchema(_ connection: PostgresConnection, logger: Logger) async throws {
        try await checkSchemaExists(connection, logger: logger)
        var version = 0
        for try await (found) in try await connection.query("SELECT max(version) FROM kvsync_schema", logger: logger).decode(Int?.self) {
            version = found ?? 0
        }
        guard version <= ServerSchema.version else {
            throw ReplicationError.serverSchemaTooNew(found: version, supported: ServerSchema.version)
        }
        guard version == ServerSchema.version else {
            throw ReplicationError.server("the database's kvsync schema is version \(version), and this gateway needs \(ServerSchema.version): its owner runs kvtool sync setup --database OWNER_URL")
        }
    }

    /// The schema's tables and the gateway's role exist (what any login may ask); else the error says
    /// that the owner's step is missing.
    package static func checkSchemaExists(_ connection: PostgresConnection, logger: Logger) async throws {
        var found: (Bool, Bool)?
        for try await row in try await connection.query("""
            SELECT to_regclass('kvsync_schema') IS NOT NULL, EXISTS (SELECT FROM pg_roles WHERE rolname = \(gatewayRole))
            """, logger: logger).decode((Bool, Bool).self) {
            found = row
        }
        guard let (schema, role) = found, schema, role else {
            throw ReplicationError.server("the database has no kvsync schema or no role \(gatewayRole): its owner runs kvtool sync setup --database OWNER_URL first")
        }
    }

    /// Where the log of revoked, changed and deleted credentials ends now.
    package static func revocationCursor(_ connection: PostgresConnection, logger: Logger) async throws -> Int64 {
        var cursor: Int64 = 0
        for try await (found) in try await connection.query("SELECT kvsync_revocation_cursor()", logger: logger).decode(Int64.self) {
            cursor = found
        }
        return cursor
    }

    /// One entry of the revocation log: a credential revoked, changed or deleted.
    package struct Revocation: Sendable, Hashable {
        package var sequence: Int64
        package var credential: Int64
    }

    /// The revocation log's entries after `cursor`, and those of the last `window`.
    package static func revocations(after cursor: Int64, window: Duration, on connection: PostgresConnection,
                                    logger: Logger) async throws -> [Revocation] {
        let seconds = Double(window.components.seconds) + Double(window.components.attoseconds) / 1e18
        var found: [Revocation] = []
        for try await (sequence, credential) in try await connection.query(
            "SELECT seq, credential FROM kvsync_revocations_after(\(cursor), \(seconds))", logger: logger).decode((Int64, Int64).self) {
            found.append(Revocation(sequence: sequence, credential: credential))
        }
        return found
    }

    /// One line about a PostgreSQL error.
    package static func describe(_ error: any Error) -> String { SyncKitPostgres.describe(error) }

    /// The same statements on another connection (a transaction's).
    package func on(_ other: PostgresConnection) -> ServerStatements {
        ServerStatements(connection: other, logger: logger, maxValueBytes: maxValueBytes)
    }

    /// Sends one batch in one server transaction; one outcome per change, in order.
    ///
    /// - Throws: ``ReplicationError/clockAhead(by:limit:)`` for a batch stamped too far ahead (its
    ///   limit is the bound that refused it: `maxClockSkew`, or the server's own where that is lower);
    ///   ``ReplicationError/deviceInUse(_:)`` for a batch that sends a token this device id sent
    ///   before with another change (another container under the same id).
    package func push(group: String, device: String, changes: [OutgoingChange], maxClockSkew: Duration) async throws -> [PushOutcome] {
        try Self.refuseUndecodable(changes)
        do {
            return try await pushBatch(group: group, device: device, changes: changes, maxClockSkew: maxClockSkew)
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == ServerSchema.deviceInUseState {
            throw ReplicationError.deviceInUse(error.serverInfo?[.message].map { String($0.dropFirst("kvsync_push: ".count).prefix(400)) }
                ?? "this device id is in use by another container")
        }
    }

    /// Refuses a batch with a value that no device can decode (``UndecodableValue``), before anything
    /// of it is sent or applied: the sync gateway answers it so
    /// (``SyncWire/GatewayPushResponse/undecodableValue(reason:)``), and a device checks what it is
    /// about to send, on either path. (`kvsync_push` itself does not: a CBOR walk in PL/pgSQL costs
    /// about a microsecond a byte, and a member who holds a database role can write the tables
    /// without it; a device quarantines such a value, and only its key waits.)
    ///
    /// - Throws: ``ReplicationError/undecodableValue(_:)``, naming the key.
    package static func refuseUndecodable(_ changes: [OutgoingChange]) throws {
        for change in changes {
            guard let problem = UndecodableValue.problem(kind: change.kind, value: change.value) else { continue }
            func shown(_ text: String) -> String { Escaping.escape(String(text.prefix(200)), quoting: false, shortForms: true, style: .swift) }
            throw ReplicationError.undecodableValue(
                "the value of \(shown(change.kind)) \(shown(change.name)) key 0x\(Hex.encode(Array(change.key.prefix(64)))) is \(problem); nothing of the batch was applied")
        }
    }

    private func pushBatch(group: String, device: String, changes: [OutgoingChange], maxClockSkew: Duration) async throws -> [PushOutcome] {
        // Nothing to apply (a device through a gateway may send it): no outcomes, and no statement,
        // whose one row of arrays would be NULLs.
        guard !changes.isEmpty else { return [] }
        let maxSkewMilliseconds = maxClockSkew.wholeMilliseconds
        var tokens: [Int64] = [], kinds: [String] = [], names: [String] = [], keys: [ByteBuffer] = []
        var values: [ByteBuffer] = [], deleted: [Bool] = [], clocks: [Int64] = [], bases: [Int64] = []
        // Every key and value is a slice of one buffer: one allocation, not two per change.
        var storage = ByteBuffer()
        storage.reserveCapacity(changes.reduce(0) { $0 + $1.key.count + ($1.value?.count ?? 0) })
        for change in changes {
            storage.writeBytes(change.key)
            storage.writeBytes(change.value ?? [])
        }
        var offset = 0
        func slice(_ count: Int) -> ByteBuffer {
            defer { offset += count }
            return storage.getSlice(at: offset, length: count)!
        }
        for change in changes {
            tokens.append(Int64(bitPattern: change.token))
            kinds.append(change.kind)
            names.append(change.name)
            keys.append(slice(change.key.count))
            values.append(slice(change.value?.count ?? 0))
            deleted.append(change.value == nil)
            clocks.append(Int64(bitPattern: change.clock))
            bases.append(change.base)
        }
        // One row holds every change's outcome and version as arrays (decoding a thousand rows costs
        // more than the server's work on them); a row per conflict or rejection follows, with the
        // server's value (and a rejection's reason: its outcome is 'rejected: ' and the reason, cut
        // to PushOutcome.maxReasonCharacters here too, whoever wrote the function).
        let rows = try await connection.query("""
            WITH r AS MATERIALIZED (
                SELECT * FROM kvsync_push(\(group), \(device), \(tokens), \(kinds), \(names), \(keys), \(values), \(deleted),
                                          \(clocks), \(bases), \(maxSkewMilliseconds)))
            SELECT NULL::integer, array_agg(r.idx ORDER BY r.idx),
                   array_agg(CASE WHEN r.outcome IN ('applied', 'duplicate') THEN 0 WHEN r.outcome = 'conflict' THEN 1
                                  WHEN r.outcome = 'clock_ahead' THEN 2 WHEN r.outcome = 'missing_blob' THEN 4
                                  WHEN r.outcome LIKE 'rejected: %' THEN 5 ELSE 3 END::smallint ORDER BY r.idx),
                   array_agg(coalesce(r.version, 0) ORDER BY r.idx), NULL::integer, NULL::bytea, NULL::bigint, NULL::text,
                   NULL::bigint, NULL::text
            FROM r
            UNION ALL
            SELECT r.idx, NULL, NULL, NULL, octet_length(r.s_value),
                   CASE WHEN octet_length(r.s_value) <= \(maxValueBytes) THEN r.s_value END, r.s_hlc,
                   CASE WHEN octet_length(r.s_device) <= \(Self.maxNameBytes) THEN r.s_device END,
                   r.version, CASE WHEN r.outcome LIKE 'rejected: %' THEN left(substr(r.outcome, 11), \(Int32(PushOutcome.maxReasonCharacters))) END
            FROM r WHERE r.outcome = 'conflict' OR r.outcome LIKE 'rejected: %'
            ORDER BY 1 NULLS FIRST
            """, logger: logger)
        var outcomes = [PushOutcome?](repeating: nil, count: changes.count)
        // The versions of the conflicts the first row announced, waiting for their own row.
        var unanswered: [Int: Int64] = [:]
        // The rejections the first row announced, waiting for their own row.
        var unansweredRejections: Set<Int> = []
        // How far ahead of the server's clock the batch's latest stamp is, when it was refused for it.
        var ahead: Int64?
        for try await (conflict, indexes, codes, versions, length, value, clock, serverDevice, rowVersion, reason)
                in rows.decode((Int32?, [Int32]?, [Int16]?, [Int64]?, Int32?, ByteBuffer?, Int64?, String?, Int64?, String?).self) {
            guard let conflict else {
                guard let indexes, let codes, let versions, codes.count == indexes.count, versions.count == indexes.count else {
                    throw ReplicationError.server("kvsync_push gave no outcomes")
                }
                for (at, index) in indexes.enumerated() {
                    if codes[at] == 2 {
                        // The whole batch was refused: `version` is how far ahead of the server's clock
                        // its latest stamp is, in milliseconds.
                        ahead = versions[at]
                        break
                    }
                    guard (1...changes.count).contains(Int(index)) else {
                        throw ReplicationError.server("kvsync_push answered for change \(index) of \(changes.count)")
                    }
                    switch codes[at] {
                    case 0: outcomes[Int(index) - 1] = .applied(version: versions[at])
                    case 1: unanswered[Int(index)] = versions[at]
                    // A manifest row whose file's bytes the server has not got whole (its version is none).
                    case 4: outcomes[Int(index) - 1] = .missingBlob
                    // Refused by a validator of the collection (issue 50): its reason and the current
                    // row follow in a row of their own.
                    case 5: unansweredRejections.insert(Int(index))
                    default: throw ReplicationError.server("kvsync_push answered an unknown outcome for change \(index)")
                    }
                }
                continue
            }
            let index = Int(conflict)
            // A current row this device cannot use is settled by quarantine, not refused whole: one
            // bad row must not stop every later push.
            var problem: String?
            if clock == nil || clock! < 0 || serverDevice == nil {
                problem = "the current state has no clock, or no device id of at most \(Self.maxNameBytes) bytes"
            } else if let length, value == nil {
                problem = "its value is \(length) bytes, over the \(maxValueBytes)-byte limit"
            }
            let bytes = value.map { Array($0.readableBytesView) }
            if let reason {
                guard unansweredRejections.remove(index) != nil else {
                    throw ReplicationError.server("kvsync_push answered a rejection for change \(index) of \(changes.count), not one")
                }
                // No current row (a key the server never had): nothing to put back, and no problem.
                outcomes[index - 1] = rowVersion == nil
                    ? .rejected(reason: reason, version: nil, value: nil, clock: 0, device: nil, problem: nil)
                    : .rejected(reason: reason, version: rowVersion, value: bytes, clock: UInt64(max(0, clock ?? 0)),
                                device: serverDevice, problem: problem)
                continue
            }
            guard let version = unanswered.removeValue(forKey: index) else {
                throw ReplicationError.server("kvsync_push answered a conflict for change \(index) of \(changes.count), not one")
            }
            outcomes[index - 1] = .conflict(version: version, value: bytes, clock: UInt64(max(0, clock ?? 0)),
                                            device: serverDevice ?? "", problem: problem)
        }
        if let ahead {
            throw ReplicationError.clockAhead(by: .milliseconds(ahead), limit: try await clockBound(asked: maxClockSkew))
        }
        if let index = unanswered.keys.min() ?? unansweredRejections.min() {
            throw ReplicationError.server("kvsync_push gave no current state for the conflict or rejection of change \(index)")
        }
        return try outcomes.enumerated().map { index, outcome in
            guard let outcome else { throw ReplicationError.server("kvsync_push gave no outcome for change \(index + 1)") }
            return outcome
        }
    }

    /// The clock bound `kvsync_push` applies to a caller that asks for `asked`: the lower of that and
    /// the server's own (`kvsync_schema.max_clock_skew_ms`, which only the owner sets), as the function
    /// computes it. Read after a refusal, so that the refusal names the bound that refused it (a
    /// device's or a gateway's 60 s is not the limit when the owner set the server's to 10 s).
    func clockBound(asked: Duration) async throws -> Duration {
        var bound = asked.wholeMilliseconds
        for try await (found) in try await connection.query("""
            SELECT least(\(bound), (SELECT max(s.max_clock_skew_ms) FROM kvsync_schema s))
            """, logger: logger).decode(Int64?.self) {
            if let found { bound = found }
        }
        return .milliseconds(bound)
    }

    /// The server's id (``ServerSchema``, version 2).
    package func serverID() async throws -> String {
        var id: String?
        for try await (found) in try await connection.query("SELECT server_id::text FROM kvsync_schema", logger: logger)
            .decode(String.self) {
            id = found
        }
        guard let id, !id.isEmpty else { throw ReplicationError.server("kvsync_schema has no server id") }
        return id
    }

    /// The group's log after `cursor`: up to `limit` changes whose keys and values add up to `maxBytes`
    /// at most (the first one whatever its size), and what a device needs to check that the log it
    /// follows is still the one it saw. The bound is applied in the statement, so a page of large
    /// values is never read whole: the device asks for the rest after the last it got.
    ///
    /// The log ends at the group's `last_seq`, and no row past it is read: a row numbered past it was
    /// written by no push (a push moves `last_seq` over its rows in its own transaction), but by a
    /// hand with write access to the tables or by a restore that did not update the counter. Read,
    /// it would take a device's cursor past the log's end, which says "another server": the device
    /// would start over, read it again, and start over again, round after round. Read around, it waits
    /// for the next push to take it into the log, in its place (``ServerSchema/adoptRows``), or never
    /// counts if the sequence never reaches it. Repairing `last_seq` here instead is not possible: a
    /// reader holds no lock of the group, and a push in flight may still commit a row numbered below
    /// such a row. A sync gateway reads through this same statement. For the same reason, a pruning
    /// horizon past the log's end (no `prune` makes one) counts as the log's end.
    package func changes(group: String, after cursor: Int64, limit: Int, maxBytes: Int = ChangesPage.maxBytes) async throws -> ChangesPage {
        var page = ChangesPage()
        for try await (pruned, last) in try await connection.query(
            "SELECT least(pruned_through, last_seq), last_seq FROM kvsync_groups WHERE group_id = \(group)", logger: logger)
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
        // The running size counts each value's stored length (octet_length reads no TOASTed value).
        let rows = try await connection.query("""
            SELECT seq, \(unescaped: boundedColumns)
            FROM (SELECT c.*, row_number() OVER (ORDER BY c.seq) AS position,
                         sum(octet_length(c.key) + coalesce(octet_length(c.value), 0)) OVER (ORDER BY c.seq) AS running
                  FROM kvsync_changes c WHERE c.group_id = \(group) AND c.seq > \(cursor) AND c.seq <= \(page.lastSequence)
                  ORDER BY c.seq LIMIT \(limit)) AS page
            WHERE page.position = 1 OR page.running <= \(Int64(maxBytes))
            ORDER BY seq
            """, logger: logger)
        page.changes = try await decodeChanges(rows)
        return page
    }

    /// Removes the group's log entries and tombstones older than `age`; says how many of each it
    /// removed, and the group's horizon after it (an earlier prune's when this one removes nothing),
    /// which is never past the log's end (`last_seq`: a row numbered past it is none of the log's).
    func prune(group: String, olderThan age: Duration) async throws -> ServerPruning {
        let seconds = Double(age.components.seconds) + Double(age.components.attoseconds) / 1e18
        return try await connection.withTransaction(logger: logger) { connection in
            var previous: Int64 = 0
            for try await (found) in try await connection.query(
                "SELECT pruned_through FROM kvsync_groups WHERE group_id = \(group) FOR UPDATE", logger: logger).decode(Int64.self) {
                previous = found
            }
            var horizon: Int64 = 0
            for try await (found) in try await connection.query("""
                SELECT coalesce(max(seq), 0) FROM kvsync_changes
                WHERE group_id = \(group) AND created_at < now() - make_interval(secs => \(seconds))
                  AND seq <= (SELECT g.last_seq FROM kvsync_groups g WHERE g.group_id = \(group))
                """, logger: logger).decode(Int64.self) {
                horizon = found
            }
            guard horizon > 0 else { return ServerPruning(changes: 0, tombstones: 0, prunedThrough: max(0, previous)) }
            // The counts come back as the rows each statement removed.
            let changes = try await Self.count(try await connection.query(
                "WITH d AS (DELETE FROM kvsync_changes WHERE group_id = \(group) AND seq <= \(horizon) RETURNING 1) SELECT count(*) FROM d",
                logger: logger))
            let tombstones = try await Self.count(try await connection.query("""
                WITH d AS (DELETE FROM kvsync_state WHERE group_id = \(group) AND value IS NULL AND version <= \(horizon) RETURNING 1)
                SELECT count(*) FROM d
                """, logger: logger))
            try await connection.query("""
                UPDATE kvsync_groups SET pruned_through = greatest(pruned_through, \(horizon)) WHERE group_id = \(group)
                """, logger: logger)
            return ServerPruning(changes: changes, tombstones: tombstones, prunedThrough: max(previous, horizon))
        }
    }

    /// The one `count(*)` a statement answers.
    private static func count(_ rows: PostgresRowSequence) async throws -> Int {
        var count: Int64 = 0
        for try await (found) in rows.decode(Int64.self) { count = found }
        return Int(count)
    }

    /// The columns of a log or state row after its sequence number, each variable-length one with its
    /// limit applied in the statement (``decodeChanges(_:)`` reads them): device, kind, name, key, the
    /// value's length, the value, clock and token.
    var boundedColumns: String {
        """
        CASE WHEN octet_length(device) <= \(Self.maxNameBytes) THEN device END,
               CASE WHEN octet_length(kind) <= \(Self.maxNameBytes) THEN kind END,
               CASE WHEN octet_length(name) <= \(Self.maxNameBytes) THEN name END,
               CASE WHEN octet_length(key) <= \(Store.maxKeySize) THEN key END, octet_length(value),
               CASE WHEN octet_length(value) <= \(maxValueBytes) THEN value END, hlc, token
        """
    }

    /// The longest device id, kind or name read from the server; longer ones are refused unread (and
    /// ``Replicator``'s checks allow 200 bytes).
    package static let maxNameBytes = GatewayWire.maxNameBytes

    /// Rows of the log or the state. Every variable-length column comes with its limit applied in the
    /// statement, so that a planted row cannot make this process allocate more than the limits.
    func decodeChanges(_ rows: PostgresRowSequence) async throws -> [ServerChange] {
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

}
#endif
