#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import PostgresTesting
import TestSupport
import SyncTestSupport
import Testing

/// Devices that disagree: a clock that is wrong, and values a device cannot read. Through a real
/// PostgreSQL cluster each test starts and stops, and real kvtool processes.
@Suite(.serialized) struct ReplicationSkewTests {
    static func group(_ name: String) -> String { "group.com.example.skew.\(name)" }

    /// Makes the device's history clock jump `seconds` ahead, as its wall clock would: the next
    /// write is stamped from then.
    static func moveClock(of device: Device, ahead seconds: TimeInterval) throws {
        let future = Date().addingTimeInterval(seconds)
        let adopted = try device.container.store.write { tx in
            try device.history.observeClock(HybridTimestamp(date: future), now: future, in: tx)
        }
        #expect(adopted)
    }

    /// The latest stamp a device recorded for `key` of its notes.
    static func stamp(of device: Device, _ key: String) throws -> HybridTimestamp {
        let entries = try device.history.changes(since: .zero, matching: HistoryFilter(targets: [.collection("notes")]))
            .transactions?.flatMap(\.entries) ?? []
        return try #require(entries.last { $0.key == Array(key.utf8) }?.clock)
    }

    @Test(.blockingWork) func aPushStampedTooFarAheadIsRefusedWithItsOffsetAndKvtoolExits75() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("push")
        let a = try Device(group: group), b = try Device(group: group)
        try b.put("from b", "b")
        do {
            let rb = try b.replicator(cluster.tcpURL)
            try await rb.sync()
            await rb.close()
        }
        try Self.moveClock(of: a, ahead: 86_400)
        try a.put("from tomorrow", "k")
        do {
            let ra = try a.replicator(cluster.tcpURL)
            do {
                try await ra.sync()
                Issue.record("a change stamped a day ahead was accepted")
            } catch let error as ReplicationError {
                guard case .clockAhead(let ahead, let limit) = error else { throw error }
                #expect(ahead > .seconds(86_000) && ahead < .seconds(86_500), "\(ahead)")
                #expect(limit == .seconds(60))
                #expect("\(error)".contains("ahead of the server's (the limit is 60 s)"), "\(error)")
            }
            await ra.close()
        }
        #expect(try cluster.count("SELECT count(*) FROM kvsync_changes WHERE key = '\\x6b'::bytea") == 0)
        #expect(try a.status().pendingChanges == 1)
        // Refused, it still received the others' changes.
        #expect(try a.notes.get("b") == "from b")
        #expect(try a.status().lastError?.contains("ahead of the server's") == true)

