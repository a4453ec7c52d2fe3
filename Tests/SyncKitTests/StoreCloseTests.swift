import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport

/// A closed store is released (issue 37): nothing process-wide keeps it, its history or its async
/// writer queue alive, so a process that opens and closes stores does not grow.
@Suite struct StoreCloseTests {
    let dir = TemporaryDirectory()

    static func openDescriptors() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
    }

    static func residentKiB() -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
    }

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

    @Test func openingAndClosingAThousandStoresReleasesEachOne() async throws {
        // Warm up what stays for the process anyway (the first environment's statics, Dispatch's threads).
        _ = try await useAndClose(-1)
        let descriptors = Self.openDescriptors()
        let resident = Self.residentKiB()
        var released: [(store: Weak<Store>, history: Weak<History>)] = []
        for index in 0..<1_000 {
            released.append(try await useAndClose(index))
        }
        // An async write's block lets go of its store on the writer queue's thread just after the
        // write returns: wait for that, with a deadline, rather than count at one instant.
        func alive() -> Int { released.count { $0.store.value != nil || $0.history.value != nil } }
        let deadline = Date().addingTimeInterval(BuildScale.seconds(20))
        while alive() > 0, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let alive = alive()
        let grownDescriptors = Self.openDescriptors() - descriptors
        let grownKiB = Self.residentKiB() - resident
        print("[close] 1,000 stores opened, written, closed: \(alive) still alive, \(grownDescriptors) more descriptors, resident set \(grownKiB / 1024) MiB more")
        #expect(alive == 0, "\(alive) closed stores (or their histories) are still alive")
        // Each open environment holds data.mdb and lock.mdb: 1,000 leaked stores would hold 2,000.
        #expect(grownDescriptors <= 16, "\(grownDescriptors) descriptors more after closing every store")
        // Each leaked environment also keeps its map and its pages: bounded, not per store.
        #expect(grownKiB < 48 * 1024, "the resident set grew \(grownKiB) KiB over 1,000 closed stores")
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
