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

/// `kvtool sync`'s messages say what happened (issue 46, finding 8), each read as its exact sentence:
/// the clock bound that refused a push, one count of what is not on the server yet, a batch sent again
/// counted once, advice that is a command that works, an agent registration that cannot start named as
/// such, conflict keys that `get` takes, and what a prune removed. Real `kvtool` processes, each with a
/// timeout, and real PostgreSQL clusters and gateways.
@Suite(.serialized) struct SyncMessageTests {
    static func group(_ name: String) -> String { "group.com.example.messages.\(name)" }

    /// Nothing listens on port 1 of the loopback (no command here connects to it).
    static let deadServer = "postgres://u@127.0.0.1:1/db"

    /// The refusal `kvtool sync run` prints when the server refused its changes for their clock, with
    /// the offset it measured: `nil` unless `stderr` is exactly that line, naming `limit`.
    static func clockRefusal(_ stderr: String, limit: String) -> String? {
        guard let range = stderr.range(of: #"their clock is [0-9.]+ s ahead"#, options: .regularExpression) else { return nil }
        let expected = "kvtool: error: the server refused this device's changes: \(stderr[range]) of the server's (the limit is \(limit)); "
            + "set this machine's clock right, and they are sent once the server's clock reaches them\n"
        return stderr == expected ? String(stderr[range]) : nil
    }

    /// The owner sets the server's bound to 10 s; the device asks for 60 s, the first gateway has 60 s,
    /// the second 5 s. Each refusal names the bound that refused it: 10, 10 and 5 s (the 60 s of the
    /// device, or of the gateway, was named before).
    @Test func aClockRefusalNamesTheBoundThatRefusedItNotTheOneItAskedFor() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let url = cluster.tcpURL.description
        let (gateway, gatewayURL) = try await startGateway(cluster)
        defer { gateway.kill(SIGKILL) }
        let (strict, strictURL) = try await startGateway(cluster, extra: ["--max-clock-skew", "5"])
        defer { strict.kill(SIGKILL) }
        let setup = try await kvtoolRun(["sync", "setup", "--database", url, "--max-clock-skew", "10"])
        #expect(setup.status == 0 && setup.stdout.hasPrefix("schema version 9; role kvsync_gateway ready; clock bound 10.0 s\n"),
                "\(setup.stdout)\(setup.stderr)")
        let group = Self.group("clock")
        let direct = try Device(group: group), throughGateway = try Device(group: group), throughStrict = try Device(group: group)
        // An hour ahead: past every bound here, however long the test takes.
        for device in [direct, throughGateway, throughStrict] {
            try ReplicationSkewTests.moveClock(of: device, ahead: 3_600)
            try device.put("an hour ahead", "k")
        }

        let refused = try await direct.kvtoolOffPool(["sync", "run", "--once", "--server", url])
        #expect(refused.status == 75 && Self.clockRefusal(refused.stderr, limit: "10 s") != nil, "\(refused.stderr)")

        let token = try await issueToken(cluster, ["--group", group, "--device", "gateway-device"])
        let viaGateway = try await throughGateway.kvtoolOffPool(["sync", "run", "--once", "--server", gatewayURL, "--token", token])
        #expect(viaGateway.status == 75 && Self.clockRefusal(viaGateway.stderr, limit: "10 s") != nil, "\(viaGateway.stderr)")

        let strictToken = try await issueToken(cluster, ["--group", group, "--device", "strict-device"])
        let viaStrict = try await throughStrict.kvtoolOffPool(["sync", "run", "--once", "--server", strictURL, "--token", strictToken])
        #expect(viaStrict.status == 75 && Self.clockRefusal(viaStrict.stderr, limit: "5 s") != nil, "\(viaStrict.stderr)")
        #expect(try cluster.count("SELECT count(*) FROM kvsync_changes WHERE key = '\\x6b'::bytea") == 0)

