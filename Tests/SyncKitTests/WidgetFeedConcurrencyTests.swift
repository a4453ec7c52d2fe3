import Foundation
import Testing
import TestSupport
import KVStore
import SyncKit
import Workloads
#if canImport(Glibc)
import Glibc
#endif

/// Widget feeds across processes: readers under a publishing loop, a publisher killed mid-write, and
/// a widget reading while the main store is unreadable.
@Suite struct WidgetFeedConcurrencyTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.feeds"

    @Test(.blockingWork) func readersNeverSeeATornFeedOrAnOlderGeneration() throws {
        _ = try dir.container(group)
        let count = 300
        let publisher = try BackgroundProcess.helper(["feed-publish", dir.path, group, "fire", String(count), "16384"])
        let readers = try (0..<2).map { _ in
            try BackgroundProcess.helper(["feed-read-loop", dir.path, group, "fire", String(count), "120"])
        }
        let published = publisher.wait()
        #expect(published.status == 0, "\(published.stderr)")
        #expect(published.lines == [String(count)])
        for reader in readers {
            let (status, lines, stderr) = reader.wait()
            #expect(status == 0, "\(stderr)")
            let summary = try #require(try JSONSerialization.jsonObject(with: Data((lines.first ?? "").utf8)) as? [String: Any])
            print("reader: \(lines.first ?? "")")
            #expect(summary["invalid"] as? Int == 0, "\(summary["errors"] ?? "")")
            #expect(summary["decreasing"] as? Int == 0)
            #expect(summary["inconsistent"] as? Int == 0)
            #expect(summary["last"] as? Int == count)
            #expect((summary["reads"] as? Int ?? 0) > 0)
        }
        let feeds = dir.path + "/" + group + "/Snapshots/feeds"
        #expect(try FileManager.default.contentsOfDirectory(atPath: feeds).sorted() == [".fire.lock", "fire.feed"])
    }

    @Test(.blockingWork) func aPublisherKilledMidWriteLeavesTheOldFeedAndAnOrphanThatIsSweptUp() throws {
        _ = try dir.container(group)
        let feed = try WidgetFeed<TestFeedPayload>(name: "fire", groupIdentifier: group, root: dir.path)
        #expect(try feed.publish(TestFeedPayload(sequence: 1, size: 4096)) == 1)

        let hung = try BackgroundProcess.helper(["feed-publish-hang", dir.path, group, "fire", "2"])
        #expect(hung.waitForLine { $0 == "paused" } != nil)
        let feeds = dir.path + "/" + group + "/Snapshots/feeds"
        let temporary = try FileManager.default.contentsOfDirectory(atPath: feeds).filter { $0.hasPrefix(".kvtmp-fire.feed-\(hung.pid)-") }
        #expect(temporary.count == 1)
        // Half a file is on disk, but readers (here and in another process) still get generation 1.
        #expect(try feed.read().generation == 1)
        #expect(try helper(["feed-read", dir.path, group, "fire"]).stdout == "1 1 true\n")
        // The publisher is alive, so its file is not an orphan yet.
        #expect(try feed.removeOrphanedTemporaryFiles().isEmpty)

        hung.kill(SIGKILL)
        let (status, _, _) = hung.wait()
        // The fault was injected: the publisher died by the kill, mid-write (it was paused there).
        #expect(hung.process.terminationReason == .uncaughtSignal && status == SIGKILL, "\(status)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: feeds).contains(temporary[0]))
        #expect(try feed.read().payload.sequence == 1)
        // The next publication sweeps the orphan; generation 2 was claimed by the dead publisher.
        #expect(try feed.publish(TestFeedPayload(sequence: 3, size: 4096)) == 3)
        #expect(try FileManager.default.contentsOfDirectory(atPath: feeds).sorted() == [".fire.lock", "fire.feed"])
        #expect(try helper(["feed-read", dir.path, group, "fire"]).stdout == "3 3 true\n")
    }

    @Test(.blockingWork) func theChecklistFeedIsReadWhileTheStoreIsUnreadable() throws {
        let container = try dir.container(group)
        let checklist = try ChecklistStore(store: container.store)
        try container.store.write { tx in
            for record in ChecklistDataset.records() { try checklist.records.put(record, forKey: record.day, in: tx) }
        }
        let payload = try ChecklistWidgetFeed.build(from: checklist, today: ChecklistDataset.today)
        let feed = try WidgetFeed<ChecklistWidgetFeed>(name: ChecklistWidgetFeed.feedName, container: container)
        #expect(try feed.publish(payload) == 1)

        // Make Store/ unreadable; as root (where modes do not bind) also put a file in its place.
        let store = container.storeDirectory
        #expect(chmod(store, 0) == 0)
        defer { chmod(store, 0o700) }
        if try helper(["open-store", dir.path, group]).status == 0 {
            try FileManager.default.moveItem(atPath: store, toPath: store + ".away")
            try Data("unreadable".utf8).write(to: URL(fileURLWithPath: store))
        }
        let denied = try helper(["open-store", dir.path, group])
        #expect(denied.status != 0 && denied.stdout.isEmpty)

        let r = try helper(["checklist-feed", dir.path, group])
        #expect(r.status == 0, "\(r.stderr)")
        let parts = r.stdout.split(separator: " ", maxSplits: 1)
        #expect(parts.first == "1")
        let read = try JSONDecoder().decode(ChecklistWidgetFeed.self, from: Data(parts.last!.utf8))
        #expect(read == payload)
        #expect(read.streak == Streak(current: 2, longest: 16))
    }
}
