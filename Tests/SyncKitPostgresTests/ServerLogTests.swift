#if PostgreSQL
import Foundation
import KVStore
import SyncKit
@testable import SyncKitPostgres
import PostgresTesting
import TestSupport
import SyncTestSupport
import Testing
import Workloads
#if canImport(Glibc)
import Glibc
#endif

/// What the server's tables may hold besides what pushes wrote (issue 46, finding 2): rows numbered
/// past the log's end (`kvsync_groups.last_seq`), planted by anyone with write access to the tables
/// (the attacker RELIABILITY.md names) or left by a restore that did not update the counter, and a
/// server that keeps moving its log's end. None of it may make a round start over more than once,
/// refuse a push, hide a later push from devices, or empty a device's quarantine.
///
/// Devices sync as `kvtool sync run --once` processes with a deadline: a round that goes round for
/// good (what main did) is killed at it, and the test fails naming it.
@Suite(.serialized) struct ServerLogTests {
    static func group(_ name: String) -> String { "group.com.example.serverlog.\(name)" }

    /// A device's way to the server: the database, or a gateway with a credential of its own.
    struct Path {
        var arguments: [String]
    }

    static func path(_ name: String, _ cluster: LocalPostgresCluster, group: String, device: String,
                     gateway: inout (process: BackgroundProcess, url: String)?) async throws -> Path {
        guard name == "gateway" else { return Path(arguments: ["--server", cluster.tcpURL.description]) }
        if gateway == nil { gateway = try await startGateway(cluster) }
        let token = try await issueToken(cluster, ["--group", group, "--device", device])
        return Path(arguments: ["--server", gateway!.url, "--token", token])
    }

    /// `kvtool sync run --once` on `device` within 60 s (killed and failed past it); its output.
    static func sync(_ device: Device, _ path: Path, expectSuccess: Bool = true,
                     sourceLocation: SourceLocation = #_sourceLocation) async throws -> ProcessResult {
        let result = try await offPool { try device.kvtool(["sync", "run", "--once"] + path.arguments, timeout: 60) }
        if expectSuccess {
            #expect(result.status == 0, "\(result.stdout) \(result.stderr)", sourceLocation: sourceLocation)
        }
        return result
    }

    static func psql(_ cluster: LocalPostgresCluster, _ sql: String) async throws -> String {
        try await offPool { try cluster.psql(sql) }
    }

    static func count(_ cluster: LocalPostgresCluster, _ sql: String) async throws -> Int {
        try await offPool { try cluster.count(sql) }
    }

    /// `INSERT` of a `notes` row of `group` from the device `mallory`, at `seq` (a SQL expression).
    static func plant(_ cluster: LocalPostgresCluster, group: String, seq: String, token: Int, key: String, value: String = "planted") async throws {
        let bytes = "'\\x" + Hex.encode(try CBOREncoder().encode(value)) + "'::bytea"
        _ = try await psql(cluster, """
            INSERT INTO kvsync_changes (seq, group_id, device, token, kind, name, key, value, hlc, base)
            VALUES (\(seq), '\(group)', 'mallory', \(token), 'collection', 'notes', '\\x\(Hex.encode(Array(key.utf8)))'::bytea,
                    \(bytes), \(HybridTimestamp(date: Date()).rawValue), 0)
            """)
    }

    /// Rows past the log's end are read around: a device's round neither says "another server" nor
    /// starts over, nor empties its quarantine (main: about 30 restarts a second, for good, the
    /// quarantine emptied each time). A push after them is numbered before them and still reaches
    /// every device (main: the push took the planted number as the log's end, and the next push,
    /// numbered below it, was never pulled by a device past it). Rows planted at the very numbers
    /// the next push draws are stepped over (main: the push failed on the primary key).
    @Test(arguments: ["direct", "gateway"]) func rowsPastTheLogsEndNeitherRestartARoundNorHideLaterPushes(path name: String) async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("past-end-\(name)")
        var gateway: (process: BackgroundProcess, url: String)?
        defer { gateway?.process.kill(SIGKILL) }
        let a = try Device(group: group), b = try Device(group: group)
        let pathA = Path(arguments: ["--server", cluster.tcpURL.description])
        let pathB = try await Self.path(name, cluster, group: group, device: "b", gateway: &gateway)
        try a.put("1", "k")
        _ = try await Self.sync(a, pathA)
        _ = try await Self.sync(b, pathB)
        #expect(try b.notes.get("k") == "1")
        // A row no device can read, taken into the log by a's next push: b quarantines it.
        _ = try await Self.psql(cluster, """
            INSERT INTO kvsync_changes (group_id, device, token, kind, name, key, value, hlc, base)
            VALUES ('\(group)', 'mallory', 1, 'collection', 'notes', '\\x6271'::bytea, '\\xff'::bytea, 1, 0)
            """)
        try a.put("2", "k")
        _ = try await Self.sync(a, pathA)
        _ = try await Self.sync(b, pathB)
        #expect(try b.status().quarantined == 1)
        #expect(try b.notes.get("k") == "2")

