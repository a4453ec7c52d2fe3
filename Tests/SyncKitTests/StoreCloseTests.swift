import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport

/// A closed store is released (issue 37): nothing process-wide keeps it, its history or its async
/// writer queue alive, so a process that opens and closes stores does not grow.
@Suite struct StoreCloseTests {
    let dir = TemporaryDirectory()

    /// One store with everything that used to pin it: a history attached and enabled, a write that
    /// recorded an entry, and an async write (its writer queue). Returns weak references to what must go.
    func useAndClose(_ index: Int) async throws -> (store: Weak<Store>, history: Weak<History>) {
        let container = try SharedContainer(groupIdentifier: "group.com.example.close\(index)", root: dir.path)
        let history = try History.attach(to: container)
        #expect(try History.attach(to: container) === history, "attaching again returns the same history")
        try history.enable(.collection("notes"))
        let notes = try container.store.collection("notes", key: Int.self, value: String.self)
        try notes.put("sync", forKey: 1)
        try await container.store.write { tx in try notes.put("async", forKey: 2, in: tx) }
        #expect(try history.currentToken().rawValue == 2)
        container.close()
        return (Weak(container.store), Weak(history))
    }

    /// In this process: each closed store, and its history, is released.
    @Test func closedStoresAndTheirHistoriesAreReleased() async throws {
        var released: [(store: Weak<Store>, history: Weak<History>)] = []
        for index in 0..<100 {
            released.append(try await useAndClose(index))
        }
        // An async write's block lets go of its store on the writer queue's thread just after the
        // write returns: wait for that, with a deadline, rather than count at one instant.
        func alive() -> Int { released.count { $0.store.value != nil || $0.history.value != nil } }
        let deadline = Date().addingTimeInterval(BuildScale.seconds(20))
        while alive() > 0, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(alive() == 0, "\(alive()) closed stores (or their histories) are still alive")
    }

    /// In a process of its own, where nothing else opens files or allocates: 1,000 stores opened,
    /// written (synchronously and async) and closed leave its descriptors and resident set as they were.
    @Test(.blockingWork) func aProcessThatOpensAndClosesAThousandStoresDoesNotGrow() throws {
        let r = try run(productsDirectory() + "/kvtest-helper", ["open-close-stores", dir.path, "group.com.example.close", "1000"],
                        timeout: BuildScale.seconds(300))
        #expect(r.status == 0, "\(r.stderr)")
        print("[close] 1,000 stores opened, written, closed, in a process of their own: \(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines))")
        let words = r.stdout.split(separator: " ").map { String($0).trimmingCharacters(in: .whitespacesAndNewlines) }
        func figure(_ name: String) -> Int? { words.firstIndex(of: name).flatMap { Int(words[$0 + 1]) } }
        let (alive, descriptors, resident) = (try #require(figure("alive")), try #require(figure("descriptors")), try #require(figure("residentKiB")))
        #expect(alive == 0, "\(alive) closed stores (or their histories) are still alive")
        // Each open environment holds data.mdb and lock.mdb, and each history a notifier: 1,000 leaked
        // stores hold 4,000 descriptors.
        #expect(descriptors <= 16, "\(descriptors) descriptors more after closing every store")
        // And each its map's pages and its objects (about 180 KiB a store when they leaked). Not under a
        // sanitizer: AddressSanitizer keeps freed memory in quarantine, ThreadSanitizer shadows it.
        if BuildScale.sanitizer == nil {
            #expect(resident < 48 * 1024, "the resident set grew \(resident) KiB over 1,000 closed stores")
        }
    }

    @Test func aClosedStoreRefusesTransactionsAndAReopenedOneWorks() async throws {
        let group = "group.com.example.closed"
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        let history = try History.attach(to: container)
        try history.enable(.collection("notes"))
        let notes = try container.store.collection("notes", key: Int.self, value: String.self)
        try notes.put("before", forKey: 1)
        container.close()
        container.close()
        #expect(container.store.closed)
        #expect(throws: KVStoreError.closed(path: container.store.directory)) { try notes.get(1) }
        #expect(throws: KVStoreError.closed(path: container.store.directory)) { try notes.put("after", forKey: 2) }
        await #expect(throws: KVStoreError.closed(path: container.store.directory)) {
            try await container.store.write { tx in try notes.put("after", forKey: 3, in: tx) }
        }
        // Another handle on the same path, open at once, is not affected, and gets a history of its own
        // (the requirement that history be attached still holds for it).
        let again = try SharedContainer(groupIdentifier: group, root: dir.path)
        let reopened = try again.store.collection("notes", key: Int.self, value: String.self)
        #expect(throws: KVStoreError.self) { try reopened.put("no history", forKey: 4) }
        let second = try History.attach(to: again)
        #expect(second !== history)
        try reopened.put("after", forKey: 2)
        #expect(try reopened.get(1) == "before" && reopened.get(2) == "after")
        #expect(try second.currentToken().rawValue == 2)
    }
}

/// A weak reference, to see whether something was released.
final class Weak<T: AnyObject> {
    weak var value: T?
    init(_ value: T) { self.value = value }
}
