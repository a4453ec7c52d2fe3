import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport

/// What observations and async sync requests cost in threads: none each. The process's thread count
/// (`/proc/self/task`) is read before and while N of them run; other suites run meanwhile in this
/// process, so the bound is N / 2, far below the N threads a thread each would add. Serialized: the
/// one test's threads would count in the other's.
@Suite(.serialized) struct ObservationThreadTests {
    let dir = TemporaryDirectory()

    @Test func manyObservationsAddNoThreadEach() async throws {
        let container = try dir.container("group.com.example.threads")
        let history = try History.attach(to: container)
        let counter = try container.store.collection("counter", key: String.self, value: Int.self)
        try history.enable(.collection("counter"))
        let observation = ValueObservation.tracking { tx in try counter.get("n", in: tx) ?? 0 }
        let count = 64
        let before = processThreadCount()
        let seen = Locked([Int: Int]())
        let tasks = (0..<count).map { index in
            Task {
                for try await value in observation.values(in: container) { seen.withLock { $0[index] = value } }
            }
        }
        defer { for task in tasks { task.cancel() } }
        #expect(await wait { seen.withLock { $0.count } == count })
        // Every one of them is live: a commit reaches them all.
        try counter.put(1, forKey: "n")
        #expect(await wait { seen.withLock { $0.values.allSatisfy { $0 == 1 } } })
        let during = processThreadCount()
        #expect(ObservationCount.running(forStoreAt: container.store.directory) == count)
        print("[threads] \(count) observations: \(before) threads before, \(during) while they run")
        #expect(during - before < count / 2, "\(count) observations added \(during - before) threads")
        for task in tasks { task.cancel() }
        #expect(await wait { ObservationCount.running(forStoreAt: container.store.directory) == 0 })
    }

    @Test func manyAsyncSyncRequestsAddNoThreadEach() async throws {
        let container = try dir.container("group.com.example.requestthreads")
        let service = try SyncService(container: container)
        // Enabled for sync (the replicator's consumer), with no owner and no agent started: each
        // request waits for an owner until its deadline.
        _ = try History.attach(to: container).consumer(named: SyncService.consumerName)
        let count = 32
        let before = processThreadCount()
        let most = Locked(0)
        let outcomes = await withThrowingTaskGroup(of: SyncRequestOutcome.self) { group in
            for _ in 0..<count {
                group.addTask { try await service.request(within: .seconds(3), startingAgent: false) }
            }
            group.addTask {
                // Sampled while the requests wait (they all wait 3 s).
                for _ in 0..<10 {
                    try await Task.sleep(for: .milliseconds(150))
                    let now = processThreadCount()
                    most.withLock { $0 = max($0, now) }
                }
                throw CancellationError()
            }
            var outcomes: [SyncRequestOutcome] = []
            while let next = await group.nextResult() {
                if case .success(let outcome) = next { outcomes.append(outcome) }
            }
            return outcomes
        }
        let during = most.withLock { $0 }
        print("[threads] \(count) async sync requests: \(before) threads before, at most \(during) while they wait")
        #expect(outcomes.count == count)
        #expect(outcomes.allSatisfy { if case .notWithinDeadline = $0 { true } else { false } })
        #expect(during - before < count / 2, "\(count) requests added \(during - before) threads")
    }

    /// Polls `condition` until it holds (at most 60 s).
    func wait(_ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }
}
