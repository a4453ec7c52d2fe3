import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport

/// `CommitFollower`, what `kvtool watch` and `kvtool serve` follow commits with: every commit of
/// another process once, in order, with the history entries it recorded, and the commits that
/// recorded none (creating a collection, enabling history) as bare commits.
@Suite struct CommitFollowerTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.follower"

    @Test(.blockingWork) func everyCommitOfAnotherProcessOnceInOrderWithItsHistory() throws {
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        var follower = try CommitFollower(container: container)
        let start = follower.transaction
        // 6 transactions of 1, 2, 3, 1, 2, 3 entries in "events", by a process of its own.
        let writer = try helper(["history-writer", dir.path, group, "6"], timeout: BuildScale.seconds(60))
        #expect(writer.status == 0, "\(writer.stderr)")
        var commits: [CommitFollower.Commit] = []
        let deadline = Date().addingTimeInterval(BuildScale.seconds(10))
        while commits.flatMap(\.entries).count < 12 && Date() < deadline {
            commits += try follower.next().commits
        }
        let entries = commits.flatMap(\.entries)
        #expect(entries.count == 12)
        #expect(entries.allSatisfy { $0.author == "writer" && $0.name == "events" })
        #expect(commits.filter { !$0.entries.isEmpty }.map(\.entries.count) == [1, 2, 3, 1, 2, 3])
        // Every transaction ID once, in order, from the first after the start to the last.
        #expect(commits.map(\.transactionID) == Array((start + 1)...follower.transaction))
        #expect(commits.contains { $0.entries.isEmpty }, "the commits that created the collection and enabled history")
        // Nothing more: a look finds nothing.
        #expect(try follower.next(waiting: .milliseconds(10)).commits.isEmpty)
    }
}
