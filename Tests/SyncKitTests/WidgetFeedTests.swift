import Foundation
import Testing
import TestSupport
import KVStore
import SyncKit
#if canImport(Glibc)
import Glibc
#endif

struct Today: Codable, Equatable, Sendable {
    var total: Double
    var streak: Int
    var note: String?
}

/// Widget feeds in one process: round trip, damaged files, generations, names, orphans.
@Suite struct WidgetFeedTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.feeds"

    func feed<P>(_ name: String = "today", _ type: P.Type = Today.self) throws -> WidgetFeed<P> {
        try WidgetFeed<P>(name: name, groupIdentifier: group, root: dir.path)
    }

    func bytes(_ path: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path))) }
    func write(_ bytes: [UInt8], _ path: String) throws { try Data(bytes).write(to: URL(fileURLWithPath: path)) }

    @Test func publishAndReadRoundTrip() throws {
        let container = try dir.container(group)
        let feed = try WidgetFeed<Today>(name: "today", container: container)
        #expect(feed.path == container.snapshotsDirectory + "/feeds/today.feed")
        #expect(try feed.readIfPublished() == nil)
        #expect(throws: WidgetFeedError.notPublished(name: "today", path: feed.path)) { try feed.read() }

        let at = Date(timeIntervalSince1970: 1_795_000_000.123456)
        #expect(try feed.publish(Today(total: 3.8, streak: 12, note: "今日は集中できた。"), at: at) == 1)
        #expect(try feed.publish(Today(total: 4.25, streak: 13, note: nil)) == 2)
        let read = try self.feed().read()  // another handle, resolved from the group identifier
        #expect(read.generation == 2 && read.payload == Today(total: 4.25, streak: 13, note: nil))
        #expect(abs(read.publishedAt.timeIntervalSinceNow) < 60)

        // The layout: magic, version 1, generation 2, payload length, then the CBOR payload.
        let file = try bytes(feed.path)
        #expect(Array(file[0..<6]) == Array("KVFEED".utf8))
        #expect(Array(file[6..<8]) == [0, 1])
        #expect(Array(file[8..<16]) == [0, 0, 0, 0, 0, 0, 0, 2])
        #expect(file[16..<24].reduce(0) { $0 << 8 | Int($1) } == file.count - 64)
        #expect(try CBORDecoder().decode(Today.self, from: Array(file[64...])) == read.payload)
        // Only the feed and its lock file are left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: container.snapshotsDirectory + "/feeds").sorted()
                == [".today.lock", "today.feed"])
    }

    @Test func damagedFilesAreClearOneLineErrors() throws {
        let feed = try self.feed()
        _ = try dir.container(group)
        try feed.publish(Today(total: 3, streak: 1, note: "x"))
        let good = try bytes(feed.path)
        func expectCorrupt(_ damaged: [UInt8], _ fragment: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            try write(damaged, feed.path)
            do {
                _ = try feed.read()
                Issue.record("read a damaged feed", sourceLocation: sourceLocation)
            } catch let error as WidgetFeedError {
                #expect(error.description.contains(feed.path) && error.description.contains(fragment),
                        "\(error)", sourceLocation: sourceLocation)
                #expect(!error.description.contains("\n"), sourceLocation: sourceLocation)
            }
        }
        var flipped = good
        flipped[good.count - 3] ^= 0x20
        try expectCorrupt(flipped, "checksum mismatch")
        flipped = good
        flipped[15] ^= 0x01  // the generation
        try expectCorrupt(flipped, "checksum mismatch")
        flipped = good
        flipped[40] ^= 0x01  // the checksum itself
        try expectCorrupt(flipped, "checksum mismatch")
        try expectCorrupt(Array(good.dropLast(5)), "announces a")
        try expectCorrupt(good + [0], "announces a")
        try expectCorrupt(Array(good.prefix(30)), "shorter than the 64-byte header")
        try expectCorrupt([], "shorter than the 64-byte header")
        flipped = good
        flipped[0] = UInt8(ascii: "X")
        try expectCorrupt(flipped, "magic")
        flipped = good
        flipped[7] = 9
        try write(flipped, feed.path)
        #expect(throws: WidgetFeedError.unsupportedVersion(path: feed.path, version: 9, supported: 1)) { try feed.read() }

        // An intact feed of another payload type.
        try write(good, feed.path)
        do {
            _ = try self.feed("today", TestFeedPayload.self).read()
            Issue.record("decoded a Today as a TestFeedPayload")
        } catch let error as WidgetFeedError {
            guard case .payloadMismatch(let path, let type, _) = error else { Issue.record("\(error)"); return }
            #expect(path == feed.path && type == "TestFeedPayload")
            #expect(!error.description.contains("\n"))
        }
        // A symbolic link in place of the feed is refused, not followed.
        #expect(unlink(feed.path) == 0 && symlink("/etc/passwd", feed.path) == 0)
        #expect(throws: KVStoreError.self) { try feed.read() }
    }

    @Test func generationsKeepIncreasingEvenIfTheFileIsLost() throws {
        let feed = try self.feed()
        try SyncKitTestsSupport.makeSnapshotsDirectory(dir.path, group)
        for expected in 1...3 { #expect(try feed.publish(Today(total: 1, streak: expected, note: nil)) == UInt64(expected)) }
        #expect(unlink(feed.path) == 0)
        #expect(try feed.publish(Today(total: 1, streak: 4, note: nil)) == 4)
        // A damaged file does not stop the publisher either.
        try write([1, 2, 3], feed.path)
        #expect(try feed.publish(Today(total: 1, streak: 5, note: nil)) == 5)
        #expect(try feed.read().payload.streak == 5)
        // A counter that cannot count on is an error, not a trap; the feed keeps its contents.
        let lock = (feed.path as NSString).deletingLastPathComponent + "/.today.lock"
        try write([UInt8](repeating: 0xFF, count: 8), lock)
        #expect(throws: WidgetFeedError.corrupt(path: lock, reason: "the generation counter 18446744073709551615 is out of range")) {
            try feed.publish(Today(total: 1, streak: 6, note: nil))
        }
        #expect(try feed.read().generation == 5)
        // Feeds are independent.
        #expect(try self.feed("other").publish(Today(total: 0, streak: 0, note: nil)) == 1)
    }

    @Test func badNamesAndOversizedPayloadsAreRefused() throws {
        for name in ["", ".hidden", "a/b", "../x", "名前", String(repeating: "n", count: 101)] {
            #expect(throws: WidgetFeedError.self) { try self.feed(name) }
        }
        #expect(throws: KVStoreError.self) { try WidgetFeed<Today>(name: "ok", groupIdentifier: "group.a/../b", root: dir.path) }
        var feed = try self.feed("big", TestFeedPayload.self)
        feed.maxPayloadSize = 1000
        #expect(throws: WidgetFeedError.self) { try feed.publish(TestFeedPayload(sequence: 1, size: 2000)) }
        #expect(try feed.readIfPublished() == nil)
    }

    @Test(.blockingWork) func orphanedTemporaryFilesOfDeadPublishersAreRemoved() throws {
        let feed = try self.feed()
        try SyncKitTestsSupport.makeSnapshotsDirectory(dir.path, group)
        try feed.publish(Today(total: 2, streak: 2, note: nil))
        let feeds = (feed.path as NSString).deletingLastPathComponent
        let dead = try SnapshotExportTests.deadPID()
        let deadOrphan = ".kvtmp-today.feed-\(dead)-00000000000000aa"
        let live = ".kvtmp-today.feed-\(getpid())-00000000000000bb"
        let oldLive = ".kvtmp-today.feed-\(getpid())-00000000000000cc"
        let otherFeed = ".kvtmp-other.feed-\(dead)-00000000000000dd"
        for name in [deadOrphan, live, oldLive, otherFeed, "notes.txt"] {
            try write(Array("partial".utf8), feeds + "/" + name)
        }
        let twoHoursAgo = Date(timeIntervalSinceNow: -7200)
        try FileManager.default.setAttributes([.modificationDate: twoHoursAgo], ofItemAtPath: feeds + "/" + oldLive)

        let removed = try feed.removeOrphanedTemporaryFiles()
        #expect(removed.sorted() == ["feeds/" + deadOrphan, "feeds/" + oldLive].sorted())
        var names = try FileManager.default.contentsOfDirectory(atPath: feeds).sorted()
        #expect(names == [otherFeed, live, ".today.lock", "notes.txt", "today.feed"].sorted())
        // Publishing sweeps too: once the live one is old enough, or its process is gone.
        try FileManager.default.setAttributes([.modificationDate: twoHoursAgo], ofItemAtPath: feeds + "/" + live)
        try feed.publish(Today(total: 2, streak: 3, note: nil))
        names = try FileManager.default.contentsOfDirectory(atPath: feeds).sorted()
        #expect(names == [otherFeed, ".today.lock", "notes.txt", "today.feed"].sorted())
        #expect(try self.feed("other").removeOrphanedTemporaryFiles() == ["feeds/" + otherFeed])
    }
}

enum SyncKitTestsSupport {
    /// `<root>/<group>/Snapshots`, as a container would create it, without opening a store.
    static func makeSnapshotsDirectory(_ root: String, _ group: String) throws {
        try FileManager.default.createDirectory(atPath: root + "/" + group + "/Snapshots", withIntermediateDirectories: true)
    }
}
