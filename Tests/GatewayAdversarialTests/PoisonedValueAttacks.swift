#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import SyncTestSupport
import SyncWire
import PostgresTesting
import TestSupport
import Testing

/// A member's value that no device can decode (issue 47: a 70-deep CBOR array, stamped 1 s ahead,
/// over a key alice writes froze alice's device): refused at the gateway's push, and, for one that
/// reaches the server another way, held to its own key on alice's device until she settles it.
@Suite(.serialized) struct PoisonedValueAttacks {
    /// 70 nested one-item arrays around a 0: deeper than every device's decoder reads (64).
    static let deep = [UInt8](repeating: 0x81, count: 70) + [0x00]

    /// Main: the gateway applied it, and every device that pulled it quarantined it. Now the batch is
    /// refused whole, with a typed answer naming the key, and nothing of it reaches the log; so is a
    /// defaults value that is not CBOR. What a device can decode, as deep as the limit, still goes.
    @Test func aValueNoDeviceCanDecodeIsRefusedAtThePush() async throws {
        let arena = try await Arena("undecodable")
        let mallory = try await arena.token(["--device", "mallory"])
        let aliceToken = try await arena.token(["--device", "alice"])
        let alice = try Device(group: arena.group)
        try alice.put("v1", "k")
        #expect(try await arena.sync(alice, aliceToken).status == 0)
        let before = try await arena.log()
        let ahead = HybridTimestamp(date: Date().addingTimeInterval(1)).rawValue
        let poisoned = OutgoingChange(kind: "collection", name: "notes", key: Array("k".utf8), value: Self.deep, clock: ahead, base: 1, token: 1)
        let notCBOR = OutgoingChange(kind: "defaults", name: "settings", key: Array("theme".utf8), value: [0xff, 0x00], clock: ahead, base: 0, token: 2)
        for (changes, named) in [([try note("fine", "fine", token: 3), poisoned], "collection notes key 0x6b"),
                                 ([notCBOR], "defaults settings key 0x7468656d65")] {
            let answer = try await arena.push(mallory, changes: changes)
            #expect(answer.status == 200, "\(answer.status) \(answer.text)")
            guard case .undecodableValue(let reason) = try GatewayPushResponse(decoding: answer.body, maxValueBytes: 1 << 20) else {
                Issue.record("a value no device can decode was not refused: \(answer.text)")
                continue
            }
            #expect(reason.contains(named) && reason.contains("nothing of the batch was applied"), "\(reason)")
        }
        #expect(try await arena.log() == before, "a refused push reached the log")
        // As deep as the decoder reads: applied.
        let legal = OutgoingChange(kind: "collection", name: "blobs", key: Array("b".utf8),
                                   value: [UInt8](repeating: 0x81, count: 63) + [0x00], clock: ahead, base: 0, token: 4)
        let taken = try await arena.push(mallory, changes: [legal])
        guard case .outcomes(let outcomes) = try GatewayPushResponse(decoding: taken.body, maxValueBytes: 1 << 20) else {
            Issue.record("a value within the decoder's depth was refused: \(taken.text)")
            return
        }
        #expect(outcomes.count == 1)
        // Alice never meets it: nothing quarantined, nothing held.
        try alice.put("v2", "k")
        let run = try await arena.sync(alice, aliceToken)
        #expect(run.status == 0 && !run.stdout.contains("quarantined") && !run.stdout.contains("held:"), "\(run.stdout) \(run.stderr)")
        #expect(try Replication.quarantine(of: alice.container).isEmpty)
    }

    /// One that reaches the server another way (written through the server's function, as a member
    /// with a database role can) holds only its key: alice's other writes sync and are acknowledged,
    /// the request names the key (exit 76), and `keep-mine` / `drop` settle each key.
    @Test func aPoisonedValueThatGotInHoldsOnlyItsKeyUntilAliceSettlesIt() async throws {
        let arena = try await Arena("poisoned")
        let aliceToken = try await arena.token(["--device", "alice"])
        let alice = try Device(group: arena.group)
        try alice.put("v1", "k")
        try alice.put("v1", "j")
        #expect(try await arena.sync(alice, aliceToken).status == 0)
        let group = arena.group
        for (token, key) in [(1, "6b"), (2, "6a")] {
            try await offPool { [cluster = arena.cluster] in
                let version = try cluster.count("SELECT version FROM kvsync_state WHERE group_id = '\(group)' AND key = '\\x\(key)'::bytea")
                try cluster.psql("""
                    SELECT outcome FROM kvsync_push('\(group)', 'mallory', ARRAY[\(token)]::bigint[], ARRAY['collection'], ARRAY['notes'],
                        ARRAY['\\x\(key)'::bytea], ARRAY['\\x\(Hex.encode(Self.deep))'::bytea], ARRAY[false],
                        ARRAY[(floor(extract(epoch FROM now()) * 1000)::bigint + 1000) << 16], ARRAY[\(version)]::bigint[], 60000)
                    """)
            }
        }
        try alice.put("mine k", "k")
        try alice.put("mine j", "j")
        try alice.put("other", "u")
        let run = try await arena.sync(alice, aliceToken)
        #expect(run.status == 0 && run.stdout.contains("held: 2 keys wait"), "\(run.stdout) \(run.stderr)")
        #expect(try await arena.log().contains { $0.hasSuffix("|u|" + Hex.encode(try CBOREncoder().encode("other"))) })
        let request = try await alice.kvtoolOffPool(["sync", "request", "--wait", "2", "--no-agent"])
        #expect(request.status == 76 && request.stdout.split(separator: "\n").count == 1, "\(request.status) \(request.stdout)")
        let rows = try Replication.quarantine(of: alice.container)
        let k = try #require(rows.first { $0.key == Array("k".utf8) }), j = try #require(rows.first { $0.key == Array("j".utf8) })
        #expect(try await alice.kvtoolOffPool(["sync", "quarantine", "keep-mine", "\(k.sequence)"]).status == 0)
        #expect(try await alice.kvtoolOffPool(["sync", "quarantine", "drop", "\(j.sequence)"]).status == 0)
        let settled = try await arena.sync(alice, aliceToken)
        #expect(settled.status == 0 && !settled.stdout.contains("held:"), "\(settled.stdout) \(settled.stderr)")
        let log = try await arena.log()
        #expect(log.last { $0.contains("|k|") }?.hasSuffix(Hex.encode(try CBOREncoder().encode("mine k"))) == true, "\(log)")
        #expect(log.last { $0.contains("|j|") }?.contains("|mallory|") == true, "\(log)")
        #expect(try await alice.kvtoolOffPool(["sync", "request", "--wait", "2", "--no-agent"]).status == 0)
    }
}
#endif
