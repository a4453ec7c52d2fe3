#if Serve
import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport
@testable import kvtool

/// `kvtool serve`'s commit feed stops (issue 37): its thread ends, its streams finish, and nothing
/// keeps it alive.
@Suite struct CommitFeedTests {
    let dir = TemporaryDirectory()

    @Test(.timeLimit(.minutes(5))) func theFeedsThreadEndsWhenItStops() async throws {
        let container = try SharedContainer(groupIdentifier: "group.com.example.feed", root: dir.path)
        let history = try History.attach(to: container)
        try history.enable(.collection("notes"))
        let notes = try container.store.collection("notes", key: Int.self, value: String.self)
        var feed: CommitFeed? = CommitFeed(container: container)
        try feed?.start()
        let stream = try #require(feed?.subscribe())
        try notes.put("hello", forKey: 1)
        var iterator = stream.makeAsyncIterator()
        // The commit arrives (pings are comments; the first event is this commit).
        let event = try #require(await iterator.next())
        #expect(event.hasPrefix("event: commit\n"), "\(event)")
        let released = Weak(feed!)
        feed?.stop()
        // The stream finishes (after what it buffered: a keep-alive ping, on a slow machine).
        var after: [String] = []
        while let event = await iterator.next() { after.append(event) }
        #expect(after.allSatisfy { $0.hasPrefix(":") || $0.hasPrefix("event: commit") }, "\(after)")
        // …and the thread that held the feed ends (it lets go of it just after it signals).
        feed = nil
        let deadline = Date().addingTimeInterval(BuildScale.seconds(10))
        while released.value != nil, Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(released.value == nil, "the feed is still alive: its thread did not end")
    }
}

/// A weak reference, to see whether something was released.
final class Weak<T: AnyObject> {
    weak var value: T?
    init(_ value: T) { self.value = value }
}
#endif