        // Five rows far past the log's end (and past the sequence).
        let last = try await Self.count(cluster, "SELECT last_seq FROM kvsync_groups WHERE group_id = '\(group)'")
        for index in 0..<5 {
            try await Self.plant(cluster, group: group, seq: "\(last + 1_000_000 + index)", token: 100 + index, key: "far\(index)")
        }
        let round = try await Self.sync(b, pathB)
        #expect(!round.stdout.contains("another server"), "\(round.stdout)")
        #expect(try b.status().quarantined == 1)
        #expect(try b.notes.get("far0") == nil)
        // a pushes twice; b gets both, and nothing planted.
        try a.put("3", "k")
        _ = try await Self.sync(a, pathA)
        try a.put("4", "k2")
        _ = try await Self.sync(a, pathA)
        #expect(try await Self.count(cluster, "SELECT last_seq FROM kvsync_groups WHERE group_id = '\(group)'") < last + 1_000_000)
        let after = try await Self.sync(b, pathB)
        #expect(!after.stdout.contains("another server"), "\(after.stdout)")
        #expect(try b.notes.get("k") == "3" && b.notes.get("k2") == "4")
        #expect(try b.notes.get("far0") == nil)

        // Rows at the next three numbers the sequence gives: a's push steps over them, and they join
        // the log in their place (the sequence has passed them), as any row of the log.
        for index in 0..<3 {
            try await Self.plant(cluster, group: group, seq: "(SELECT last_value FROM kvsync_changes_seq_seq) + \(index + 1)",
                                 token: 200 + index, key: "next\(index)")
        }
        try a.write { tx in
            for index in 0..<3 { try a.notes.put("a\(index)", forKey: "mine\(index)", in: tx) }
        }
        _ = try await Self.sync(a, pathA)
        #expect(try a.status().pendingChanges == 0)
        let third = try await Self.sync(b, pathB)
        #expect(!third.stdout.contains("another server"), "\(third.stdout)")
        #expect(try (0..<3).map { try b.notes.get("mine\($0)") } == ["a0", "a1", "a2"])
        #expect(try (0..<3).map { try b.notes.get("next\($0)") } == ["planted", "planted", "planted"])
        #expect(try b.status().quarantined == 1)
        _ = try await Self.sync(a, pathA)
        #expect(try a.noteLines() == b.noteLines())
    }

    /// A quarantined change stays quarantined when the device starts over with another server (main:
    /// the quarantine was emptied), as the previous server's: listed with its number on that server,
    /// holding back none of the device's writes, and superseded by a version of its key that the
    /// server the device follows now gives.
    @Test func aQuarantinedChangeOutlivesAnotherServer() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("another-server")
        let a = try Device(group: group), b = try Device(group: group)
        let path = Path(arguments: ["--server", cluster.tcpURL.description])
        _ = try await Self.sync(a, path)
        let planted = try await Self.count(cluster, """
            INSERT INTO kvsync_changes (group_id, device, token, kind, name, key, value, hlc, base)
            VALUES ('\(group)', 'mallory', 1, 'collection', 'notes', '\\x71'::bytea, '\\xff'::bytea, 1, 0) RETURNING seq
            """)
        try a.put("a's", "other")
        _ = try await Self.sync(a, path)
        _ = try await Self.sync(b, path)
        #expect(try Replication.quarantine(of: b.container).map(\.sequence) == [Int64(planted)])
        // Another server: the group's tables emptied, and a new id.
        _ = try await Self.psql(cluster, """
            DELETE FROM kvsync_changes WHERE group_id = '\(group)'; DELETE FROM kvsync_state WHERE group_id = '\(group)';
            UPDATE kvsync_groups SET last_seq = 0 WHERE group_id = '\(group)'; UPDATE kvsync_schema SET server_id = gen_random_uuid();
            """)
        let round = try await Self.sync(b, path)
        #expect(round.stdout.components(separatedBy: "another server").count == 2, "\(round.stdout)")
        let kept = try Replication.quarantine(of: b.container)
        #expect(kept.count == 1 && kept.first?.fromPreviousServer == true && kept.first?.previousSequence == Int64(planted), "\(kept)")
        #expect(kept.first.map { "\($0)" }?.hasPrefix("change \(planted) of the previous server") == true, "\(kept)")
        let listed = try await offPool { try b.kvtool(["sync", "quarantine"]) }
        #expect(listed.stdout.hasPrefix("previous:\(planted)\t"), "\(listed.stdout)")
        // b's write of the same key is sent (nothing holds it back), and a gets it.
        try b.put("b's", "q")
        _ = try await Self.sync(b, path)
        #expect(try b.status().pendingChanges == 0)
        _ = try await Self.sync(a, path)
        #expect(try a.notes.get("q") == "b's")
        // That version of its key supersedes it, as b records the server's answer to its push (issue
        // 47: before, a retry found it superseded).
        let retried = try await offPool { try b.kvtool(["sync", "quarantine", "retry"]) }
        #expect(retried.stdout.contains("; 0 still quarantined"), "\(retried.stdout)")
        #expect(try b.status().quarantined == 0)
    }

    /// A row under this device's own id, stamped far ahead (planted, as the server-state fuzzer does):
    /// the device takes it as its own change, but never sends the key with that clock after starting
    /// over with another server. Before: it sent the key with the clock it knew, and after the
    /// start-over every push was refused ("their clock is … ahead of the server's", exit
    /// 75), round after round, for good (the fuzzer, seed 653617069).
    @Test func aRowUnderThisDevicesIdStampedFarAheadDoesNotStopItsPushes() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("own-id-ahead")
        let a = try Device(group: group), b = try Device(group: group)
        let path = Path(arguments: ["--server", cluster.tcpURL.description])
        try b.put("b's", "k")
        _ = try await Self.sync(b, path)
        let id = try #require(try b.status().device)
        // A century ahead, under b's id, with a token b never sent; a's push takes it into the log.
        let ahead = HybridTimestamp(date: Date().addingTimeInterval(100 * 365 * 86_400)).rawValue
        let value = "'\\x" + Hex.encode(try CBOREncoder().encode("planted")) + "'::bytea"
        _ = try await Self.psql(cluster, """
            INSERT INTO kvsync_changes (group_id, device, token, kind, name, key, value, hlc, base)
            VALUES ('\(group)', '\(id)', -5, 'collection', 'notes', '\\x6b'::bytea, \(value), \(ahead), 0)
            """)
        try a.put("a's", "other")
        _ = try await Self.sync(a, path)
        _ = try await Self.sync(b, path)
        #expect(try b.notes.get("k") == "b's")
        // Another server (a new id): b starts over and sends every key again, and the server takes them.
        _ = try await Self.psql(cluster, "UPDATE kvsync_schema SET server_id = gen_random_uuid()")
        let round = try await Self.sync(b, path)
        #expect(round.stdout.contains("another server"), "\(round.stdout)")
        try b.put("b's later", "k2")
        _ = try await Self.sync(b, path)
        #expect(try b.status().pendingChanges == 0)
        _ = try await Self.sync(a, path)
        #expect(try a.notes.get("k2") == "b's later")
    }

    /// A value pulled for a collection whose type an app registered with kvtool (the demo's records,
    /// and its push inbox, replicated by name) that is valid CBOR but not the type, a key that is not
    /// the collection's, and a value that is not CBOR at all: each is quarantined with its reason, not
    /// stored, and `kvtool check` passes afterwards (main: the inbox's were stored, and `check` failed
    /// on every device that pulled them). The reasons are the ones `check` gives.
    @Test func aValueThatIsNotItsCollectionsTypeIsQuarantinedNotStored() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("typed")
        let path = Path(arguments: ["--server", cluster.tcpURL.description])
        let a = TemporaryDirectory(), b = TemporaryDirectory()
        let day = LogicalDay(dayNumber: 19_800)
        let key = Pair(Date(timeIntervalSince1970: 1_800_000_000), UUID())
        for directory in [a, b] {
            let container = try SharedContainer(groupIdentifier: group, root: directory.path)
            _ = try History.attach(to: container)
            _ = try ChecklistStore(store: container.store)
            _ = try PushSDKStore(container: container)
            _ = try container.store.collection("notes", key: String.self, value: String.self)
            try Replication.enable(.collection(ChecklistStore.recordsName), in: container)
            try Replication.enable(.collection(PushSDKStore.collectionName), in: container)
            try Replication.enable(.collection("notes"), in: container)
        }
        func kvtool(_ directory: TemporaryDirectory, _ arguments: [String]) async throws -> ProcessResult {
            try await offPool { try run(productsDirectory() + "/kvtool", arguments + ["--root", directory.path, "--group", group], timeout: 60) }
        }
        do {
            let container = try SharedContainer(groupIdentifier: group, root: a.path)
            _ = try History.attach(to: container)
            try ChecklistStore(store: container.store).records.put(DailyRecord(day: day, scores: ["think.1": 4], memos: [:]), forKey: day)
        }
        #expect(try await kvtool(a, ["sync", "run", "--once"] + path.arguments).status == 0)
        let encoder = CBOREncoder()
        let planted: [(name: String, key: [UInt8], value: [UInt8])] = [
            (ChecklistStore.recordsName, day.encodedKey, try encoder.encode(["day": 3, "scores": 4])),
            (PushSDKStore.collectionName, key.encodedKey, try encoder.encode(["id": 1])),
            (PushSDKStore.collectionName, [0x6b, 0x00], try encoder.encode(ReceivedNotification(
                id: key.second, receivedAt: key.first, status: .shown, payload: nil, error: nil, rawJSON: "{}"))),
            (PushSDKStore.collectionName, key.encodedKey, [0xff]),
            // A collection no app types: its catalog's encoding is still checked.
            ("notes", Array("n".utf8), [0xff]),
        ]
        for (index, row) in planted.enumerated() {
            _ = try await Self.psql(cluster, """
                INSERT INTO kvsync_changes (group_id, device, token, kind, name, key, value, hlc, base)
                VALUES ('\(group)', 'mallory', \(index + 1), 'collection', '\(row.name)', '\\x\(Hex.encode(row.key))'::bytea,
                        '\\x\(Hex.encode(row.value))'::bytea, \(HybridTimestamp(date: Date()).rawValue), 0)
                """)
        }
        // a's next push takes them into the log.
        do {
            let container = try SharedContainer(groupIdentifier: group, root: a.path)
            _ = try History.attach(to: container)
            try ChecklistStore(store: container.store).records.put(DailyRecord(day: day.advanced(by: 1), scores: ["think.1": 2], memos: [:]), forKey: day.advanced(by: 1))
        }
        #expect(try await kvtool(a, ["sync", "run", "--once"] + path.arguments).status == 0)
        let round = try await kvtool(b, ["sync", "run", "--once"] + path.arguments)
        #expect(round.status == 0, "\(round.stderr)")
        #expect(round.stdout.contains("quarantined 5"), "\(round.stdout)")
        let listed = try await kvtool(b, ["sync", "quarantine"]).stdout
        for reason in ["the value is not a DailyRecord: type mismatch", "the value is not a ReceivedNotification: type mismatch",
                       "the key does not decode as tuple(date,uuid)", "the value is not a ReceivedNotification: malformed input",
                       "the value at n is not valid CBOR"] {
            #expect(listed.contains(reason), "\(reason): \(listed)")
        }
        #expect(listed.components(separatedBy: "(the checklist app cannot read it)").count == 2, "\(listed)")
        let check = try await kvtool(b, ["check"])
        #expect(check.status == 0, "\(check.stdout) \(check.stderr)")
        // The honest records arrived.
        let container = try SharedContainer(groupIdentifier: group, root: b.path)
        #expect(try ChecklistStore(store: container.store).records.count() == 2)
        #expect(try PushSDKStore(container: container).received.count() == 0)
        #expect(try container.store.untypedCollection(named: "notes").collection.count() == 0)
    }

    /// A row no replicator writes (here a negative clock) stays quarantined when the quarantine is
    /// retried: what is wrong with the row does not change (main: its clock had been read as 0 and the
    /// retry applied it; found by the server-state fuzzer).
    @Test func aRowNoReplicatorWritesStaysQuarantinedOnRetry() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("retry-row")
        let a = try Device(group: group), b = try Device(group: group)
        let path = Path(arguments: ["--server", cluster.tcpURL.description])
        _ = try await Self.sync(a, path)
        _ = try await Self.psql(cluster, """
            INSERT INTO kvsync_changes (group_id, device, token, kind, name, key, value, hlc, base)
            VALUES ('\(group)', 'mallory', 1, 'collection', 'notes', '\\x6b'::bytea, '\\x\(Hex.encode(try CBOREncoder().encode("planted")))'::bytea, -5, 0)
            """)
        try a.put("a's", "other")
        _ = try await Self.sync(a, path)
        _ = try await Self.sync(b, path)
        #expect(try Replication.quarantine(of: b.container).first?.reason.contains("its clock -5 is negative") == true)
        let retried = try await offPool { try b.kvtool(["sync", "quarantine", "retry"]) }
        #expect(retried.stdout.contains("applied 0, superseded 0; 1 still quarantined"), "\(retried.stdout)")
        #expect(try b.notes.get("k") == nil)
    }

    /// Through a gateway whose value limit is higher than the device's, a value over the device's limit
    /// is quarantined as "over the limit", as on the direct path (main: the gateway's whole answer was
    /// refused as malformed, and the device failed every round; found by the server-state fuzzer).
    @Test func aValueOverTheDevicesLimitThroughAGatewayIsQuarantinedAndTheRoundGoesOn() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("gateway-limit")
        let (gateway, url) = try await startGateway(cluster)
        defer { gateway.kill(SIGKILL) }
        let a = try Device(group: group), b = try Device(group: group)
        try a.put(String(repeating: "x", count: 2_000), "large")
        try a.put("small", "small")
        let ra = try a.replicator(cluster.tcpURL)
        try await ra.sync()
        await ra.close()
        var options = Replicator.Options()
        options.maxValueBytes = 1_024
        let rb = try Replicator(container: b.container, endpoint: .gateway(try SyncGatewayURL(url), token: try await issueToken(cluster, ["--group", group])),
                                targets: b.targets, options: options)
        let report = try await rb.sync()
        await rb.close()
        #expect(report.quarantined == 1)
        #expect(try b.notes.get("small") == "small" && b.notes.get("large") == nil)
        let kept = try Replication.quarantine(of: b.container)
        #expect(kept.first?.reason.contains("over the 1024-byte limit") == true && kept.first?.valueKept == false, "\(kept)")
    }

    /// A server whose log's end moves back and forth under a device (here a view in place of
    /// `kvsync_groups` that answers 0 every other time; a lying gateway could answer so as well)
    /// makes the round start over once, then stop with one line that says so (main: the device
    /// started over, pulled, and started over again, for good).
    @Test func aLogEndThatKeepsMovingBackStopsTheRoundAfterOneRestart() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("moving-end")
        let a = try Device(group: group), b = try Device(group: group)
        let path = Path(arguments: ["--server", cluster.tcpURL.description])
        for index in 0..<3 { try a.put("\(index)", "k\(index)") }
        _ = try await Self.sync(a, path)
        _ = try await Self.psql(cluster, """
            ALTER TABLE kvsync_groups RENAME TO kvsync_groups_real;
            CREATE SEQUENCE flip;
            CREATE FUNCTION lying() RETURNS TABLE (group_id text, last_seq bigint, pruned_through bigint) LANGUAGE plpgsql AS $$
            DECLARE f bigint := nextval('flip');
            BEGIN
                RETURN QUERY SELECT g.group_id, CASE WHEN f % 2 = 0 THEN 0::bigint ELSE g.last_seq END, g.pruned_through
                             FROM kvsync_groups_real g;
            END $$;
            CREATE VIEW kvsync_groups AS SELECT * FROM lying();
            """)
        let round = try await Self.sync(b, path, expectSuccess: false)
        #expect(round.status != 0, "\(round.stdout)")
        #expect(round.stderr.contains("the server made this device start over twice in one round"), "\(round.stderr)")
        #expect(round.stdout.components(separatedBy: "another server").count <= 2, "\(round.stdout)")
        #expect(try b.status().lastError?.contains("twice in one round") == true)
    }
}
#endif
