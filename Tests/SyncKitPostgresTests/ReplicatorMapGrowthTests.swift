#if PostgreSQL
import Foundation
import KVStore
import SyncKit
@testable import SyncKitPostgres
import PostgresTesting
import TestSupport
import SyncTestSupport
import Testing

/// A round whose write transaction fills the container's map: the store grows the map and runs the
/// transaction's body again (``KVStore/Store/write(author:_:)``), and the round reports what the
/// committed run did, once.
///
/// Issue 47: `kvtool bench gateway` failed with "pushed 54278 of 50000". One device pushed 50,000 keys
/// of 100 bytes, and the group's log held 50,000 rows, one per key: nothing was sent or applied twice,
/// but the push's count was kept outside the transaction that records the server's answers, and a
/// batch recorded while the map grew was counted once per run (a pull's count likewise). A container
/// with a small map shows it with a few thousand keys.
@Suite struct ReplicatorMapGrowthTests {
    /// A container whose map starts at `mapSize` bytes, with a replicated `notes` collection.
    final class SmallMapDevice: @unchecked Sendable {
        let directory = TemporaryDirectory()
        let container: SharedContainer
        let notes: KVCollection<String, String>

        init(group: String, mapSize: Int) throws {
            var options = SharedContainer.Options()
            options.store.mapSize = mapSize
            container = try SharedContainer(groupIdentifier: group, root: directory.path, options: options)
            notes = try container.store.collection("notes", key: String.self, value: String.self)
            try Replication.enable(.collection("notes"), in: container)
        }

        deinit { container.close() }

        func replicator(_ server: ServerURL) throws -> Replicator {
            var options = Replicator.Options()
            // Many small batches: many transactions that record answers, so that the map fills in one.
            options.batchSize = 200
            return try Replicator(container: container, endpoint: .database(server), targets: [.collection(notes)], options: options)
        }

        /// `count` keys of `value`, in one write of the app's (synchronous: callable from an async test).
        func write(_ count: Int, _ value: String) throws {
            try container.store.write(author: "app") { tx in
                for index in 0..<count { try notes.put(value, forKey: String(format: "key-%08d", index), in: tx) }
            }
        }

        var mapSize: Int { get throws { try container.store.environmentInfo().mapSize } }
    }

    @Test func aPushAndAPullWhoseMapGrowsCountEachChangeOnce() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = "group.com.example.mapgrowth"
        let count = 3_000
        let value = String(repeating: "v", count: 100)

        let writer = try SmallMapDevice(group: group, mapSize: 256 << 10)
        let pushing = try writer.replicator(cluster.tcpURL)
        try await pushing.sync()
        try writer.write(count, value)
        let beforePush = try writer.mapSize
        let pushed = try await pushing.push()
        let afterPush = try writer.mapSize
        await pushing.close()
        let rows = try await offPool { try cluster.count("SELECT count(*) FROM kvsync_changes WHERE group_id = '\(group)'") }
        print("a push of \(count) keys of \(value.utf8.count) bytes in batches of 200: reported \(pushed.pushed), the log holds \(rows) rows; the map grew from \(beforePush >> 10) KiB to \(afterPush >> 10) KiB during it")
        // What the test is about: the map grew while the push recorded the server's answers.
        try #require(afterPush > beforePush, "the map never grew during the push: the test shows nothing")
        #expect(rows == count)
        #expect(pushed.pushed == count)

        let reader = try SmallMapDevice(group: group, mapSize: 256 << 10)
        let pulling = try reader.replicator(cluster.tcpURL)
        let beforePull = try reader.mapSize
        let pulled = try await pulling.pull()
        let afterPull = try reader.mapSize
        await pulling.close()
        print("a pull of the \(count) keys in pages of 200: reported \(pulled.pulled); the map grew from \(beforePull >> 10) KiB to \(afterPull >> 10) KiB during it")
        try #require(afterPull > beforePull, "the map never grew during the pull: the test shows nothing")
        #expect(try reader.notes.count() == count)
        #expect(pulled.pulled == count)
    }
}
#endif