        let url = cluster.tcpURL.description
        let refused = try a.kvtool(["sync", "run", "--once", "--server", url])
        #expect(refused.status == 75, "\(refused.stderr)")
        #expect(refused.stderr.split(separator: "\n").count == 1 && refused.stderr.contains("clock is 86"), "\(refused.stderr)")
        // The bound is a setting, the server's first: a device's wider one alone changes nothing (the
        // server takes the lower of the two); once the owner widens the server's, the change goes through.
        let asked = try a.kvtool(["sync", "run", "--once", "--server", url, "--max-clock-skew", "90000"])
        #expect(asked.status == 75, "\(asked.stderr)")
        #expect(try cluster.count("SELECT count(*) FROM kvsync_changes WHERE key = '\\x6b'::bytea") == 0)
        let owner = try run(productsDirectory() + "/kvtool", ["sync", "setup", "--database", url, "--max-clock-skew", "90000"])
        #expect(owner.status == 0, "\(owner.stderr)")
        let wide = try a.kvtool(["sync", "run", "--once", "--server", url, "--max-clock-skew", "90000"])
        #expect(wide.status == 0, "\(wide.stderr)")
        #expect(try cluster.count("SELECT count(*) FROM kvsync_changes WHERE key = '\\x6b'::bytea") == 1)
        let bad = try a.kvtool(["sync", "run", "--once", "--server", url, "--max-clock-skew", "-1"])
        #expect(bad.status == 64 && bad.stderr.contains("--max-clock-skew"), "\(bad.stderr)")
    }

    /// B's clock is an hour slow: A's changes look an hour ahead to it. They are quarantined, their
    /// stamps are not adopted, and once B's clock is right, `kvtool sync quarantine retry` applies them.
    @Test(.blockingWork) func aPulledChangeTooFarAheadIsQuarantinedUntilTheClocksAgree() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("pull")
        let a = try Device(group: group), b = try Device(group: group)
        try b.put("b's own", "b")
        try a.put("v1", "k")
        let ra = try a.replicator(cluster.tcpURL)
        try await ra.sync()
        let stampOfA = try Self.stamp(of: a, "k")
        let clockOfB = try b.history.clock()
        #expect(clockOfB <= stampOfA)
        var slow = Replicator.Options()
        slow.clock = { Date().addingTimeInterval(-3_600) }
        do {
            let events = Locked<[SyncEvent]>([])
            let rb = try b.replicator(cluster.tcpURL, options: slow) { event in events.withLock { $0.append(event) } }
            let report = try await rb.sync()
            #expect(report.quarantined == 1 && report.pulled == 0)
            #expect(events.withLock { $0.contains { if case .quarantined(let change) = $0 { change.key == Array("k".utf8) } else { false } } })
            await rb.close()
        }
        #expect(try b.notes.get("k") == nil)
        #expect(try b.history.clock() == clockOfB)   // A's stamp was not adopted
        let quarantined = try Replication.quarantine(of: b.container)
        #expect(quarantined.count == 1)
        #expect(quarantined.first?.reason.contains("ahead of this device's (the limit is 60 s)") == true, "\(quarantined)")
        // B's own change still went out.
        #expect(try cluster.count("SELECT count(*) FROM kvsync_state WHERE key = '\\x62'::bytea") == 1)

        let list = try b.kvtool(["sync", "quarantine", "--json"])
        #expect(list.status == 0, "\(list.stderr)")
        // The key as `kvtool get` takes it, and its bytes.
        #expect(list.stdout.contains("\"key\":\"k\",\"keyHex\":\"6b\"") && list.stdout.contains("\"device\":\"\(ra.device)\"")
                && list.stdout.contains("\"sequence\":\(quarantined[0].sequence)") && list.stdout.contains("ahead of this device"),
                "\(list.stdout)")
        let status = try b.kvtool(["sync", "status", "--json"])
        #expect(status.stdout.contains("\"quarantined\":1"), "\(status.stdout)")
        // kvtool's own clock is right: the retry applies the change.
        let retry = try b.kvtool(["sync", "quarantine", "retry"])
        #expect(retry.status == 0 && retry.stdout.contains("applied 1, superseded 0; 0 still quarantined"), "\(retry.stdout) \(retry.stderr)")
        #expect(try b.notes.get("k") == "v1")
        #expect(try b.history.clock() >= stampOfA)
        #expect(try Replication.quarantine(of: b.container).isEmpty)
        #expect(try b.kvtool(["sync", "quarantine"]).stdout.contains("nothing is quarantined"))
        await ra.close()
    }

    struct RecordV2: Codable, Equatable { var a: String; var b: Int; var c: String }
    struct RecordV1: Codable, Equatable { var a: String; var b: Int }

    /// The newer app (A) writes {a, b, c}; the older app (B) edits a and writes its record back. After
    /// syncing, both hold the new a and the old c, and so does the server.
    @Test func anOlderAppKeepsTheFieldsOfANewerOne() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("versions")
        let a = try Device(group: group), b = try Device(group: group)
        let recordsA = try a.container.store.collection("records", key: String.self, value: RecordV2.self)
        let recordsB = try b.container.store.collection("records", key: String.self, value: RecordV1.self)
        try Replication.enable(.collection("records"), in: a.container)
        try Replication.enable(.collection("records"), in: b.container)
        let ra = try Replicator(container: a.container, server: cluster.tcpURL, targets: [.collection(recordsA)])
        let rb = try Replicator(container: b.container, server: cluster.tcpURL, targets: [.collection(recordsB)])
        try recordsA.put(RecordV2(a: "first", b: 1, c: "only v2 knows"), forKey: "r")
        try await ra.sync(); try await rb.sync()
        var record = try #require(try recordsB.get("r"))
        record.a = "edited by v1"
        try recordsB.put(record, forKey: "r")
        try await rb.sync(); try await ra.sync()
        #expect(try recordsA.get("r") == RecordV2(a: "edited by v1", b: 1, c: "only v2 knows"))
        let v2OnB = try b.container.store.collection("records", key: String.self, value: RecordV2.self)
        #expect(try v2OnB.get("r") == RecordV2(a: "edited by v1", b: 1, c: "only v2 knows"))
        let server = try cluster.psql("SELECT encode(value, 'hex') FROM kvsync_state WHERE group_id = '\(group)' AND name = 'records'")
        #expect(server.trimmingCharacters(in: .whitespacesAndNewlines)
                == Hex.encode(try CBOREncoder().encode(RecordV2(a: "edited by v1", b: 1, c: "only v2 knows"))))
        #expect(try a.status().conflictsResolved == 0 && b.status().conflictsResolved == 0)
        await ra.close(); await rb.close()
    }

    /// A newer app writes a value over k that B cannot read, while B has its own later write of k
    /// pending. B quarantines the server's value and holds its write back: the server keeps the newer
    /// app's value, sync after sync, and nothing stalls.
    @Test func aQuarantinedKeyIsNeverPushedOverTheServersNewerValue() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("hold")
        let a = try Device(group: group), b = try Device(group: group)
        try a.put("v1", "k")
        let ra = try a.replicator(cluster.tcpURL), rb = try b.replicator(cluster.tcpURL)
        try await ra.sync(); try await rb.sync()
        #expect(try b.notes.get("k") == "v1")
        let version = try cluster.count("SELECT version FROM kvsync_state WHERE group_id = '\(group)' AND key = '\\x6b'::bytea")
        // The newer app's device, through the server's own function (its clock: now).
        try cluster.psql("""
            SELECT outcome FROM kvsync_push('\(group)', 'newer-app', ARRAY[1]::bigint[], ARRAY['collection'], ARRAY['notes'],
                ARRAY['\\x6b'::bytea], ARRAY['\\xff'::bytea], ARRAY[false], ARRAY[floor(extract(epoch FROM now()) * 1000)::bigint << 16],
                ARRAY[\(version)]::bigint[], 60000)
            """)
        try b.put("b's later edit", "k")   // stamped after the newer app's: it would win last-writer-wins
        try b.put("unrelated", "u")
        for _ in 0..<3 {
            let report = try await rb.sync()
            #expect(report.pushed <= 1)
            #expect(try cluster.psql("SELECT encode(value, 'hex') || '|' || device FROM kvsync_state WHERE group_id = '\(group)' AND key = '\\x6b'::bytea")
                        .trimmingCharacters(in: .whitespacesAndNewlines) == "ff|newer-app")
        }
        #expect(try cluster.storedNotes(group: group) == (["6b:ff"] + b.storedNotes().filter { !$0.hasPrefix("6b:") }).sorted())
        #expect(try b.notes.get("k") == "b's later edit")
        let status = try b.status()
        #expect(status.quarantined == 1 && status.pendingChanges == 1, "\(status)")
        // A, whose app cannot read it either, holds it too and goes on.
        let report = try await ra.sync()
        #expect(report.quarantined == 1)
        #expect(try a.notes.get("u") == "unrelated")
        await ra.close(); await rb.close()
    }
}
#endif
