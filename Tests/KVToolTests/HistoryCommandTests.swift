import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport

/// `kvtool history` and `kvtool watch`, run as the built binary against a real container.
@Suite struct HistoryCommandTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.clihistory"

    func tool(_ arguments: String...) throws -> ProcessResult {
        try run(productsDirectory() + "/kvtool", arguments + ["--root", dir.path, "--group", group])
    }

    /// A container with the collection `scores` (String → Int), history enabled through kvtool.
    func fixture() throws -> SharedContainer {
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        let scores = try container.store.collection("scores", key: String.self, value: Int.self)
        try scores.put(1, forKey: "before")
        #expect(try tool("history", "enable", "scores").status == 0)
        return container
    }

    @Test(.blockingWork) func writesByKvtoolAreRecordedAndShown() throws {
        let container = try fixture()
        #expect(try tool("put", "scores", "alice", "42", "--author", "cli").status == 0)
        #expect(try tool("delete", "scores", "before").status == 0)
        let r = try tool("history")
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map { $0.split(separator: "  ").map(String.init) }
        #expect(lines.map { [$0[0], $0[3], $0[4], $0[5], $0[6]] } == [
            ["1", "cli", "put", "scores", "alice"],
            ["2", "kvtool", "delete", "scores", "before"],
        ])
        let json = try tool("history", "--since", "1", "--json")
        #expect(json.stdout.hasPrefix(#"{"token":2,"#) && json.stdout.contains(#""author":"kvtool""#)
                && json.stdout.contains(#""key":"before","operation":"delete"}"#))

        // This process has no History attached, so it may not write to the collection any more.
        let scores = try container.store.collection("scores", key: String.self, value: Int.self)
        #expect(throws: KVStoreError.observerRequired(target: "collection 'scores'", kind: "history")) {
            try scores.put(2, forKey: "sneaky")
        }
    }

    @Test(.blockingWork) func consumersAcknowledgeAndPurgeExpiresTheOldTokens() throws {
        _ = try fixture()
        for name in ["a", "b", "c"] { #expect(try tool("put", "scores", name, "1").status == 0) }
        var r = try tool("history", "--consumer", "reporter")
        #expect(r.stdout.split(separator: "\n").count == 3)
        r = try tool("history", "--consumer", "reporter")
        #expect(r.status == 0 && r.stdout.isEmpty)
        r = try tool("history", "consumers")
        #expect(r.stdout.split(separator: "\n").last?.split(separator: " ", omittingEmptySubsequences: true).prefix(3) == ["reporter", "3", "0"])
        r = try tool("history", "purge")
        #expect(r.stdout == "removed 3 entries; history is purged through token 3\n")
        r = try tool("history", "--since", "1")
        #expect(r.status == 1)
        #expect(r.stderr == "kvtool: error: token 1 has expired: history was purged through 3; resynchronise and start from the current token\n")
        r = try tool("history", "--since", "x")
        #expect(r.status == 64)
        r = try tool("history", "enable")
        #expect(r.status == 64 && r.stderr.contains("name a collection or pass --suite"))
    }

    @Test(.blockingWork) func historyFollowKeepsPrintingAsOtherProcessesCommit() throws {
        _ = try fixture()
        #expect(try tool("put", "scores", "first", "1").status == 0)
        let follow = try BackgroundProcess(productsDirectory() + "/kvtool",
                                           ["history", "--follow", "--root", dir.path, "--group", group])
        #expect(follow.waitForLine { $0.hasSuffix("first") } != nil)
        #expect(try tool("put", "scores", "second", "2", "--author", "app").status == 0)
        let second = follow.waitForLine(timeout: 10) { $0.hasSuffix("second") }
        follow.kill()
        follow.wait()
        #expect(second?.split(separator: "  ").map(String.init).prefix(1) == ["2"])
        #expect(second?.contains("  app  put  scores  second") == true)
    }

    @Test(.blockingWork) func watchPrintsChangesFromOtherProcessesAsTheyCommit() throws {
        _ = try fixture()
        let watch = try BackgroundProcess(productsDirectory() + "/kvtool",
                                          ["watch", "--count", "2", "--root", dir.path, "--group", group])
        #expect(watch.waitForLine { $0.hasPrefix("watching") } != nil)
        #expect(try tool("put", "scores", "x", "1", "--author", "app").status == 0)
        #expect(try tool("put", "scores", "y", "2", "--author", "widget").status == 0)
        #expect(watch.wait().status == 0)
        let changes = watch.output.dropFirst().map { $0.split(separator: "  ").map(String.init) }
        #expect(changes.map { [$0[3], $0[4], $0[6]] } == [["app", "put", "x"], ["widget", "put", "y"]])
    }

    /// Commits that record no history still get a line each (transaction ID, time seen), and the first
    /// says once how to record what changed; commits with history print their entries as before.
    @Test(.blockingWork) func watchPrintsEveryCommitEvenWithoutHistory() throws {
        let container = try fixture()
        let plain = try container.store.collection("plain", key: Int.self, value: Int.self)
        let start = try container.store.read { $0.transactionID }
        let watch = try BackgroundProcess(productsDirectory() + "/kvtool",
                                          ["watch", "--count", "4", "--root", dir.path, "--group", group])
        #expect(watch.waitForLine { $0.hasPrefix("watching") } == "watching \(group) from token 0, transaction \(start)")
        // In another process (kvtool), and in this one, which posts no change notification.
        #expect(try tool("put", "plain", "1", "10").status == 0)
        try plain.put(20, forKey: 2)
        #expect(try tool("put", "scores", "z", "3", "--author", "app").status == 0)
        try plain.put(30, forKey: 3)
        let (status, lines, stderr) = watch.wait()
        #expect(status == 0, "\(stderr)")
        let fields = lines.dropFirst().map { $0.split(separator: "  ").map(String.init) }
        #expect(fields.count == 5, "\(lines)")
        guard fields.count == 5 else { return }
        #expect(fields[0][0] == "-" && fields[0][2] == "txn \(start + 1)" && fields[0][4] == "commit")
        #expect(lines[2] == "   (no history recorded for txn \(start + 1): kvtool history enable COLLECTION, or --suite NAME, records what each commit changes)")
        #expect(fields[2][2] == "txn \(start + 2)" && fields[2][4] == "commit")
        #expect(fields[3][2] == "txn \(start + 3)" && [fields[3][3], fields[3][4], fields[3][6]] == ["app", "put", "z"])
        #expect(fields[4][2] == "txn \(start + 4)" && fields[4][4] == "commit")
        #expect(!lines.dropFirst(3).contains { $0.contains("no history recorded") })
    }
}
