#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import PostgresTesting
import TestSupport
import SyncTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A device's side of a write the server refuses (issue 50): a validator of `notes` (the
/// `kvsync_validators` registry) refuses a note that says "forbidden". In one batch of three, the
/// middle one is refused: the other two land, the device puts the server's value back and keeps the
/// refused write with the reason, and later changes land. On the direct path and through a gateway,
/// on one cluster; then `kvtool sync rejected list|retry|discard`.
@Suite(.serialized) struct RejectedWriteTests {
    static let reason = "a note must not say forbidden"

    @Test func aRefusedWriteIsPutBackKeptWithItsReasonAndBlocksNothing() async throws {
        let started = ContinuousClock.now
        let cluster = try await offPool { try LocalPostgresCluster() }
        let (gateway, url) = try await startGateway(cluster)
        defer { gateway.kill(SIGKILL) }
        try await offPool {
            try cluster.registerValidator("notes_forbidden", of: "notes", reason: """
                CASE WHEN strpos(\(LocalPostgresCluster.noteText), 'forbidden') > 0 THEN '\(Self.reason)' END
                """)
        }
        // The direct path.
        let group = "group.com.example.rejected.direct"
        let a = try Device(group: group)
        try await expectARefusalToBlockNothing(cluster, group: group, a) { events in try a.replicator(cluster.tcpURL, events: events) }

        // Through a gateway, with a credential.
        let viaGateway = "group.com.example.rejected.gateway"
        let token = try await issueToken(cluster, ["--group", viaGateway, "--device", "b"])
        let b = try Device(group: viaGateway)
        try await expectARefusalToBlockNothing(cluster, group: viaGateway, b) { events in
            try Replicator(container: b.container, endpoint: .gateway(try SyncGatewayURL(url), token: token), targets: b.targets, events: events)
        }

        // kvtool: the run's line, the list, a retry (refused again: a new record) and a discard.
        let listed = try await a.kvtoolOffPool(["sync", "rejected", "--json"])
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains("\"key\":\"k2\"") && listed.stdout.contains("\"value\":\"a forbidden note\"")
                && listed.stdout.contains("\"reason\":\"\(Self.reason)\"") && listed.stdout.contains("\"id\":1"), "\(listed.stdout)")
        let retried = try await a.kvtoolOffPool(["sync", "rejected", "retry", "1"])
        #expect(retried.status == 0 && retried.stdout.contains("wrote rejected write 1 of collection 'notes' key k2 again"), "\(retried.stdout) \(retried.stderr)")
        #expect(try a.notes.get("k2") == "a forbidden note" && a.status().pendingChanges == 1 && a.status().rejected == 0)
        let run = try await a.kvtoolOffPool(["sync", "run", "--once", "--server", cluster.tcpURL.description])
        #expect(run.status == 0 && run.stdout.contains("rejected: write 2 of collection 'notes' key k2 refused by the server: \(Self.reason)")
                && run.stdout.contains("rejected 1"), "\(run.stdout) \(run.stderr)")
        #expect(try a.notes.get("k2") == "fine now" && a.status().pendingChanges == 0)
        #expect(try Replication.rejected(in: a.container).map(\.id) == [2])
        let discarded = try await a.kvtoolOffPool(["sync", "rejected", "discard", "2"])
        #expect(discarded.status == 0 && discarded.stdout.contains("discarded rejected write 2"), "\(discarded.stdout) \(discarded.stderr)")
        #expect(try Replication.rejected(in: a.container).isEmpty && a.notes.get("k2") == "fine now")
        // An unknown number, or none: one line each; nothing changes.
        for (arguments, expected) in [(["discard", "2"], "no rejected write has number 2"), (["retry", "99"], "no rejected write has number 99"),
                                      (["retry", "x"], "'x' is not a rejected write's number")] {
            let refused = try await a.kvtoolOffPool(["sync", "rejected"] + arguments)
            #expect(refused.status != 0 && refused.stderr.contains(expected) && refused.stderr.split(separator: "\n").count == 1,
                    "\(arguments): \(refused.stderr)")
        }
        #expect(try a.notes.get("k2") == "fine now" && a.status().pendingChanges == 0)
        print("[rejected] direct, gateway and kvtool: \(ContinuousClock.now - started)")
    }

    /// One device's batch of three, the middle refused, on either path; then a later change of the
    /// refused key lands. The replicator is gone when it returns (it owns the container's sync while
    /// it lives, and kvtool's commands then wait for it).
    func expectARefusalToBlockNothing(_ cluster: LocalPostgresCluster, group: String, _ device: Device,
                                      replicator make: (@escaping @Sendable (SyncEvent) -> Void) throws -> Replicator) async throws {
        let events = Locked<[SyncEvent]>([])
        let replicator = try make { event in events.withLock { $0.append(event) } }
        try device.put("the server's k2", "k2")
        try await replicator.sync()
        try device.write { tx in
            try device.notes.put("one", forKey: "k1", in: tx)
            try device.notes.put("a forbidden note", forKey: "k2", in: tx)
            try device.notes.put("three", forKey: "k3", in: tx)
        }
        let report = try await replicator.sync()
        // Applied, rejected, applied: the first and the last are on the server, the middle is not.
        #expect(report.pushed == 2 && report.rejected == 1, "\(report)")
        #expect(try device.noteLines() == ["k1=one", "k2=the server's k2", "k3=three"])
        #expect(try await offPool { try device.storedNotes() == cluster.storedNotes(group: group) })
        #expect(try await offPool {
            try cluster.count("SELECT count(*) FROM kvsync_changes WHERE group_id = '\(group)' AND position(convert_to('forbidden', 'UTF8') IN value) > 0")
        } == 0)
        let kept = try Replication.rejected(in: device.container)
        #expect(kept.count == 1)
        #expect(kept.first?.key == Array("k2".utf8) && kept.first?.reason == Self.reason && kept.first?.target == .collection("notes"))
        #expect(try kept.first?.value.map { try CBORDecoder().decode(String.self, from: $0) } == "a forbidden note")
        #expect(events.withLock { $0.contains { if case .rejected(let write) = $0 { write == kept.first } else { false } } })
        // Nothing of it is pending: it is not sent again.
        let status = try device.status()
        #expect(status.pendingChanges == 0 && status.rejected == 1, "\(status)")
        let again = try await replicator.sync()
        #expect(again.pushed == 0 && again.rejected == 0, "\(again)")
        // A later change of the key lands.
        try device.put("fine now", "k2")
        let later = try await replicator.sync()
        #expect(later.pushed == 1 && later.rejected == 0, "\(later)")
        #expect(try await offPool { try device.storedNotes() == cluster.storedNotes(group: group) })
        #expect(try device.notes.get("k2") == "fine now")
        await replicator.close()
    }
}

extension LocalPostgresCluster {
    /// The text of a note (a CBOR text string) as a validator reads it: `p_new`, the value as
    /// `kvsync_cbor_to_jsonb` gives it, is a JSON string (NULL for a delete).
    static let noteText = "(p_new #>> '{}')"

    /// Registers a validator of `collection`: a function `name` whose reason is `reason`, an SQL
    /// expression of the arguments (`p_group`, `p_key`, `p_new`, `p_old`, `p_device`) that is NULL to
    /// accept.
    func registerValidator(_ name: String, of collection: String, reason: String) throws {
        _ = try psql("""
            CREATE FUNCTION \(name)(p_group text, p_key bytea, p_new jsonb, p_old jsonb, p_device text) RETURNS text
            LANGUAGE sql AS $$ SELECT \(reason) $$;
            INSERT INTO kvsync_validators (kind, name, fn) VALUES ('collection', '\(collection)', '\(name)(text, bytea, jsonb, jsonb, text)');
            """)
    }
}
#endif
