#if PostgreSQL
import Foundation
import KVStore
@testable import SyncKitPostgres
import PostgresTesting
import TestSupport
import SyncTestSupport
import Testing

/// The server's push function, called as a replicator calls it: its set-based body (a batch of
/// distinct keys and tokens) and the loop a batch that repeats either takes answer the same, and a
/// server with an older revision of the function gets this one without a new schema version.
///
/// Every blocking step (initdb, psql, kvtool) runs off the cooperative pool (`offPool`): with two
/// cores it has two threads, and blocking them stalls the other suites' in-process gateways.
@Suite struct ServerPushTests {
    static func group(_ name: String) -> String { "group.com.example.push.\(name)" }

    /// A cluster whose tables `kvtool sync token issue` made (it migrates), off the pool.
    static func cluster(group: String) async throws -> LocalPostgresCluster {
        try await offPool {
            let cluster = try LocalPostgresCluster()
            let issued = try run(productsDirectory() + "/kvtool", ["sync", "token", "issue", "--group", group, "--database",
                                                                   "postgres://kv@127.0.0.1:\(cluster.port)/kv"])
            guard issued.status == 0 else { throw ReplicationError.server("kvtool sync token issue: \(issued.stderr)") }
            return cluster
        }
    }

    struct Change {
        var token: Int
        var key: String
        var value: String?
        var base: Int = 0
        /// Its stamp's milliseconds (the token's by default).
        var clock: Int?
    }

    /// `kvsync_push` of `changes` from `device`: one `index:outcome:version[:value]` per change.
    static func push(_ cluster: LocalPostgresCluster, group: String, device: String, _ changes: [Change]) throws -> [String] {
        func array(_ items: [String], _ type: String) -> String { "ARRAY[\(items.joined(separator: ","))]::\(type)[]" }
        let hex = { (text: String) in "'\\x" + Hex.encode(Array(text.utf8)) + "'" }
        let sql = """
            SELECT idx || ':' || outcome || ':' || version || coalesce(':' || convert_from(s_value, 'UTF8'), '')
            FROM kvsync_push('\(group)', '\(device)', \(array(changes.map { "\($0.token)" }, "bigint")),
                             \(array(changes.map { _ in "'collection'" }, "text")), \(array(changes.map { _ in "'notes'" }, "text")),
                             \(array(changes.map { hex($0.key) }, "bytea")), \(array(changes.map { hex($0.value ?? "") }, "bytea")),
                             \(array(changes.map { $0.value == nil ? "true" : "false" }, "boolean")),
                             \(array(changes.map { "\(65_536 * ($0.clock ?? $0.token))" }, "bigint")), \(array(changes.map { "\($0.base)" }, "bigint")),
                             60000)
            ORDER BY idx
            """
        return try cluster.psql(sql).split(separator: "\n").map(String.init)
    }

    static func state(_ cluster: LocalPostgresCluster, group: String) throws -> [String] {
        try cluster.psql("""
            SELECT convert_from(key, 'UTF8') || '=' || coalesce(convert_from(value, 'UTF8'), '-') || '@' || version || '/' || device
            FROM kvsync_state WHERE group_id = '\(group)' ORDER BY key
            """).split(separator: "\n").map(String.init)
    }

