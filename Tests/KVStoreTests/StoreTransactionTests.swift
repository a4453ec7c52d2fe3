import Foundation
import Testing
import TestSupport
@testable import KVStore

final class RecordingObserver: WriteObserver, @unchecked Sendable {
    let lock = NSLock()
    var before: [[Mutation]] = []
    var after: [CommittedTransaction] = []
    var log: KVCollection<Int, String>?

    func transactionWillCommit(_ transaction: WriteTransaction) throws {
        lock.lock(); before.append(transaction.mutations); lock.unlock()
        // Write more inside the same transaction, without it being observed as a change.
        if let log {
            try transaction.unrecorded {
                try log.put("\(transaction.mutations.count) mutations by \(transaction.author ?? "-")",
                            forKey: transaction.transactionID, in: transaction)
            }
        }
    }

    func transactionDidCommit(_ commit: CommittedTransaction) {
        lock.lock(); after.append(commit); lock.unlock()
    }
}

@Suite struct StoreTransactionTests {
    let dir = TemporaryDirectory()

    @Test(.blockingWork) func readsSeeASnapshot() throws {
        let store = try dir.store()
        let values = try store.collection("values", key: Int.self, value: Int.self)
        try values.put(1, forKey: 1)
        try store.read { tx throws in
            // A write committed on another thread during this read is not visible to it.
            let thread = Thread { try? values.put(2, forKey: 1) }
            thread.start()
            while try values.get(1) != 2 { usleep(1000) }
            #expect(try values.get(1, in: tx) == 1)
        }
        #expect(try values.get(1) == 2)
    }

