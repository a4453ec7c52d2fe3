import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport

/// The blocking waits of ``ChangeNotifier`` and the ``CommitNotifier`` hook.
@Suite struct ChangeNotifierWaitTests {
    let dir = TemporaryDirectory()

    @Test(.blockingWork) func waitReturnsFalseWhenNothingIsPosted() throws {
        let container = try dir.container()
        let notifier = ChangeNotifier(container: container)
        let start = ContinuousClock.now
        #expect(try notifier.wait(timeout: .milliseconds(50)) == false)
        #expect(ContinuousClock.now - start >= .milliseconds(50))
        #expect(throws: SyncError.invalidNotificationName("../x")) { try notifier.wait("../x", timeout: .zero) }
    }

    @Test(.blockingWork) func aSubscriptionKeepsPostsMadeBetweenWaitsAndIgnoresOtherNames() throws {
        let container = try dir.container()
        let notifier = ChangeNotifier(container: container)
        let changes = try notifier.subscribe()
        try notifier.post()
        try notifier.post()
        #expect(changes.wait(timeout: .seconds(30)))
        #expect(changes.wait(timeout: .milliseconds(50)) == false)
        try notifier.post("other")
        #expect(changes.wait(timeout: .milliseconds(50)) == false)
    }

    @Test(.blockingWork) func aCommitNotifierPostsAfterEachCommitThatChangedSomethingInAnyProcess() throws {
        let group = "group.com.example.commitnotifier"
        let container = try dir.container(group)
        container.store.addObserver(CommitNotifier(notifier: ChangeNotifier(container: container)))
        let scores = try container.store.collection("scores", key: String.self, value: Int.self)
        let changes = try ChangeNotifier(container: container).subscribe()
        try container.store.write { _ in }
        #expect(changes.wait(timeout: .milliseconds(50)) == false)
        try scores.put(1, forKey: "alice")
        #expect(changes.wait(timeout: .seconds(30)))
        #expect(try helper(["put-int-plain", dir.path, group, "scores", "bob", "2"]).status == 0)
        #expect(changes.wait(timeout: .seconds(30)))
    }

    /// A post writes nothing (closing the file opened for writing is the wake-up), and keeps the
    /// directory's descriptor: when `Notify/` is removed and made again, as another process would make
    /// it, the next post opens the new one, and its observers wake.
    @Test(.blockingWork) func aPostWritesNothingAndFollowsANotifyDirectoryMadeAgain() throws {
        let container = try dir.container()
        let notifier = ChangeNotifier(container: container)
        let changes = try notifier.subscribe()
        try notifier.post()
        #expect(changes.wait(timeout: .seconds(30)))
        let file = container.notifyDirectory + "/changes"
        var info = stat()
        #expect(stat(file, &info) == 0 && info.st_size == 0)
        try notifier.post()
        #expect(changes.wait(timeout: .seconds(30)))

        try FileManager.default.removeItem(atPath: container.notifyDirectory)
        try FileManager.default.createDirectory(atPath: container.notifyDirectory, withIntermediateDirectories: false)
        let again = try ChangeNotifier(container: container).subscribe()
        try notifier.post()
        #expect(again.wait(timeout: .seconds(30)))
        #expect(FileManager.default.fileExists(atPath: file))
        // A symbolic link in the directory's place is refused, held descriptor or not.
        try FileManager.default.removeItem(atPath: file)
        try FileManager.default.removeItem(atPath: container.notifyDirectory)
        let elsewhere = dir.path + "/elsewhere"
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(atPath: container.notifyDirectory, withDestinationPath: elsewhere)
        #expect(throws: KVStoreError.self) { try notifier.post() }
        #expect(!FileManager.default.fileExists(atPath: elsewhere + "/changes"))
    }
}
