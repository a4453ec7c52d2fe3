import Foundation
import KVStore
import Testing
import TestSupport

/// The test harness's ``BlockingWork`` trait: a suite's tests run on ``BlockingWorkExecutor``'s
/// threads, never the cooperative pool's, so a test that blocks leaves the pool to the other suites.
@Suite(.blockingWork) struct BlockingWorkTraitTests {
    @Test func aSynchronousTestRunsOnTheExecutorsThreads() {
        #expect(BlockingWorkExecutor.isCurrent, "\(Thread.current.name ?? "an unnamed thread")")
    }

    @Test func anAsynchronousTestComesBackToThemAfterASuspension() async throws {
        #expect(BlockingWorkExecutor.isCurrent)
        try await Task.sleep(for: .milliseconds(5))
        #expect(BlockingWorkExecutor.isCurrent)
        // A child task inherits the preference, as a test's task group does.
        let child = await withTaskGroup(of: Bool.self) { group in
            group.addTask { BlockingWorkExecutor.isCurrent }
            return await group.next() ?? false
        }
        #expect(child)
    }
}

/// A suite without the trait runs on the pool, as Swift Testing does.
@Suite struct WithoutBlockingWorkTests {
    @Test func aSynchronousTestRunsOnThePool() {
        #expect(!BlockingWorkExecutor.isCurrent)
    }

    /// While every one of the executor's threads blocks, the pool still runs a task: the blocking
    /// is the executor's alone.
    @Test func thePoolRunsWhileEveryThreadOfTheExecutorBlocks() async throws {
        let release = DispatchSemaphore(value: 0)
        let blocked = Locked(0)
        // An executor of its own: the shared one's threads are other suites' in a full run.
        let executor = BlockingWorkExecutor(threads: 2)
        let blockers = (0..<executor.threads).map { _ in
            Task(executorPreference: executor) {
                blocked.withLock { $0 += 1 }
                release.wait()
            }
        }
        let deadline = ContinuousClock.now + .seconds(60)
        while blocked.withLock({ $0 }) < executor.threads && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(blocked.withLock { $0 } == executor.threads)
        let ranOnPool = await Task { !BlockingWorkExecutor.isCurrent }.value
        #expect(ranOnPool)
        for _ in blockers { release.signal() }
        for blocker in blockers { await blocker.value }
    }
}

