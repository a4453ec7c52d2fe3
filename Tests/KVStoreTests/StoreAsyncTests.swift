import Foundation
import KVStore
import Testing
import TestSupport

/// `async` reads and writes: they run on threads of their own, so a write waiting for another
/// process's writer lock leaves Swift's cooperative pool free.
@Suite struct StoreAsyncTests {
    let dir = TemporaryDirectory()

    @Test func asyncReadsAndWritesCommitAndReturn() async throws {
        let store = try dir.store()
        let scores = try store.collection("scores", key: String.self, value: Int.self)
        let written = try await store.write(author: "app") { tx in try scores.put(42, forKey: "alice", in: tx); return 1 }
        #expect(written == 1)
        #expect(try await store.read { tx in try scores.get("alice", in: tx) } == 42)
        await #expect(throws: KVStoreError.self) {
            try await store.write { tx in _ = try scores.get("alice", in: tx); throw KVStoreError.transactionEnded }
        }
        // Cancelled before it began: the write does not happen.
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await store.write { tx in try scores.put(0, forKey: "alice", in: tx) }
        }
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(try scores.get("alice") == 42)
    }

    @Test func asyncWritesWaitingForAnotherProcessesLockLeaveThePoolFree() async throws {
        let group = "group.com.example.asyncwrite"
        let container = try dir.container(group)
        let scores = try container.store.collection("scores", key: Int.self, value: Int.self)
        let release = dir.path + "/release"
        let holder = try BackgroundProcess.helper(["hold-write-until", dir.path, group, release])
        #expect(holder.waitForLine { $0 == "writing" } != nil)
        // Should the pool be blocked, release the lock anyway after a while, so the test fails, not hangs.
        // Not sooner: in a full parallel run the other tests' blocking work holds the 2-core machine's
        // cooperative pool for up to 30 s in a debug build, and longer under ThreadSanitizer.
        DispatchQueue.global().asyncAfter(deadline: .now() + 300) { _ = FileManager.default.createFile(atPath: release, contents: nil) }

        let store = container.store
        let done = Counter()
        // More waiting writes than the pool has threads.
        let width = ProcessInfo.processInfo.activeProcessorCount * 2 + 2
        let writes = (0..<width).map { i in
            Task {
                try await store.write(author: "app") { tx in try scores.put(i, forKey: i, in: tx) }
                done.increment()
            }
        }
        // The pool still runs other tasks, and a read, while every write waits.
        let clock = ContinuousClock()
        let start = clock.now
        let sum = await withTaskGroup(of: Int.self) { group in
            for i in 0..<100 { group.addTask { await Task.yield(); return i } }
            return await group.reduce(0, +)
        }
        let tasksDone = clock.now
        #expect(sum == 4950)
        #expect(try await store.read { tx in try scores.count(in: tx) } == 0)
        print("[async] \(width) writes waiting for another process's lock: 100 pool tasks took \(tasksDone - start), then an async read \(clock.now - tasksDone)")
        #expect(done.value == 0)
        _ = FileManager.default.createFile(atPath: release, contents: nil)
        for write in writes { try await write.value }
        #expect(done.value == width)
        #expect(try scores.count() == width)
        #expect(holder.wait().status == 0)
        #expect(holder.output.contains("committed"))
    }
}

/// A counter shared between tasks.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
    func increment() { lock.lock(); count += 1; lock.unlock() }
}
