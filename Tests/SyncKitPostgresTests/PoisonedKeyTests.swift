#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import PostgresTesting
import TestSupport
import SyncTestSupport
import Testing

/// One value from a member that no device can decode (issue 47): a 70-deep CBOR array, stamped 1 s
/// ahead, over a key an honest device writes. It reaches the server another way than a checked push
/// (through the server's own function, as a member with a database role can), and only its key waits:
/// the device keeps syncing, a request is acknowledged for the rest and names the key, a write made
/// after the quarantine goes over it, and `kvtool sync quarantine keep-mine|drop` settles it. Through
/// a real PostgreSQL cluster each test starts and stops, and real kvtool processes.
@Suite(.serialized) struct PoisonedKeyTests {
    static func group(_ name: String) -> String { "group.com.example.poison.\(name)" }

    /// 70 nested one-item arrays around a 0: deeper than every device's decoder reads (64).
    static let deepHex = String(repeating: "81", count: 70) + "00"

    /// Mallory's value over `key` of `notes`, stamped 1 s ahead, through `kvsync_push` (no gateway).
    static func poison(_ cluster: LocalPostgresCluster, _ group: String, _ key: String, token: Int) throws {
        let hex = Hex.encode(Array(key.utf8))
        let version = try cluster.count("SELECT version FROM kvsync_state WHERE group_id = '\(group)' AND key = '\\x\(hex)'::bytea")
        try cluster.psql("""
            SELECT outcome FROM kvsync_push('\(group)', 'mallory', ARRAY[\(token)]::bigint[], ARRAY['collection'], ARRAY['notes'],
                ARRAY['\\x\(hex)'::bytea], ARRAY['\\x\(deepHex)'::bytea], ARRAY[false],
                ARRAY[(floor(extract(epoch FROM now()) * 1000)::bigint + 1000) << 16], ARRAY[\(version)]::bigint[], 60000)
            """)
        #expect(try serverValue(cluster, group, key) == deepHex)
    }

