import Foundation
import Testing
import TestSupport
@testable import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// Regression tests for faults the reliability suite (Tests/ReliabilityTests) found in how
/// processes share one environment.
@Suite struct StoreSharingTests {
    let dir = TemporaryDirectory()

    func container(_ group: String, interval: Duration?) throws -> SharedContainer {
        var options = SharedContainer.Options()
        options.store.staleReaderCheckInterval = interval
        return try dir.container(group, options: options)
    }

    /// Starts a reader that holds a read transaction, and kills it.
    func killReaderHoldingATransaction(_ group: String) throws {
        let reader = try BackgroundProcess.helper(["hold-read", dir.path, group])
        #expect(reader.waitForLine { $0 == "reading" } != nil)
        reader.kill(SIGKILL)
        reader.wait()
    }

    @Test(.blockingWork) func aLongRunningWriterClearsTheSlotsOfDeadReadersByItself() throws {
        // Without the periodic check, the dead reader's slot (which pins its snapshot, so that the
        // file grows with every commit) stays until some process opens the store.
        let off = try container("group.com.example.nocheck", interval: nil)
        let offValues = try off.store.collection("values", key: Int.self, value: Int.self)
        try killReaderHoldingATransaction("group.com.example.nocheck")
        usleep(100_000)
        try offValues.put(1, forKey: 1)
        #expect(try off.store.readerSlots().filter { !$0.processAlive }.count == 1)

        // With it, the next write after the interval clears it.
        let on = try container("group.com.example.check", interval: .milliseconds(50))
        let onValues = try on.store.collection("values", key: Int.self, value: Int.self)
        try killReaderHoldingATransaction("group.com.example.check")
        #expect(try on.store.readerSlots().filter { !$0.processAlive }.count == 1)
        usleep(100_000)
        try onValues.put(1, forKey: 1)
        #expect(try on.store.readerSlots().filter { !$0.processAlive }.isEmpty)
    }

    @Test(.blockingWork) func openingAnExistingContainerReadWriteNeverWaitsForTheWriteLock() throws {
        let group = "group.com.example.locked"
        let container = try dir.container(group)
        let meta = try container.store.collection("ledgerMeta", key: String.self, value: Int.self)
        try meta.put(7, forKey: "seq")
        // Another process holds the write lock (as a writer stopped mid-transaction would).
        let writer = try BackgroundProcess.helper(["hold-write", dir.path, group])
        defer { writer.kill(SIGKILL); writer.wait() }
        #expect(writer.waitForLine { $0 == "writing" } != nil)
        // A new process opens the container read-write, the default, and reads.
        let reader = try BackgroundProcess.helper(["rw-open-read", dir.path, group])
        defer { reader.kill(SIGKILL); reader.wait() }
        let line = reader.waitForLine(timeout: 10) { $0.hasPrefix("read ") }
        #expect(line?.hasPrefix("read seq=7 ") == true, "the read-write open waited for the write lock")
    }

    @Test(.blockingWork) func aProcessOpeningWithASmallerMapTakesTheRecordedSizeAndDoesNotGrowIt() throws {
        var small = Store.Options()
        small.mapSize = 64 << 10
        let directory = dir.path + "/store"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let grown: Int
        do {
            // Grow the map from 64 KiB, then close the environment.
            let store = try Store(directory: directory, options: small)
            let blobs = try store.collection("blobs", key: Int.self, value: [UInt8].self)
            for i in 0..<16 { try blobs.put([UInt8](repeating: 1, count: 64 << 10), forKey: i) }
            grown = try store.environmentInfo().mapSize
        }
        #expect(grown >= 1 << 20)
        // Opened again with 64 KiB (the store is closed, so this is a new environment), it maps the
        // recorded size at once; a write that needs new pages then fits without growing the map
        // (it used to double the recorded size, for every process that did this).
        let store = try Store(directory: directory, options: small)
        #expect(try store.environmentInfo().mapSize == grown)
        let blobs = try store.collection("blobs", key: Int.self, value: [UInt8].self)
        try blobs.put([UInt8](repeating: 2, count: 64 << 10), forKey: 100)
        #expect(try store.environmentInfo().mapSize == grown)
        #expect(try blobs.count() == 17)
    }

    @Test(.blockingWork) func readTransactionsCheckTheirSnapshotAgainstTheMetaPages() throws {
        let store = try dir.store()
        let values = try store.collection("values", key: Int.self, value: Int.self)
        for i in 0..<3 { try values.put(i, forKey: i) }
        // The layout check holds on this LMDB, so the check is on.
        let meta = try #require(store.environment.metaPages, "LMDB's meta page layout was not recognised")
        let last = UInt64(try store.environmentInfo().lastTransactionID)
        #expect(meta.transactionID(inPage: Int(last & 1)) == last)
        #expect(meta.transactionID(inPage: Int((last + 1) & 1)) == last - 1)
        #expect(meta.isExact(transaction: last, repeated: false))
        #expect(try store.read { $0.transactionID } == Int(last))
        // The rule. The page was rewritten by a newer commit: begin again, however often.
        #expect(!MetaPages.isExact(transaction: 7, repeated: false, own: 9, other: 8))
        #expect(!MetaPages.isExact(transaction: 7, repeated: true, own: 9, other: 8))
        // A newer commit exists, so the page may be being rewritten: begin again once; the same
        // transaction again means the newer one is not announced yet, so nothing writes the page.
        #expect(!MetaPages.isExact(transaction: 7, repeated: false, own: 7, other: 8))
        #expect(MetaPages.isExact(transaction: 7, repeated: true, own: 7, other: 8))
        // The usual case, and a new environment.
        #expect(MetaPages.isExact(transaction: 7, repeated: false, own: 7, other: 6))
        #expect(MetaPages.isExact(transaction: 0, repeated: false, own: 0, other: 0))
    }

    @Test(.blockingWork) func aProcessWhoseMapFillsTakesTheLargerRecordedSizeInsteadOfDoublingIt() throws {
        let group = "group.com.example.lagging"
        var options = SharedContainer.Options()
        options.store.mapSize = 1 << 20
        let container = try dir.container(group, options: options)
        let blobs = try container.store.collection("blobs", key: Int.self, value: [UInt8].self)
        try blobs.put([1], forKey: 0)
        // Another process opens with the default 16 MiB map and commits: the environment records 16 MiB.
        #expect(try helper(["write-defaults", dir.path, group, "k", "v"]).status == 0)
        #expect(try container.store.environmentInfo().mapSize == 1 << 20)
        // This process's 1 MiB map fills up: it takes the recorded 16 MiB, which has room (it used to
        // double that to 32 MiB).
        try container.store.write { tx in
            for i in 1...24 { try blobs.put([UInt8](repeating: 2, count: 64 << 10), forKey: i, in: tx) }
        }
        #expect(try container.store.environmentInfo().mapSize == 16 << 20)
        #expect(try blobs.count() == 25)
    }
}