    /// Both bodies: new keys are applied in order, a batch sent again is answered `duplicate` with the
    /// same versions, a stale base from another device is a conflict that returns the server's row, a
    /// stale base from the device that wrote the current row is not, and the group's last sequence
    /// number follows.
    @Test func theSetBasedBodyAndTheLoopAnswerTheSame() async throws {
        let group = Self.group("bodies")
        let cluster = try await Self.cluster(group: group)
        // (Each psql off the pool; the expectations here, in the test's own task.)
        func pushed(_ device: String, _ changes: [Change]) async throws -> [String] {
            try await offPool { try Self.push(cluster, group: group, device: device, changes) }
        }
        func stateNow() async throws -> [String] { try await offPool { try Self.state(cluster, group: group) } }
        func count(_ sql: String) async throws -> Int { try await offPool { try cluster.count(sql) } }
        let first = try await count("SELECT coalesce(max(seq), 0) + 1 FROM kvsync_changes")
        // Distinct keys and tokens: the set-based body.
        #expect(try await pushed("d1", [Change(token: 1, key: "a", value: "a1"), Change(token: 2, key: "b", value: "b1")])
                == ["1:applied:\(first)", "2:applied:\(first + 1)"])
        #expect(try await pushed("d1", [Change(token: 1, key: "a", value: "a1"), Change(token: 2, key: "b", value: "b1")])
                == ["1:duplicate:\(first)", "2:duplicate:\(first + 1)"])
        #expect(try await pushed("d2", [Change(token: 1, key: "a", value: "a2"), Change(token: 2, key: "c", value: nil)])
                == ["1:conflict:\(first):a1", "2:applied:\(first + 2)"])
        // d1 wrote b last: its later token on a stale base is no conflict.
        #expect(try await pushed("d1", [Change(token: 3, key: "b", value: "b2")]) == ["1:applied:\(first + 3)"])
        #expect(try await pushed("d2", [Change(token: 3, key: "a", value: "a2", base: first)]) == ["1:applied:\(first + 4)"])
        #expect(try await stateNow() == ["a=a2@\(first + 4)/d2", "b=b2@\(first + 3)/d1", "c=-@\(first + 2)/d2"])
        // A repeated key, then a repeated token: the loop, change by change.
        #expect(try await pushed("d3", [Change(token: 1, key: "k", value: "k1"), Change(token: 2, key: "k", value: "k2", base: first + 5)])
                == ["1:applied:\(first + 5)", "2:applied:\(first + 6)"])
        // A token repeated with another change (two containers under one device id) refuses the batch
        // whole (revision 3): never "duplicate" for a change the server does not have.
        await #expect {
            _ = try await pushed("d3", [Change(token: 3, key: "x", value: "x1"), Change(token: 3, key: "y", value: "y1"),
                                        Change(token: 4, key: "a", value: "a3")])
        } throws: { error in
            "\(error)".contains("this device id is in use by another container")
        }
        #expect(try await stateNow().filter { $0.hasPrefix("x=") || $0.hasPrefix("y=") }.isEmpty)
        #expect(try await pushed("d3", [Change(token: 3, key: "x", value: "x1"), Change(token: 3, key: "x", value: "x1"),
                                                                    Change(token: 4, key: "a", value: "a3")])
                == ["1:applied:\(first + 7)", "2:duplicate:\(first + 7)", "3:conflict:\(first + 4):a2"])
        #expect(try await stateNow().filter { $0.hasPrefix("k=") || $0.hasPrefix("x=") || $0.hasPrefix("y=") }
                == ["k=k2@\(first + 6)/d3", "x=x1@\(first + 7)/d3"])
        #expect(try await count("SELECT last_seq FROM kvsync_groups WHERE group_id = '\(group)'") == first + 7)
        // A batch of nothing but duplicates and conflicts leaves the last sequence number alone.
        #expect(try await pushed("d3", [Change(token: 3, key: "x", value: "x1"), Change(token: 9, key: "a", value: "a3")])
                == ["1:duplicate:\(first + 7)", "2:conflict:\(first + 4):a2"])
        #expect(try await count("SELECT last_seq FROM kvsync_groups WHERE group_id = '\(group)'") == first + 7)
    }

    /// A change on a stale base from the device that wrote the current row, with a later token but an
    /// older clock (what a device that started over sends: every key with the clock of the version it
    /// knew, perhaps one planted in the log with a stamp in the past) is a conflict, settled by clock,
    /// not a later write of its own (revision 4; found by the server-state fuzzer). Both bodies.
    @Test func aDevicesOlderStampOnAStaleBaseIsAConflictEvenOverItsOwnRow() async throws {
        let group = Self.group("older-stamp")
        let cluster = try await Self.cluster(group: group)
        func pushed(_ changes: [Change]) async throws -> [String] {
            try await offPool { try Self.push(cluster, group: group, device: "d1", changes) }
        }
        let first = try await offPool { try cluster.count("SELECT coalesce(max(seq), 0) + 1 FROM kvsync_changes") }
        // Token 5 (clock 5 << 16), then token 9 stamped 3 << 16 on base 0: the set-based body.
        #expect(try await pushed([Change(token: 5, key: "a", value: "new")]) == ["1:applied:\(first)"])
        #expect(try await pushed([Change(token: 9, key: "a", value: "old", clock: 3)]) == ["1:conflict:\(first):new"])
        // The loop (a repeated key): the same.
        #expect(try await pushed([Change(token: 10, key: "a", value: "old", clock: 3), Change(token: 11, key: "a", value: "old", clock: 4)])
                == ["1:conflict:\(first):new", "2:conflict:\(first):new"])
        // A later stamp of its own on a stale base is still no conflict.
        #expect(try await pushed([Change(token: 12, key: "a", value: "newer")]) == ["1:applied:\(first + 1)"])
    }

    /// A server at this schema version whose push function is an older revision (the loop only, as
    /// the previous release made it) is given the current one by the next device that connects; the
    /// schema version stays, so devices of the previous release keep syncing. A user that may not
    /// replace the function leaves it, with a notice, and is not refused.
    @Test func anOlderRevisionOfThePushFunctionIsReplacedInPlace() async throws {
        let group = Self.group("revision")
        let cluster = try await Self.cluster(group: group)
        let signature = ServerSchema.pushSignature
        let marked = "SELECT position('\(ServerSchema.pushRevision)' IN prosrc) > 0 FROM pg_proc WHERE oid = '\(signature)'::regprocedure"
        func isMarked() async throws -> Bool {
            try await offPool { try cluster.psql(marked).trimmingCharacters(in: .whitespacesAndNewlines) == "t" }
        }
        _ = try await offPool {
            try cluster.psql("DO $$ BEGIN EXECUTE replace(pg_get_functiondef('\(signature)'::regprocedure), '\(ServerSchema.pushRevision)', 'revision 1'); END $$")
        }
        #expect(try await !isMarked())
        // Another user, which owns nothing, runs the replacement: a notice, no error, nothing replaced.
        try await offPool {
            try cluster.psql("CREATE ROLE kvsync_other; GRANT CREATE ON SCHEMA public TO kvsync_other")
            try cluster.psql("SET ROLE kvsync_other; \(ServerSchema.replacePush)")
        }
        #expect(try await !isMarked())
        // The owner's next device replaces it; the version stays, and pushes go on.
        let device = try Device(group: group)
        let replicator = try device.replicator(cluster.tcpURL)
        try device.put("after the upgrade", "k")
        let report = try await replicator.sync()
        await replicator.close()
        #expect(report.pushed == 1)
        #expect(try await isMarked())
        #expect(try await offPool { try cluster.count("SELECT version FROM kvsync_schema") } == ServerSchema.version)
    }

    /// A push costs the same however long its group's log (revision 8): every read of the log is an
    /// index probe. Up to revision 7 the check for rows numbered past the sequence bounded its scan by
    /// a volatile function, which no index could take, and read the group's whole log on every push.
    /// Counted, not timed: the rows of the log's partitions that the push's transaction read, from
    /// PostgreSQL's own statistics of the transaction (`pg_stat_xact_user_tables`).
    @Test func aPushReadsItsGroupsLogByIndexHoweverLongTheLog() async throws {
        let group = Self.group("long-log")
        let cluster = try await Self.cluster(group: group)
        let logged = 20_000
        let end = try await offPool {
            try cluster.psql("""
                INSERT INTO kvsync_groups (group_id) VALUES ('\(group)') ON CONFLICT DO NOTHING;
                INSERT INTO kvsync_changes (group_id, device, token, kind, name, key, value, hlc, base)
                    SELECT '\(group)', 'earlier', i, 'collection', 'notes', convert_to('old-' || i, 'UTF8'), '\\x76'::bytea, i::bigint << 16, 0
                    FROM generate_series(1, \(logged)) AS i;
                UPDATE kvsync_groups SET last_seq = (SELECT max(seq) FROM kvsync_changes WHERE group_id = '\(group)')
                    WHERE group_id = '\(group)'
                """)
            return try cluster.count("SELECT last_seq FROM kvsync_groups WHERE group_id = '\(group)'")
        }
        // One change, then (in the same transaction) what the transaction read of the log's tables:
        // psql prints both answers, the count last.
        @Sendable func array(_ item: String, _ type: String) -> String { "ARRAY[\(item)]::\(type)[]" }
        let read = try await offPool {
            try cluster.psql("""
                SELECT count(*) FROM kvsync_push('\(group)', 'd1', \(array("1", "bigint")), \(array("'collection'", "text")),
                                                 \(array("'notes'", "text")), \(array("'\\x6e6577'", "bytea")), \(array("'\\x31'", "bytea")),
                                                 \(array("false", "boolean")), \(array("65536", "bigint")), \(array("0", "bigint")), 60000);
                SELECT coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0) FROM pg_stat_xact_user_tables
                    WHERE relname LIKE 'kvsync_changes%'
                """).split(separator: "\n").last.map(String.init) ?? ""
        }
        print("ServerPushTests: a push of one change to a group whose log holds \(logged) changes read \(read) rows of the log")
        #expect(Int(read).map { $0 < 100 } == true, "the push read \(read) rows of a log of \(logged)")
        // And it was applied, after the log's end.
        #expect(try await offPool { try cluster.count("SELECT last_seq FROM kvsync_groups WHERE group_id = '\(group)'") } > end)
    }
}
#endif
