import Foundation
import Testing
import TestSupport
@testable import KVStore

/// The rules of the DocC article "Transactions": what may nest on one store, opening collections,
/// and a write closure that runs more than once.
@Suite struct StoreTransactionRulesTests {
    let dir = TemporaryDirectory()

    @Test func aReadInsideAWriteOfTheSameStoreIsATypedErrorAndTheWriteGoesOn() throws {
        let store = try dir.store()
        let values = try store.collection("values", key: Int.self, value: Int.self)
        try values.put(1, forKey: 1)
        try store.write { tx throws in
            try values.put(2, forKey: 1, in: tx)
            #expect(throws: KVStoreError.nestedTransaction(outer: .write, inner: .read)) {
                try store.read { try values.get(1, in: $0) }
            }
            // The write transaction is untouched by the refused read, and reads its own change.
            #expect(try values.get(1, in: tx) == 2)
            try values.put(3, forKey: 3, in: tx)
        }
        #expect(try values.get(1) == 2)
        #expect(try values.get(3) == 3)
    }

    @Test func aWriteInsideATransactionOfTheSameStoreIsATypedErrorAndWritesNothing() throws {
        let store = try dir.store()
        let values = try store.collection("values", key: Int.self, value: Int.self)
        try store.read { _ throws -> Void in
            #expect(throws: KVStoreError.nestedTransaction(outer: .read, inner: .write)) {
                try store.write { tx in try values.put(7, forKey: 7, in: tx) }
            }
        }
        #expect(try values.get(7) == nil)
        try store.write { tx throws in
            try values.put(8, forKey: 8, in: tx)
            #expect(throws: KVStoreError.nestedTransaction(outer: .write, inner: .write)) {
                try store.write { inner in try values.put(9, forKey: 9, in: inner) }
            }
        }
        #expect(try values.get(8) == 8)
        #expect(try values.get(9) == nil)
        // Inside a read that is itself inside a read, the write is refused all the same.
        try store.read { _ throws -> Void in
            try store.read { _ throws -> Void in
                #expect(throws: KVStoreError.nestedTransaction(outer: .read, inner: .write)) { try store.write { _ in } }
            }
        }
        // And the thread is free again afterwards.
        try values.put(10, forKey: 10)
        #expect(try values.get(10) == 10)
    }

    @Test func aReadInsideAReadIsAllowed() throws {
        let store = try dir.store()
        let values = try store.collection("values", key: Int.self, value: Int.self)
        try values.put(1, forKey: 1)
        let inner = try store.read { _ in try store.read { try values.get(1, in: $0) } }
        #expect(inner == 1)
    }

    @Test func theRulesFollowTheEnvironmentNotTheHandle() throws {
        let store = try dir.store()
        let values = try store.collection("values", key: Int.self, value: Int.self)
        // A second handle on the same path shares the environment, so the same rules apply.
        let second = try Store(directory: store.directory)
        try store.write { _ throws -> Void in
            #expect(throws: KVStoreError.nestedTransaction(outer: .write, inner: .read)) {
                try second.read { try values.get(1, in: $0) }
            }
        }
        // Another store is another environment: reading it inside a write of this one is fine.
        let other = try dir.store("other")
        let otherValues = try other.collection("values", key: Int.self, value: Int.self)
        try otherValues.put(5, forKey: 5)
        let seen = try store.write { tx in
            try values.put(1, forKey: 1, in: tx)
            return try other.read { try otherValues.get(5, in: $0) }
        }
        #expect(seen == 5)
        // Writing another store inside a write is refused as before, across environments.
        try store.write { _ throws -> Void in
            #expect(throws: KVStoreError.nestedWrite) { try other.write { _ in } }
        }
    }

    @Test func openingACollectionInsideATransactionIsATypedError() throws {
        let store = try dir.store()
        _ = try store.collection("values", key: Int.self, value: Int.self)
        for name in ["values", "fresh"] {
            try store.write { _ throws -> Void in
                #expect(throws: KVStoreError.collectionOpenedInsideTransaction(name)) {
                    try store.collection(name, key: Int.self, value: Int.self)
                }
            }
            try store.read { _ throws -> Void in
                #expect(throws: KVStoreError.collectionOpenedInsideTransaction(name)) {
                    try store.collection(name, key: Int.self, value: Int.self)
                }
            }
        }
        // Outside any transaction it opens, and the refused attempts created nothing.
        #expect(try store.catalogEntry(forCollection: "fresh") == nil)
        _ = try store.collection("fresh", key: Int.self, value: Int.self)
    }

    @Test func aWriteClosureRunsAgainWhenTheMapGrowsAndOnlyTheLastRunCounts() throws {
        var options = Store.Options()
        options.mapSize = 64 << 10
        let store = try dir.store(options: options)
        let blobs = try store.collection("blobs", key: Int.self, value: [UInt8].self)
        var runs = 0
        let written = try store.write { tx in
            runs += 1
            var count = 0
            for i in 0..<64 {
                try blobs.put([UInt8](repeating: UInt8(i), count: 4096), forKey: i, in: tx)
                count += 1
            }
            return count
        }
        #expect(runs > 1, "the map had to grow, so the closure ran again")
        #expect(written == 64)
        #expect(try blobs.count() == 64)
    }

    /// Counts what the write hook sees, to show that an aborted run of a write closure reaches no observer.
    final class HookCounter: WriteObserver, @unchecked Sendable {
        let counts = Locked((willCommit: 0, didCommit: 0, mutations: 0))
        func transactionWillCommit(_ transaction: WriteTransaction) throws { counts.withLock { $0.willCommit += 1 } }
        func transactionDidCommit(_ commit: CommittedTransaction) {
            counts.withLock { $0.didCommit += 1; $0.mutations += commit.mutations.count }
        }
    }

    /// What a user may rely on when the closure runs again (here because the map grows): the runs that
    /// did not commit leave nothing, neither a key only they wrote nor a commit an observer sees, and
    /// the value `write` returns is the last run's.
    @Test func aWriteClosureThatRunsAgainLeavesOnlyTheRunThatCommitted() throws {
        var options = Store.Options()
        options.mapSize = 64 << 10
        let store = try dir.store(options: options)
        let blobs = try store.collection("blobs", key: Int.self, value: [UInt8].self)
        let hook = HookCounter()
        store.addObserver(hook)
        var runs = 0
        let returned = try store.write { tx in
            runs += 1
            if runs == 1 { try blobs.put([1], forKey: -1, in: tx) }   // only the first run writes key -1
            for i in 0..<64 { try blobs.put([UInt8](repeating: UInt8(i), count: 4096), forKey: i, in: tx) }
            return runs
        }
        print("the write closure ran \(runs) times (map of 64 KiB grew to \(try store.environmentInfo().mapSize) bytes)")
        #expect(runs > 1, "the map had to grow, so the closure ran again")
        #expect(returned == runs, "write returns the result of the run that committed")
        #expect(try blobs.get(-1) == nil, "a run that did not commit left a key")
        #expect(try blobs.count() == 64)
        let counts = hook.counts.withLock { $0 }
        #expect(counts.willCommit == 1 && counts.didCommit == 1, "observers saw a run that did not commit: \(counts)")
        #expect(counts.mutations == 64)
    }

    @Test func aDefaultsGetterWithoutATransactionInsideAWriteIsRefusedAndTheInFormWorks() throws {
        let store = try dir.store()
        let defaults = try SharedDefaults(store: store, suiteName: "settings")
        try defaults.set(1, forKey: "count")
        try store.write { tx throws in
            try defaults.set(2, forKey: "count", in: tx)
            #expect(throws: KVStoreError.nestedTransaction(outer: .write, inner: .read)) {
                try defaults.integer(forKey: "count")
            }
            #expect(try defaults.integer(forKey: "count", in: tx) == 2)
        }
    }

    @Test func theErrorsSayWhatToDoInOneLine() {
        let inWrite = KVStoreError.nestedTransaction(outer: .write, inner: .read).description
        #expect(inWrite.contains("read transaction started inside a write transaction"))
        #expect(inWrite.contains("use the write transaction"))
        #expect(!inWrite.contains("\n"))
        #expect(KVStoreError.collectionOpenedInsideTransaction("values").description.contains("open collections before"))
    }
}
