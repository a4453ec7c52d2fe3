#if PostgreSQL
import Foundation
import KVStore
import Logging
import NIOCore
import PostgresNIO
import SyncWire

extension ServerStatements {
    /// Rows of a state page that no cursor can name (a kind, name or key over the protocol's limits),
    /// sent on the first page unread but for what says why: at most this many.
    static let maxUnnameableRows = 100

    /// One page of the group's current state after `cursor` (from its start when `nil`), in the
    /// server's key order (kind, name, key): up to `limit` rows whose keys, values and names add up to
    /// `maxBytes` at most (the first one whatever its size), with the bound applied in the statement
    /// so that a large group is never read whole. Each statement sees what committed before it: the
    /// group's counters are read first, so every change up to ``StatePage/lastSequence`` is in this
    /// page's rows or an earlier page's. A pruning horizon past the log's end counts as the end, as
    /// ``changes(group:after:limit:maxBytes:)`` reads it.
    package func statePage(group: String, after cursor: StateCursor?, limit: Int, maxBytes: Int) async throws -> StatePage {
        var (pruned, last): (Int64, Int64) = (0, 0)
        for try await (found) in try await connection.query(
            "SELECT least(pruned_through, last_seq), last_seq FROM kvsync_groups WHERE group_id = \(group)", logger: logger).decode((Int64, Int64).self) {
            (pruned, last) = found
        }
        var unnameable: [ServerChange] = []
        if cursor == nil {
            // A row whose kind, name or key no cursor can carry (no replicator writes one) cannot be
            // paged past: the first page names it, so that the device quarantines it as it would any
            // row it cannot apply. Its value is never read.
            unnameable = try await decodeChanges(try await connection.query("""
                SELECT version, \(unescaped: unreadColumns)
                FROM kvsync_state s
                WHERE group_id = \(group) AND NOT (\(unescaped: Self.nameable))
                LIMIT \(Self.maxUnnameableRows)
                """, logger: logger))
        }
        let after = cursor.map { ($0.kind, $0.name, ByteBuffer(bytes: $0.key)) }
        // The running size counts each row's stored lengths (octet_length reads no TOASTed value), and
        // what its encoding adds: a row past the bound is never read.
        let size = """
            octet_length(s.key) + coalesce(octet_length(s.value), 0) + octet_length(s.kind) + octet_length(s.name)
                + least(octet_length(s.device), \(Self.maxNameBytes + 1)) + 64
            """
        let page: PostgresRowSequence
        if let (kind, name, key) = after {
            page = try await connection.query("""
                SELECT version, \(unescaped: boundedColumns)
                FROM (SELECT s.*, row_number() OVER w AS position, sum(\(unescaped: size)) OVER w AS running
                      FROM kvsync_state s
                      WHERE s.group_id = \(group) AND (s.kind, s.name, s.key) > (\(kind), \(name), \(key)) AND \(unescaped: Self.nameable)
                      WINDOW w AS (ORDER BY s.kind, s.name, s.key)
                      ORDER BY s.kind, s.name, s.key LIMIT \(limit)) AS page
                WHERE page.position = 1 OR page.running <= \(Int64(maxBytes))
                ORDER BY page.position
                """, logger: logger)
        } else {
            page = try await connection.query("""
                SELECT version, \(unescaped: boundedColumns)
                FROM (SELECT s.*, row_number() OVER w AS position, sum(\(unescaped: size)) OVER w AS running
                      FROM kvsync_state s
                      WHERE s.group_id = \(group) AND \(unescaped: Self.nameable)
                      WINDOW w AS (ORDER BY s.kind, s.name, s.key)
                      ORDER BY s.kind, s.name, s.key LIMIT \(limit)) AS page
                WHERE page.position = 1 OR page.running <= \(Int64(maxBytes))
                ORDER BY page.position
                """, logger: logger)
        }
        let rows = try await decodeChanges(page)
        var next: StateCursor?
        if let end = rows.last {
            // One index probe: whether anything follows the page.
            let cursor = StateCursor(kind: end.kind, name: end.name, key: end.key)
            for try await (more) in try await connection.query("""
                SELECT EXISTS (SELECT FROM kvsync_state s
                               WHERE s.group_id = \(group) AND (s.kind, s.name, s.key) > (\(end.kind), \(end.name), \(ByteBuffer(bytes: end.key)))
                                 AND \(unescaped: Self.nameable))
                """, logger: logger).decode(Bool.self) where more {
                next = cursor
            }
        }
        return StatePage(prunedThrough: pruned, lastSequence: last, rows: rows, unnameable: unnameable, next: next)
    }

    /// ``boundedColumns`` without the value (its length only).
    var unreadColumns: String {
        """
        CASE WHEN octet_length(device) <= \(Self.maxNameBytes) THEN device END,
               CASE WHEN octet_length(kind) <= \(Self.maxNameBytes) THEN kind END,
               CASE WHEN octet_length(name) <= \(Self.maxNameBytes) THEN name END,
               CASE WHEN octet_length(key) <= \(Store.maxKeySize) THEN key END, octet_length(value), NULL::bytea, hlc, token
        """
    }

    /// A state row whose kind, name and key a ``StateCursor`` can carry.
    static var nameable: String {
        "octet_length(s.kind) <= \(maxNameBytes) AND octet_length(s.name) <= \(maxNameBytes) AND octet_length(s.key) <= \(Store.maxKeySize)"
    }

    /// The group's whole current state, every key with its version, read while no push of the group can
    /// commit, and the last sequence number that state includes: what `GET /v1/state` without a query
    /// answers (devices before paged resyncs). `admit` is told first what the answer would hold (the
    /// sum of its rows' stored sizes, read without reading a value) and throws to refuse it; nothing
    /// of the rows is read before. Run it in a transaction (the lock it takes lasts until COMMIT).
    package func currentState(group: String, admit: (Int64) throws -> Void) async throws -> (lastSequence: Int64, rows: [ServerChange]) {
        var last: Int64 = 0
        // Waits for the group's pushes in flight and holds the next ones back until COMMIT.
        for try await (found) in try await connection.query(
            "SELECT last_seq FROM kvsync_groups WHERE group_id = \(group) FOR SHARE", logger: logger).decode(Int64.self) {
            last = found
        }
        var size: Int64 = 0
        for try await (found) in try await connection.query("""
            SELECT coalesce(sum(least(octet_length(key), \(Store.maxKeySize + 1)) + least(octet_length(kind), \(Self.maxNameBytes + 1))
                                + least(octet_length(name), \(Self.maxNameBytes + 1)) + least(octet_length(device), \(Self.maxNameBytes + 1))
                                + CASE WHEN octet_length(value) <= \(maxValueBytes) THEN octet_length(value) ELSE 0 END + 64), 0)::bigint
            FROM kvsync_state WHERE group_id = \(group)
            """, logger: logger).decode(Int64.self) {
            size = found
        }
        try admit(size)
        let rows = try await connection.query("""
            SELECT version, \(unescaped: boundedColumns)
            FROM kvsync_state WHERE group_id = \(group) ORDER BY kind, name, key
            """, logger: logger)
        return (last, try await decodeChanges(rows))
    }
}
#endif