    @Test(.blockingWork) func nestedWriteAndEscapedTransactionAreErrors() throws {
        let store = try dir.store()
        let values = try store.collection("values", key: Int.self, value: Int.self)
        #expect(throws: KVStoreError.nestedTransaction(outer: .write, inner: .write)) {
            try store.write { _ in try store.write { _ in } }
        }
        var escaped: ReadTransaction?
        try store.read { escaped = $0 }
        #expect(throws: KVStoreError.transactionEnded) { _ = try values.get(1, in: escaped!) }
        // A read inside a write would not see the write's own changes: refused; the write transaction
        // reads them.
        try values.put(5, forKey: 5)
        try store.write { tx throws in
            try values.put(6, forKey: 5, in: tx)
            #expect(throws: KVStoreError.nestedTransaction(outer: .write, inner: .read)) {
                try store.read { try values.get(5, in: $0) }
            }
            #expect(try values.get(5, in: tx) == 6)
        }
        #expect(try values.get(5) == 6)
    }

    @Test(.blockingWork) func observersSeeMutationsBeforeAndAfterCommit() throws {
        let store = try dir.store()
        let values = try store.collection("values", key: Int.self, value: String.self)
        let log = try store.collection("log", key: Int.self, value: String.self)
        let defaults = try SharedDefaults(store: store, suiteName: "settings")
        let observer = RecordingObserver()
        observer.log = log
        store.addObserver(observer)
        defer { store.removeObserver(observer) }

        let id = try store.write(author: "app") { tx throws in
            try values.put("a", forKey: 1, in: tx)
            try values.delete(1, in: tx)
            try values.put("b", forKey: 2, in: tx)
            try defaults.set(true, forKey: "flag", in: tx)
            return tx.transactionID
        }
        #expect(observer.before.count == 1)
        #expect(observer.before[0].map(\.operation) == [.put, .delete, .put, .put])
        #expect(observer.before[0].map(\.target) == [.collection("values"), .collection("values"), .collection("values"), .defaults("settings")])
        #expect(observer.after.count == 1)
        #expect(observer.after[0].author == "app")
        #expect(observer.after[0].transactionID == id)
        #expect(observer.after[0].mutations[2].key == 2.encodedKey)
        // The observer's own write committed with the transaction, unobserved.
        #expect(try log.get(id) == "4 mutations by app")

        // An aborted transaction is seen before commit but never after.
        struct Abort: Error {}
        _ = try? store.write { tx in try values.put("c", forKey: 3, in: tx); throw Abort() }
        #expect(observer.after.count == 1)
        #expect(try values.get(3) == nil)
    }

    @Test(.blockingWork) func openingACollectionInsideATransactionIsAClearError() throws {
        let store = try dir.store()
        let early = try store.collection("early", key: Int.self, value: Int.self)
        try early.put(1, forKey: 1)
        // LMDB would answer EINVAL when the transaction used a database opened after it began, and
        // opening reads and writes the catalog in transactions of its own: refused before either.
        #expect(throws: KVStoreError.collectionOpenedInsideTransaction("late")) {
            try store.read { _ in _ = try store.collection("late", key: Int.self, value: Int.self) }
        }
        #expect(throws: KVStoreError.collectionOpenedInsideTransaction("late")) {
            try store.write { _ in _ = try store.collection("late", key: Int.self, value: Int.self) }
        }
        // Even for a collection this process has open: keep the handle instead.
        #expect(throws: KVStoreError.collectionOpenedInsideTransaction("early")) {
            try store.write { _ in _ = try store.collection("early", key: Int.self, value: Int.self) }
        }
        // Opened first, it works in any later transaction.
        let late = try store.collection("late", key: Int.self, value: Int.self)
        try store.write { tx in
            try late.put(2, forKey: 2, in: tx)
            #expect(try early.get(1, in: tx) == 1)
        }
        #expect(try late.get(2) == 2)
    }

    /// Starts `kvtest-helper hold-read`, waits until it holds a read transaction, and kills it with
    /// SIGKILL, leaving its reader slot behind.
    func killReaderHoldingATransaction(root: String, group: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: productsDirectory() + "/kvtest-helper")
        process.arguments = ["hold-read", root, group]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let line = out.fileHandleForReading.availableData
        #expect(String(decoding: line, as: UTF8.self) == "reading\n")
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal)
    }

    @Test(.blockingWork) func staleReadersOfAKilledProcessAreCleared() throws {
        let group = "group.com.example.readers"
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        // An explicit check in a process that has the store open finds the dead reader's slot.
        try killReaderHoldingATransaction(root: dir.path, group: group)
        #expect(try container.store.clearStaleReaders() == 1)
        #expect(try container.store.clearStaleReaders() == 0)
        // Opening the store read-write in a new process clears it before anything else runs:
        // afterwards neither that process nor this one finds a stale slot.
        try killReaderHoldingATransaction(root: dir.path, group: group)
        let fresh = try helper(["stale-readers", dir.path, group, "read-write"])
        #expect(fresh.stdout == "1 0\n", "\(fresh.stderr)")
        #expect(try container.store.clearStaleReaders() == 0)
        // A read-only open (a widget's, an extension's) scans nothing: the slot is still there for its
        // own explicit check, or for the next writer.
        try killReaderHoldingATransaction(root: dir.path, group: group)
        let widget = try helper(["stale-readers", dir.path, group, "read-only"])
        #expect(widget.stdout == "0 1\n", "\(widget.stderr)")
        #expect(try container.store.clearStaleReaders() == 0)
    }

    @Test(.blockingWork) func aRequiredObserverMustBePresentToWrite() throws {
        final class Tracker: WriteObserver, @unchecked Sendable {
            var observerKind: String? { "history" }
        }
        let store = try dir.store()
        let tracked = try store.collection("tracked", key: Int.self, value: Int.self)
        let free = try store.collection("free", key: Int.self, value: Int.self)
        try store.write { tx in try store.requireObserver(kind: "history", for: .collection("tracked"), in: tx) }
        #expect(try store.read { try store.observerRequirement(for: .collection("tracked"), in: $0) } == "history")

        // Without the observer, a write that touches the collection fails whole.
        #expect(throws: KVStoreError.observerRequired(target: "collection 'tracked'", kind: "history")) {
            try store.write { tx in
                try free.put(1, forKey: 1, in: tx)
                try tracked.put(1, forKey: 1, in: tx)
            }
        }
        #expect(try free.get(1) == nil)
        #expect(try tracked.get(1) == nil)
        try free.put(2, forKey: 2)

        // With it, the write goes through; once the requirement is lifted, it is not needed.
        let tracker = Tracker()
        store.addObserver(tracker)
        try tracked.put(1, forKey: 1)
        store.removeObserver(tracker)
        try store.write { tx in try store.removeObserverRequirement(for: .collection("tracked"), in: tx) }
        try tracked.put(2, forKey: 2)
        #expect(try tracked.count() == 2)
    }

    @Test(.blockingWork) func theMapGrowsFromATinyStart() throws {
        var options = Store.Options()
        options.mapSize = 64 << 10
        let store = try dir.store(options: options)
        let blobs = try store.collection("blobs", key: Int.self, value: [UInt8].self)
        let before = try store.environmentInfo().mapSize
        // One transaction far larger than the initial map, then many small ones.
        try store.write { tx in for i in 0..<200 { try blobs.put([UInt8](repeating: 7, count: 4000), forKey: i, in: tx) } }
        for i in 200..<400 { try blobs.put([UInt8](repeating: 9, count: 4000), forKey: i) }
        let after = try store.environmentInfo().mapSize
        print("map grew from \(before) to \(after) bytes")
        #expect(after > before)
        #expect(try blobs.count() == 400)
        #expect(try blobs.get(399)?.first == 9)

        var capped = Store.Options()
        capped.mapSize = 64 << 10
        capped.maxMapSize = 256 << 10
        let small = try dir.store("capped", options: capped)
        let c = try small.collection("c", key: Int.self, value: [UInt8].self)
        #expect(throws: KVStoreError.mapLimitReached(limit: 256 << 10)) {
            try small.write { tx in for i in 0..<200 { try c.put([UInt8](repeating: 1, count: 4000), forKey: i, in: tx) } }
        }
        #expect(try c.count() == 0)
    }

    @Test(.blockingWork) func theMapGrowsAcrossProcesses() throws {
        let root = dir.path
        let group = "group.com.example.growth"
        var options = SharedContainer.Options()
        options.store.mapSize = 64 << 10
        let container = try SharedContainer(groupIdentifier: group, root: root, options: options)
        let blobs = try container.store.collection("blobs", key: Int.self, value: [UInt8].self)
        // Two other processes grow the map while this one writes and reads.
        let results = LockedResults()
        let threads = (0..<2).map { n in
            Thread {
                let r = try? helper(["grow", root, group, "blobs", "150", "3000", "\(10_000 * (n + 1))"])
                results.append(r)
            }
        }
        threads.forEach { $0.start() }
        for i in 0..<150 { try blobs.put([UInt8](repeating: 1, count: 3000), forKey: i) }
        while results.count < 2 { usleep(10_000) }
        for r in results.all {
            #expect(r?.status == 0, "\(r?.stderr ?? "no result")")
            #expect(r?.stdout.hasPrefix("ok ") == true)
        }
        // This process adopts the larger map and sees every write.
        #expect(try blobs.count() == 450)
        #expect(try blobs.get(10_149)?.count == 3000)
        #expect(try blobs.get(20_000)?.count == 3000)
        let count = try helper(["count", root, group, "blobs"])
        #expect(count.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "450")
        try blobs.put([1], forKey: -1)
        #expect(try blobs.count() == 451)
    }

    @Test(.blockingWork) func lmdbToolsReadOurFiles() throws {
        let container = try dir.container()
        let scores = try container.store.collection("scores", key: String.self, value: Int.self)
        try scores.put(42, forKey: "alice")
        try container.defaults().set("hello", forKey: "greeting")
        let stat = try run("/usr/bin/mdb_stat", ["-a", container.storeDirectory])
        #expect(stat.status == 0, "\(stat.stderr)")
        #expect(stat.stdout.contains("c/scores"))
        #expect(stat.stdout.contains("d/group.com.example.test"))
        #expect(stat.stdout.contains("_catalog"))
        let dump = try run("/usr/bin/mdb_dump", ["-p", "-s", "c/scores", container.storeDirectory])
        #expect(dump.status == 0, "\(dump.stderr)")
        #expect(dump.stdout.contains(" alice"))
    }

    @Test(.blockingWork) func durabilityModesCommitAndSync() throws {
        for mode in Durability.allCases {
            var options = Store.Options()
            options.durability = mode
            let store = try dir.store(mode.rawValue, options: options)
            let c = try store.collection("c", key: Int.self, value: Int.self)
            try c.put(1, forKey: 1)
            try store.sync()
            #expect(try c.get(1) == 1)
        }
    }

    @Test(.blockingWork) func readOnlyStoresRefuseWrites() throws {
        let store = try dir.store("ro")
        let c = try store.collection("c", key: Int.self, value: Int.self)
        try c.put(1, forKey: 1)
        // A second handle in this process shares the environment (one per path per process).
        let again = try Store(directory: dir.path + "/ro")
        #expect(again.environment === store.environment)
        #expect(try again.collection("c", key: Int.self, value: Int.self).get(1) == 1)
    }

    /// `read` reuses the transaction object of the last read that nobody kept; one that was kept
    /// stays ended, whatever reads come after it.
    @Test(.blockingWork) func keptTransactionStaysEndedWhileLaterReadsReuseTheirs() throws {
        let store = try dir.store()
        let values = try store.collection("values", key: Int.self, value: Int.self)
        try values.put(0, forKey: 1)
        // Two reads in a row that keep nothing get the same object.
        let first = try store.read { ObjectIdentifier($0) }
        let second = try store.read { ObjectIdentifier($0) }
        #expect(first == second)

        var kept: ReadTransaction?
        try store.read { kept = $0 }
        for i in 1...5 {
            try values.put(i, forKey: 1)
            let (seen, isKept) = try store.read { tx in (try values.get(1, in: tx), tx === kept) }
            #expect(seen == i)
            #expect(!isKept)
            #expect(throws: KVStoreError.transactionEnded) { _ = try values.get(1, in: kept!) }
        }
        // Reads that throw give their object back too, and the next one works.
        struct Stop: Error {}
        #expect(throws: Stop.self) { try store.read { _ in throw Stop() } }
        #expect(try store.read { try values.get(1, in: $0) } == 5)
    }

    /// Threads reading one store at once each get a transaction of their own (reuse never hands one
    /// object to two reads), each seeing a committed value.
    @Test(.blockingWork) func concurrentReadsNeverShareATransaction() throws {
        let store = try dir.store()
        let values = try store.collection("values", key: Int.self, value: Int.self)
        try values.put(0, forKey: 1)
        let failures = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for i in 0..<500 {
                do {
                    if worker == 0 && i % 10 == 0 { try values.put(i, forKey: 1) }
                    try store.read { tx in
                        let before = try values.get(1, in: tx)
                        // Another thread's read must not end or move this one.
                        for _ in 0..<3 where try values.get(1, in: tx) != before {
                            failures.withLock { $0.append("worker \(worker): the value changed inside one read") }
                        }
                    }
                } catch {
                    failures.withLock { $0.append("worker \(worker): \(error)") }
                }
            }
        }
        #expect(failures.withLock { $0 } == [])
    }

    /// An environment is shared by every store open on its files, stays open while one of them is,
    /// and is closed with the last: then the files can be opened again with options that conflicted.
    @Test(.blockingWork) func environmentClosesWithItsLastStore() throws {
        let path = dir.path + "/leases"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        var a: Store? = try Store(directory: path)
        var b: Store? = try Store(directory: path)
        #expect(a!.environment === b!.environment)
        try a!.collection("c", key: Int.self, value: Int.self).put(7, forKey: 1)
        a = nil
        #expect(try b!.collection("c", key: Int.self, value: Int.self).get(1) == 7)
        var other = Store.Options()
        other.maxReaders = 7
        #expect {
            _ = try Store(directory: path, options: other)
        } throws: { error in
            guard case KVStoreError.conflictingOptions = error else { return false }
            return true
        }
        b = nil
        let reopened = try Store(directory: path, options: other)
        #expect(reopened.environment.configuration.maxReaders == 7)
        #expect(try reopened.collection("c", key: Int.self, value: Int.self).get(1) == 7)
    }

    /// Threads opening and dropping stores on one path at once: each open shares the environment
    /// while another store holds it, and every one of them reads what was written.
    @Test(.blockingWork) func storesOpenedAndDroppedAtOnceShareOneEnvironment() throws {
        let path = dir.path + "/churn"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try Store(directory: path).collection("c", key: Int.self, value: Int.self).put(42, forKey: 1)
        let failures = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for _ in 0..<100 {
                do {
                    let store = try Store(directory: path)
                    if try store.collection("c", key: Int.self, value: Int.self).get(1) != 42 {
                        failures.withLock { $0.append("worker \(worker) read another value") }
                    }
                } catch {
                    failures.withLock { $0.append("worker \(worker): \(error)") }
                }
            }
        }
        #expect(failures.withLock { $0 } == [])
    }
}

final class LockedResults: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [ProcessResult?] = []
    func append(_ r: ProcessResult?) { lock.lock(); results.append(r); lock.unlock() }
    var count: Int { lock.lock(); defer { lock.unlock() }; return results.count }
    var all: [ProcessResult?] { lock.lock(); defer { lock.unlock() }; return results }
}