        // The gateway's own line names its bound too.
        strict.kill(SIGTERM)
        let log = try await offPool { strict.wait(timeout: 30) }.stderr
        let line = log.split(separator: "\n").first { $0.contains("ahead of the server's clock") }.map(String.init) ?? ""
        #expect(line.range(of: #"the push's stamps are [0-9]+ ms ahead of the server's clock, past the bound of 5000 ms; the batch was refused"#,
                           options: .regularExpression) != nil, "\(log)")
    }

    /// What is not on the server yet is one count: the status shows it once, and its two JSON fields
    /// hold the same number, past the 10,000 a request counts up to. A collection that keeps history
    /// but does not replicate is not counted (its changes never go to the server).
    @Test(.blockingWork) func statusShowsWhatIsNotOnTheServerOnceFromOneCount() async throws {
        let device = try Device(group: Self.group("count"))
        let drafts = try device.container.store.collection("drafts", key: String.self, value: String.self)
        try device.history.enable(.collection("drafts"))
        for key in ["a", "b", "c"] { try device.put("note \(key)", key) }
        try drafts.put("not replicated", forKey: "d")
        let current = try device.history.currentToken()
        let text = try await device.kvtoolOffPool(["sync", "status"])
        #expect(text.status == 0, "\(text.stderr)")
        let lines = text.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("acknowledged through token 0 of \(current); 3 local changes not on the server yet"), "\(text.stdout)")
        // Shown once: the replication line no longer repeats it (as "pending 4" or any other number).
        #expect(lines.contains("cursor 0; pushed 0; pulled 0; conflicts resolved 0; resyncs 0"), "\(text.stdout)")
        #expect(text.stdout.components(separatedBy: "pending").count == 1, "\(text.stdout)")
        try Self.expectOneCount(device, 3)

        // Past the 10,000 a request counts: status counts all of them, in both fields.
        try device.write { tx in
            for index in 0..<10_001 { try device.notes.put("bulk", forKey: "bulk-\(index)", in: tx) }
        }
        try Self.expectOneCount(device, 10_004)
        let many = try await device.kvtoolOffPool(["sync", "status"])
        #expect(many.stdout.contains("; 10004 local changes not on the server yet\n"), "\(many.stdout)")
    }

    /// `kvtool sync status --json`'s `pendingChanges` and `service.pending` are both `count`.
    static func expectOneCount(_ device: Device, _ count: Int, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let json = try device.kvtool(["sync", "status", "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        let service = object?["service"] as? [String: Any]
        #expect(object?["pendingChanges"] as? Int == count && service?["pending"] as? Int == count, "\(json.stdout)",
                sourceLocation: sourceLocation)
    }

    /// A batch the server has and this container recorded, sent again (as by a standby that took over
    /// from an owner killed after it recorded the server's answers, before it moved its history
    /// consumer): the server answers "duplicate", and the round pushes nothing new. `pushed` counts each
    /// change once.
    @Test func aBatchSentAgainAfterItsAnswersWereRecordedIsNotCountedAgain() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let url = cluster.tcpURL.description
        let device = try Device(group: Self.group("duplicate"))
        for index in 0..<5 { try device.put("value \(index)", "k\(index)") }
        // What the owner moves when it acknowledges a push, in one transaction: the history consumer it
        // pushes from, and the container's acknowledged token.
        let store = device.container.store
        let consumers = try store.untypedCollection(named: History.consumersName).collection
        let consumerKey = ByteKey(SyncService.consumerName.encodedKey)
        let before = try #require(try consumers.get(consumerKey))
        let first = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", url])
        #expect(first.status == 0 && first.stdout.hasPrefix("pushed 5, pulled 0, conflicts 0; cursor "), "\(first.stdout)\(first.stderr)")
        #expect(try device.status().pushed == 5)
        // The owner "died" after recording the answers, before it acknowledged them: both put back (the
        // container's record of its sync service, whose acknowledged token was 0, removed).
        let service = try store.untypedCollection(named: "_sync.service").collection
        try device.write { tx in
            try consumers.put(before, forKey: consumerKey, in: tx)
            _ = try service.delete(ByteKey("state".encodedKey), in: tx)
        }
        #expect(try device.status().pendingChanges == 5)

        let again = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", url])
        #expect(again.status == 0 && again.stdout.hasPrefix("pushed 0, pulled 0, conflicts 0; cursor "), "\(again.stdout)\(again.stderr)")
        let status = try device.status()
        #expect(status.pushed == 5 && status.pendingChanges == 0, "\(status)")
        let shown = try await device.kvtoolOffPool(["sync", "status"])
        #expect(shown.stdout.contains("; pushed 5; "), "\(shown.stdout)")
        // The server has each change once.
        #expect(try cluster.count("SELECT count(*) FROM kvsync_changes WHERE name = 'notes'") == 5)
    }

    /// A real handoff: the owner is killed (`kill -9`) while it pushes 2,000 changes in batches of 50,
    /// after the server has some of them; the next owner sends the round again. However far the first
    /// got, each change is on the server once, and `pushed` counts it once.
    @Test func afterAHandoffEachChangeIsCountedOnce() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let url = cluster.tcpURL.description
        let device = try Device(group: Self.group("handoff"))
        try device.write { tx in
            for index in 0..<2_000 { try device.notes.put("value \(index)", forKey: String(format: "k%05d", index), in: tx) }
        }
        let owner = try device.kvtoolInBackground(["sync", "run", "--once", "--server", url, "--batch-size", "50"])
        let started = try await offPool {
            eventually(BuildScale.seconds(120), every: 20_000) { (try? cluster.count("SELECT count(*) FROM kvsync_changes WHERE name = 'notes'")) ?? 0 >= 100 }
        }
        owner.kill(SIGKILL)
        _ = try await offPool { owner.wait(timeout: 30) }
        #expect(started)
        let onServer = try cluster.count("SELECT count(*) FROM kvsync_changes WHERE name = 'notes'")
        print("[handoff] the owner was killed with \(onServer) of 2000 changes on the server; pushed \(try device.status().pushed) recorded")
        let next = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", url])
        #expect(next.status == 0, "\(next.stdout)\(next.stderr)")
        let status = try device.status()
        #expect(status.pushed == 2_000 && status.pendingChanges == 0, "\(status)")
        #expect(try cluster.count("SELECT count(*) FROM kvsync_changes WHERE name = 'notes'") == 2_000)
    }

    /// A request that finds no owner and no agent to start advises a command; run as printed (only its
    /// `URL` filled in), in a shell with none of kvtool's variables, it registers the agent.
    @Test func theAdviceOfARequestThatStartsNoOwnerIsACommandThatWorks() async throws {
        let group = Self.group("advice")
        let device = try Device(group: group)
        try device.put("v", "k")
        let request = try await device.kvtoolOffPool(["sync", "request", "--wait", "0.2"])
        #expect(request.status != 0)
        let advice = "to register one: kvtool --root \(device.directory.path) --group \(group) sync agent set --server URL"
        // (The request's line goes on after the advice, or not, as `sync request` words it.)
        #expect((request.stdout + request.stderr).contains("no sync agent is registered; \(advice)"), "\(request.stdout)\(request.stderr)")
        let status = try await device.kvtoolOffPool(["sync", "status"])
        #expect(status.stdout.hasPrefix("owner none: no agent is registered; \(advice)\n"), "\(status.stdout)")

        let environment = ProcessInfo.processInfo.environment.filter {
            !["KVSTORE_ROOT", "KVSTORE_GROUP", "KVSTORE_SYNC_SERVER", "KVSTORE_SYNC_TOKEN", "XDG_DATA_HOME"].contains($0.key)
        }
        let command = String(advice.dropFirst("to register one: kvtool ".count)).replacingOccurrences(of: "URL", with: Self.deadServer)
        let ran = try await offPool { try run("/bin/sh", ["-c", productsDirectory() + "/kvtool " + command], environment: environment) }
        #expect(ran.status == 0, "\(ran.stdout)\(ran.stderr)")
        let registered = try await device.kvtoolOffPool(["sync", "status"])
        #expect(registered.stdout.hasPrefix("owner none: a request starts the registered agent\n"), "\(registered.stdout)")
    }

    /// A `.sync-agent` a request will not run (readable by others, or not a registration) is named as
    /// such by `sync status`, with the command that replaces it: never "a request starts the agent".
    @Test func anAgentRegistrationARequestCannotStartIsNamedNotPromised() async throws {
        let group = Self.group("agent")
        let device = try Device(group: group)
        let set = try await device.kvtoolOffPool(["sync", "agent", "set", "--server", Self.deadServer])
        #expect(set.status == 0, "\(set.stderr)")
        let path = try SyncAgentRegistration.registrationPath(for: device.container)
        let replace = "to replace it: kvtool --root \(device.directory.path) --group \(group) sync agent set --server URL"

        #expect(chmod(path, 0o644) == 0)
        var status = try await device.kvtoolOffPool(["sync", "status"])
        #expect(status.stdout.hasPrefix("owner none: a request cannot start the registered agent: invalid sync agent registration: \(path) "
                                        + "is readable or writable by others (mode 644); it must be 0600; \(replace)\n"), "\(status.stdout)")
        let json = try await device.kvtoolOffPool(["sync", "status", "--json"])
        #expect(json.stdout.contains(#""agentProblem":"invalid sync agent registration: "#), "\(json.stdout)")

        try writeSecretFile(path, "not a registration\n")
        status = try await device.kvtoolOffPool(["sync", "status"])
        #expect(status.stdout.hasPrefix("owner none: a request cannot start the registered agent: invalid sync agent registration: \(path) "
                                        + "is not a sync agent registration; \(replace)\n"), "\(status.stdout)")

        let again = try await device.kvtoolOffPool(["sync", "agent", "set", "--server", Self.deadServer])
        #expect(again.status == 0, "\(again.stderr)")
        status = try await device.kvtoolOffPool(["sync", "status"])
        #expect(status.stdout.hasPrefix("owner none: a request starts the registered agent\n"), "\(status.stdout)")
    }

    /// The key a conflict line names is the key as `kvtool get` takes it (a key with a space, here),
    /// and `get` finds the entry with it.
    @Test func theKeyOfAConflictIsOneGetTakes() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let url = cluster.tcpURL.description
        let group = Self.group("conflict")
        let a = try Device(group: group), b = try Device(group: group)
        try a.put("from a", "note 1")
        try b.put("from b", "note 1")
        let first = try await a.kvtoolOffPool(["sync", "run", "--once", "--server", url])
        #expect(first.status == 0, "\(first.stderr)")
        let second = try await b.kvtoolOffPool(["sync", "run", "--once", "--server", url])
        #expect(second.status == 0, "\(second.stderr)")
        let prefix = "conflict: collection 'notes' key "
        let found = second.stdout.split(separator: "\n").first { $0.hasPrefix(prefix) }.map(String.init)
        let line = try #require(found, "\(second.stdout)")
        let resolution = try #require(line.range(of: #": (keptLocal|tookRemote|merged|rejectedLocal) \("#, options: .regularExpression),
                                      "\(line)")
        let key = String(line[line.index(line.startIndex, offsetBy: prefix.count)..<resolution.lowerBound])
        #expect(key == "note 1", "\(line)")
        // Which write wins is the clocks' business (two writes in the same millisecond tie, and the
        // tie goes by device id), so the value `get` must find is the one the line says was kept.
        let kept = line[resolution].contains("tookRemote") ? "\"from a\"\n" : "\"from b\"\n"
        let got = try await b.kvtoolOffPool(["get", "notes", key])
        #expect(got.status == 0 && got.stdout == kept, "\(line)\n\(got.stdout)\(got.stderr)")
    }

    /// `sync prune` says how many changes and tombstones it removed and where the log's horizon is
    /// (not 0 when nothing more was old enough); a device that joins after it resyncs, and its round
    /// counts what the resync applied.
    @Test func pruneSaysWhatItRemovedAndAResyncCountsWhatItApplied() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let url = cluster.tcpURL.description
        let group = Self.group("prune")
        let a = try Device(group: group)
        for key in ["k1", "k2", "k3"] { try a.put("value of \(key)", key) }
        var synced = try await a.kvtoolOffPool(["sync", "run", "--once", "--server", url])
        #expect(synced.status == 0, "\(synced.stderr)")
        try a.delete("k2")
        synced = try await a.kvtoolOffPool(["sync", "run", "--once", "--server", url])
        #expect(synced.status == 0, "\(synced.stderr)")
        let changes = try cluster.count("SELECT count(*) FROM kvsync_changes WHERE group_id = '\(group)'")
        let tombstones = try cluster.count("SELECT count(*) FROM kvsync_state WHERE group_id = '\(group)' AND value IS NULL")
        let horizon = try cluster.count("SELECT max(seq) FROM kvsync_changes WHERE group_id = '\(group)'")
        #expect(tombstones == 1 && changes >= 4)

        let pruned = try await a.kvtoolOffPool(["sync", "prune", "--server", url, "--older-than", "0"])
        #expect(pruned.status == 0 && pruned.stdout == "removed \(changes) changes and 1 tombstone older than 0 s; "
                + "the server's log is pruned through \(horizon) (a device whose cursor is behind it resyncs)\n", "\(pruned.stdout)\(pruned.stderr)")
        let again = try await a.kvtoolOffPool(["sync", "prune", "--server", url, "--older-than", "0"])
        #expect(again.stdout == "removed nothing: no change of \(group) on the server is older than 0 s; "
                + "the server's log is pruned through \(horizon) (a device whose cursor is behind it resyncs)\n", "\(again.stdout)\(again.stderr)")
        let json = try await a.kvtoolOffPool(["sync", "prune", "--server", url, "--older-than", "0", "--json"])
        #expect(json.stdout == #"{"removedChanges":0,"removedTombstones":0,"prunedThrough":\#(horizon)}"# + "\n", "\(json.stdout)")

        // A device that joins now resyncs: what it applied is what its round says it pulled.
        let b = try Device(group: group)
        let joined = try await b.kvtoolOffPool(["sync", "run", "--once", "--server", url])
        #expect(joined.status == 0, "\(joined.stderr)")
        #expect(joined.stdout.contains("applied: 2 changes from other devices to collection 'notes'\n"), "\(joined.stdout)")
        #expect(joined.stdout.hasSuffix("pushed 0, pulled 2, conflicts 0, resynchronized; cursor \(horizon)\n"), "\(joined.stdout)")
        #expect(try b.noteLines() == ["k1=value of k1", "k3=value of k3"])
    }
}
#endif
