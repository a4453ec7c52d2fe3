#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import SyncTestSupport
import PostgresTesting
import TestSupport
import Testing

/// `kvtool sync request` acknowledges only what a server acknowledged (issue 46, finding 4): with
/// nothing enabled for sync, or with no process owning sync and none able to start, it says so in one
/// line and exits 69, at once rather than at its deadline; with a server, it is acknowledged as before.
/// On the code before, a fresh container printed "acknowledged … through token 0" and exited 0.
@Suite struct SyncRequestHonestyTests {
    static func group(_ name: String) -> String { "group.com.example.honest.\(name)" }

    /// `kvtool ARGS --root ROOT --group GROUP` off the cooperative pool, and how long it took.
    static func kvtool(_ root: String, _ group: String, _ arguments: [String]) async throws -> (ProcessResult, Duration) {
        let started = ContinuousClock.now
        let result = try await offPool { try run(productsDirectory() + "/kvtool", arguments + ["--root", root, "--group", group], timeout: 120) }
        return (result, ContinuousClock.now - started)
    }

    static func json(_ text: String) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
    }

    static let nothingEnabled = "not acknowledged: nothing in this container is enabled for sync (kvtool sync enable COLLECTION), so nothing of it goes to a server"

    @Test func aContainerWithNothingEnabledForSyncIsNotAcknowledged() async throws {
        let root = TemporaryDirectory()
        let group = Self.group("fresh")
        // A fresh container: nothing written, nothing replicated, no server anywhere.
        let container = try SharedContainer(groupIdentifier: group, root: root.path)
        let (fresh, took) = try await Self.kvtool(root.path, group, ["sync", "request", "--wait", "30"])
        print("SyncRequestHonestyTests: a request in a fresh container answered in \(took)")
        #expect(fresh.status == 69, "\(fresh.status) \(fresh.stdout)\(fresh.stderr)")
        #expect(fresh.stdout == Self.nothingEnabled + "\n", "\(fresh.stdout)")
        #expect(fresh.stderr.isEmpty, "\(fresh.stderr)")

        // Written, with history, but still nothing enabled for sync.
        try History.attach(to: container).enable(.collection("notes"))
        try container.store.collection("notes", key: String.self, value: String.self).put("written", forKey: "k")
        let (json, _) = try await Self.kvtool(root.path, group, ["sync", "request", "--wait", "30", "--json"])
        #expect(json.status == 69, "\(json.stdout)\(json.stderr)")
        let object = try #require(Self.json(json.stdout), "\(json.stdout)")
        #expect(object["outcome"] as? String == "nothingSyncs" && object["replicates"] as? Bool == false, "\(json.stdout)")
    }

    @Test func aRequestWithNoOwnerAndNoAgentSaysSoAtOnce() async throws {
        let group = Self.group("no-agent")
        let device = try Device(group: group)
        // Enabled for sync, nothing written yet, no server configured and no agent.
        let (empty, took) = try await Self.kvtool(device.directory.path, group, ["sync", "request", "--wait", "30"])
        print("SyncRequestHonestyTests: a request with no owner and no agent answered in \(took)")
        #expect(empty.status == 69, "\(empty.status) \(empty.stdout)\(empty.stderr)")
        // The advice is a command that works (issue 46, finding 8), with this container's root and group.
        let advice = "no sync agent is registered; to register one: kvtool --root \(device.directory.path) --group \(group) sync agent set --server URL"
        #expect(empty.stdout == "not acknowledged: no process owns sync and none can start: \(advice); 0 pending\n",
                "\(empty.stdout)")
        try device.put("waits", "k")
        let (pending, _) = try await Self.kvtool(device.directory.path, group, ["sync", "request", "--wait", "30", "--json"])
        #expect(pending.status == 69, "\(pending.stdout)\(pending.stderr)")
        let object = try #require(Self.json(pending.stdout), "\(pending.stdout)")
        #expect(object["outcome"] as? String == "nothingSyncs" && object["replicates"] as? Bool == true && object["pending"] as? Int == 1
                && object["agent"] as? String == advice, "\(pending.stdout)")
    }

    @Test func anAgentThatExitsWithoutSyncingIsNoOwner() async throws {
        let group = Self.group("agent-exits")
        let device = try Device(group: group)
        try device.put("waits", "k")
        let set = try await device.kvtoolOffPool(["sync", "agent", "set", "--server", "postgres://u@127.0.0.1:1/db", "--program", "/bin/true"])
        #expect(set.status == 0, "\(set.stderr)")
        let (result, took) = try await Self.kvtool(device.directory.path, group, ["sync", "request", "--wait", "30"])
        print("SyncRequestHonestyTests: a request whose agent exits answered in \(took)")
        #expect(result.status == 69, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.hasPrefix("not acknowledged: no process owns sync and none can start: the sync agent (pid ")
                && result.stdout.hasSuffix(") exited with status 0; 1 pending\n"), "\(result.stdout)")
    }

    /// What a server acknowledged is acknowledged, written or not: the honest answers above are not
    /// every answer.
    @Test func aServerAcknowledges() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("server")
        let device = try Device(group: group)
        let server = cluster.tcpURL.description
        #expect(try await device.kvtoolOffPool(["sync", "run", "--once", "--server", server]).status == 0)
        let (synced, _) = try await Self.kvtool(device.directory.path, group, ["sync", "request", "--wait", "30"])
        #expect(synced.status == 0 && synced.stdout.hasPrefix("acknowledged: the server has every change through token 0 "), "\(synced.stdout)\(synced.stderr)")
        try device.put("sent", "k")
        let set = try await device.kvtoolOffPool(["sync", "agent", "set", "--server", server])
        #expect(set.status == 0, "\(set.stderr)")
        let (sent, _) = try await Self.kvtool(device.directory.path, group, ["sync", "request", "--wait", "\(Int(BuildScale.seconds(60)))"])
        #expect(sent.status == 0 && sent.stdout.hasPrefix("acknowledged: the server has every change through token "), "\(sent.stdout)\(sent.stderr)")
        #expect(try await offPool { try cluster.storedNotes(group: group).count } == 1)
    }
}
#endif