    /// The server's value of `key` of `notes`, in hex.
    static func serverValue(_ cluster: LocalPostgresCluster, _ group: String, _ key: String) throws -> String {
        try cluster.psql("SELECT encode(value, 'hex') FROM kvsync_state WHERE group_id = '\(group)' AND key = '\\x\(Hex.encode(Array(key.utf8)))'::bytea")
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func cbor(_ text: String) throws -> String { Hex.encode(try CBOREncoder().encode(text)) }

    /// Main: every request of alice's was refused "quarantine" (exit 74) from then on, also for the
    /// writes the server had; now a request is acknowledged for them, exit 76, with one line that names
    /// the held key, and so is each later one.
    @Test(.blockingWork) func aPoisonedKeyWaitsAloneAndARequestIsAcknowledgedForEverythingElse() throws {
        let cluster = try LocalPostgresCluster()
        let group = Self.group("alone")
        let alice = try Device(group: group)
        let url = cluster.tcpURL.description
        try alice.put("v1", "k")
        #expect(try alice.kvtool(["sync", "run", "--once", "--server", url]).status == 0)
        try Self.poison(cluster, group, "k", token: 1)
        try alice.put("alice's edit", "k")   // pending as she meets the poisoned value: it waits
        try alice.put("unrelated", "u")
        let run = try alice.kvtool(["sync", "run", "--once", "--server", url])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("held: 1 key waits") && run.stdout.contains("key 0x6b from mallory"), "\(run.stdout)")
        #expect(try Self.serverValue(cluster, group, "u") == Self.cbor("unrelated"))
        #expect(try Self.serverValue(cluster, group, "k") == Self.deepHex)
        for round in 0..<2 {
            let request = try alice.kvtool(["sync", "request", "--wait", "2", "--no-agent"])
            let lines = request.stdout.split(separator: "\n")
            #expect(request.status == 76, "round \(round): \(request.status) \(request.stdout) \(request.stderr)")
            #expect(lines.count == 1 && lines[0].hasPrefix("acknowledged except held keys") && lines[0].contains("key 0x6b"),
                    "\(request.stdout)")
            // A later write is acknowledged as soon as the server has it: the held key stops nothing.
            try alice.put("later \(round)", "w")
            #expect(try alice.kvtool(["sync", "run", "--once", "--server", url]).status == 0)
            #expect(try Self.serverValue(cluster, group, "w") == Self.cbor("later \(round)"))
        }
        let json = try alice.kvtool(["sync", "request", "--wait", "2", "--no-agent", "--json"])
        #expect(json.status == 76 && json.stdout.contains("\"outcome\":\"acknowledgedExceptHeld\"") && json.stdout.contains("\"held\":1"),
                "\(json.stdout)")
        #expect(try Replication.quarantine(of: alice.container).count == 1)
    }

    /// Decided where the issue was silent: a write of the key made after this device quarantined its
    /// change is the user's newer word on it, as a write on a version the device has: it goes over the
    /// poisoned value, stamped later, and every device takes it (main: it waited for good, and the
    /// server kept the poisoned value).
    @Test(.blockingWork) func aWriteAfterTheQuarantineGoesOverThePoisonedValue() throws {
        let cluster = try LocalPostgresCluster()
        let group = Self.group("rewrite")
        let alice = try Device(group: group), bob = try Device(group: group)
        let url = cluster.tcpURL.description
        try alice.put("v1", "k")
        #expect(try alice.kvtool(["sync", "run", "--once", "--server", url]).status == 0)
        try Self.poison(cluster, group, "k", token: 1)
        let pulled = try alice.kvtool(["sync", "run", "--once", "--server", url])
        #expect(pulled.status == 0 && pulled.stdout.contains("quarantined 1") && !pulled.stdout.contains("held:"), "\(pulled.stdout)")
        #expect(try bob.kvtool(["sync", "run", "--once", "--server", url]).status == 0)   // bob holds it too
        #expect(try Replication.quarantine(of: bob.container).count == 1)

        try alice.put("alice rewrites", "k")
        let rewrite = try alice.kvtool(["sync", "run", "--once", "--server", url])
        #expect(rewrite.status == 0 && rewrite.stdout.contains("pushed 1,"), "\(rewrite.stdout) \(rewrite.stderr)")
        #expect(try Self.serverValue(cluster, group, "k") == Self.cbor("alice rewrites"))
        #expect(try Replication.quarantine(of: alice.container).isEmpty)
        // Stamped later than the poisoned value: a device comparing clocks sees hers as the last word.
        let clocks = try cluster.psql("""
            SELECT (SELECT hlc FROM kvsync_state WHERE group_id = '\(group)' AND key = '\\x6b'::bytea)
                 > (SELECT max(hlc) FROM kvsync_changes WHERE group_id = '\(group)' AND device = 'mallory')
            """)
        #expect(clocks.trimmingCharacters(in: .whitespacesAndNewlines) == "t", "\(clocks)")
        #expect(try bob.kvtool(["sync", "run", "--once", "--server", url]).status == 0)
        #expect(try bob.notes.get("k") == "alice rewrites")
        #expect(try Replication.quarantine(of: bob.container).isEmpty)
        #expect(try alice.kvtool(["sync", "request", "--wait", "2", "--no-agent"]).status == 0)
    }

    /// `kvtool sync quarantine keep-mine SEQUENCE` sends alice's value over the poisoned one; `drop
    /// SEQUENCE` takes nothing of it and follows the server on. Bad arguments get one line and change
    /// nothing (main: neither command existed, and `retry` can never apply such a value).
    @Test(.blockingWork) func keepMineAndDropSettleAHeldKeyAndBadArgumentsChangeNothing() throws {
        let cluster = try LocalPostgresCluster()
        let group = Self.group("settle")
        let alice = try Device(group: group), bob = try Device(group: group)
        let url = cluster.tcpURL.description
        try alice.put("v1", "k")
        try alice.put("v1", "j")
        #expect(try alice.kvtool(["sync", "run", "--once", "--server", url]).status == 0)
        try Self.poison(cluster, group, "k", token: 1)
        try Self.poison(cluster, group, "j", token: 2)
        try alice.put("mine k", "k")
        try alice.put("mine j", "j")
        let held = try alice.kvtool(["sync", "run", "--once", "--server", url])
        #expect(held.status == 0 && held.stdout.contains("held: 2 keys wait"), "\(held.stdout) \(held.stderr)")
        let rows = try Replication.quarantine(of: alice.container)
        let k = try #require(rows.first { $0.key == Array("k".utf8) }), j = try #require(rows.first { $0.key == Array("j".utf8) })
        #expect(k.reason.contains("nesting is deeper than maxDepth (64)"), "\(k.reason)")

        let before = try alice.status()
        for (arguments, status) in [(["keep-mine", "abc"], 64), (["drop", "0"], 64), (["drop"], 64), (["keep-mine", "999999"], 1),
                                    (["keep-mine", "\(k.sequence)", "extra"], 64)] {
            let refused = try alice.kvtool(["sync", "quarantine"] + arguments)
            let lines = refused.stderr.split(separator: "\n").filter { !$0.hasPrefix("Usage:") && !$0.hasPrefix("  See ") && !$0.isEmpty }
            #expect(refused.status == Int32(status) && lines.count == 1, "\(arguments): \(refused.status) \(refused.stderr)")
        }
        let after = try alice.status()
        #expect(after.quarantined == 2 && after.pendingChanges == before.pendingChanges, "\(before) \(after)")

        let kept = try alice.kvtool(["sync", "quarantine", "keep-mine", "\(k.sequence)"])
        #expect(kept.status == 0 && kept.stdout.contains("kept this device's value of collection 'notes' key"), "\(kept.stdout) \(kept.stderr)")
        let dropped = try alice.kvtool(["sync", "quarantine", "drop", "\(j.sequence)"])
        #expect(dropped.status == 0 && dropped.stdout.contains("dropped 1 quarantined change"), "\(dropped.stdout) \(dropped.stderr)")
        #expect(try Replication.quarantine(of: alice.container).isEmpty)
        let settled = try alice.kvtool(["sync", "run", "--once", "--server", url])
        #expect(settled.status == 0 && !settled.stdout.contains("held:"), "\(settled.stdout) \(settled.stderr)")
        #expect(try Self.serverValue(cluster, group, "k") == Self.cbor("mine k"))
        // Dropped: nothing of it taken, nothing sent over it.
        #expect(try Self.serverValue(cluster, group, "j") == Self.deepHex)
        #expect(try alice.notes.get("j") == "mine j")
        #expect(try alice.kvtool(["sync", "request", "--wait", "2", "--no-agent"]).status == 0)
        // Alice follows the server from there: bob's next value of j reaches her.
        #expect(try bob.kvtool(["sync", "run", "--once", "--server", url]).status == 0)
        #expect(try bob.notes.get("k") == "mine k")
        try bob.put("bob's j", "j")
        #expect(try bob.kvtool(["sync", "run", "--once", "--server", url]).status == 0)
        #expect(try alice.kvtool(["sync", "run", "--once", "--server", url]).status == 0)
        #expect(try alice.notes.get("j") == "bob's j")
    }

    /// A device's own check before it sends (on the direct path too, where `kvsync_push` does not
    /// check): a value no device can decode that a co-tenant planted in the container's `notes`
    /// (written past the collection, recorded in history as a change of it) is not sent: the round
    /// fails with one line naming the key (exit 65), and the server gets nothing of the batch. Main:
    /// it went to the server, and every device that pulled it quarantined it.
    @Test(.blockingWork) func aDeviceNeverSendsAValueNoDeviceCanDecode() throws {
        let cluster = try LocalPostgresCluster()
        let group = Self.group("own")
        let alice = try Device(group: group)
        let url = cluster.tcpURL.description
        let deep = [UInt8](repeating: 0x81, count: 70) + [0x00]
        try alice.container.store.write(author: "co-tenant") { tx in
            let database = try #require(try tx.rawDatabase(named: Catalog.collectionDatabase("notes"), create: false))
            try tx.rawPut(database, Array("k".utf8), deep, recordingAs: .collection("notes"))
        }
        let run = try alice.kvtool(["sync", "run", "--once", "--server", url])
        #expect(run.status == 65 && run.stderr.split(separator: "\n").count == 1, "\(run.status) \(run.stdout) \(run.stderr)")
        #expect(run.stderr.contains("collection notes key 0x6b is CBOR nested deeper than 64 levels"), "\(run.stderr)")
        #expect(try cluster.count("SELECT count(*) FROM kvsync_changes WHERE group_id = '\(group)'") == 0)
        // Written again by the app, it goes.
        try alice.put("fixed", "k")
        #expect(try alice.kvtool(["sync", "run", "--once", "--server", url]).status == 0)
        #expect(try Self.serverValue(cluster, group, "k") == Self.cbor("fixed"))
    }

    /// The same through the Swift API, on a live replicator's own terms: ``Replicator/sync()``'s report
    /// names the held key, and ``Replicator/resolveQuarantined(sequence:as:)`` settles it.
    @Test func theAPIReportsAndSettlesAHeldKey() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("api")
        let alice = try Device(group: group)
        try alice.put("v1", "k")
        let replicator = try alice.replicator(cluster.tcpURL)
        try await replicator.sync()
        try Self.poison(cluster, group, "k", token: 1)
        try alice.put("mine", "k")
        let report = try await replicator.sync()
        let held = try #require(report.held)
        #expect(held.count == 1 && held.message.contains("key 0x6b from mallory"), "\(held)")
        let service = try SyncService(container: alice.container)
        #expect(try service.status().held == held)
        guard case .acknowledgedExceptHeld(_, _, let named) = try await service.request(within: .seconds(2)) else {
            Issue.record("a request with a held key was not acknowledged for the rest")
            return
        }
        #expect(named == held)
        let sequence = try #require(try Replication.quarantine(of: alice.container).first?.sequence)
        #expect(throws: ReplicationError.self) { try replicator.resolveQuarantined(sequence: sequence + 1_000, as: .keepMine) }
        let resolved = try replicator.resolveQuarantined(sequence: sequence, as: .keepMine)
        #expect(resolved.resolved == 1 && resolved.queued && resolved.target == .collection("notes"))
        #expect(try service.status().held == nil)
        let after = try await replicator.sync()
        #expect(after.held == nil && after.pushed == 1, "\(after)")
        #expect(try Self.serverValue(cluster, group, "k") == Self.cbor("mine"))
        guard case .acknowledged = try await service.request(within: .seconds(2)) else {
            Issue.record("a request after keep-mine was not acknowledged")
            return
        }
        await replicator.close()
    }
}
#endif
