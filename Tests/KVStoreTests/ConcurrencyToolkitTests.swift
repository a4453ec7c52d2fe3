import Foundation
import KVStore
import Testing
import TestSupport

/// The process's concurrency toolkit: the bounded ``BlockingPool`` and the one ``Watcher`` thread.
@Suite struct ConcurrencyToolkitTests {
    @Test func thePoolRunsEverythingOnAtMostItsBoundOfThreads() async throws {
        let pool = BlockingPool(name: "KVPoolTest", limit: 3)
        let running = Locked((now: 0, most: 0, done: 0))
        // Three times the bound, each holding its thread a moment: all run, never more than 3 at once.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<9 {
                group.addTask {
                    try await pool.run {
                        running.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
                        usleep(20_000)
                        running.withLock { $0.now -= 1; $0.done += 1 }
                    }
                }
            }
            try await group.waitForAll()
        }
        let seen = running.withLock { $0 }
        #expect(seen.done == 9)
        #expect(seen.most <= 3)
        #expect(pool.threadCount <= 3)
    }

    @Test func aLaneRunsItsWorkOneAtATimeInOrder() async throws {
        let lane = BlockingPool.Lane()
        let order = Locked((list: [Int](), inside: 0, overlapped: false))
        await withTaskGroup(of: Void.self) { group in
            for n in 0..<20 {
                lane.submit {
                    order.withLock { $0.inside += 1; if $0.inside > 1 { $0.overlapped = true } }
                    usleep(500)
                    order.withLock { $0.list.append(n); $0.inside -= 1 }
                }
            }
            group.addTask { _ = try? await lane.run { 0 } }
        }
        let seen = order.withLock { $0 }
        #expect(seen.list == Array(0..<20))
        #expect(!seen.overlapped)
    }

    @Test func theWatcherWakesForADescriptorADeadlineAndNotACancelledWait() async throws {
        var fds: [Int32] = [-1, -1]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        // Readable: written after the wait began.
        let readEnd = fds[0]
        async let readable = Watcher.shared.readable([readEnd], until: .now + .seconds(30))
        try await Task.sleep(for: .milliseconds(20))
        var byte: UInt8 = 1
        #expect(write(fds[1], &byte, 1) == 1)
        #expect(try await readable)
        #expect(read(fds[0], &byte, 1) == 1)
        // Nothing written: the deadline answers false.
        #expect(try await Watcher.shared.readable([fds[0]], until: .now + .milliseconds(20)) == false)
        // A cancelled wait is answered false at once, and its fire never runs.
        let fired = Locked(false)
        let ticket = try Watcher.shared.arm([fds[0]]) { _ in fired.withLock { $0 = true } }
        #expect(Watcher.shared.cancel(ticket))
        #expect(write(fds[1], &byte, 1) == 1)
        let waiting = Task { try await Watcher.shared.readable([], until: .now + .seconds(60)) }
        waiting.cancel()
        #expect(try await waiting.value == false)
        #expect(try await Watcher.shared.readable([fds[0]], until: .now + .seconds(30)))
        #expect(!fired.withLock { $0 })
    }
}
