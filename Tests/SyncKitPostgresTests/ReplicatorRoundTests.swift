#if PostgreSQL
import Foundation
import KVStore
@testable import SyncKitPostgres
import PostgresTesting
import TestSupport
import SyncTestSupport
import Testing

/// A replicator's rounds run one at a time, whoever calls them.
@Suite struct ReplicatorRoundTests {
    /// Waits until `condition` holds, failing the test after `seconds` (scaled for sanitizers). Generous:
    /// in `make test` the whole suite shares the cooperative pool's two threads, and a test elsewhere
    /// that blocks one delays every round here.
    static func waitUntil(_ what: String, seconds: Double = 300, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int64(BuildScale.seconds(seconds) * 1000))
        while !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("timed out waiting until \(what)")
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Two `sync()` calls at once: the second waits at the gate while the first is inside its round
    /// (held there by the test's seam, so the overlap it would have is not left to timing), both end
    /// well, and one connection served both.
    @Test func twoConcurrentSyncsDoNotOverlap() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let device = try Device(group: "group.com.example.rounds.concurrent")
        try device.put("one", "k1")
        let replicator = try device.replicator(cluster.tcpURL)
        let inside = Locked(0), released = Locked(false)
        replicator.roundEntered.withLock {
            $0 = {
                inside.withLock { $0 += 1 }
                while !released.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(5)) }
            }
        }
        let first = Task { try await replicator.sync() }
        try await Self.waitUntil("the first round is inside") { inside.withLock { $0 } == 1 }
        let second = Task { try await replicator.sync() }
        try await Self.waitUntil("the second round waits at the gate") { replicator.rounds.waiting == 1 }
        // The second call is waiting, and has neither entered nor connected.
        #expect(inside.withLock { $0 } == 1)
        #expect(replicator.connectionsOpened.withLock { $0 } == 1)
        released.withLock { $0 = true }
        let reports = [try await first.value, try await second.value]
        #expect(reports.map(\.pushed) == [1, 0])
        #expect(inside.withLock { $0 } == 2)
        #expect(replicator.rounds.mostInside == 1)
        #expect(replicator.successfulRounds == 2)
        #expect(replicator.connectionsOpened.withLock { $0 } == 1)
        await replicator.close()
    }

    /// Many calls at once, of all three kinds, with nothing holding them: never two rounds inside.
    @Test func manyConcurrentRoundsRunOneAtATime() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let device = try Device(group: "group.com.example.rounds.many")
        let replicator = try device.replicator(cluster.tcpURL)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for index in 0..<12 {
                try device.put("value \(index)", "k\(index)")
                tasks.addTask {
                    switch index % 3 {
                    case 0: _ = try await replicator.sync()
                    case 1: _ = try await replicator.push()
                    default: _ = try await replicator.pull()
                    }
                }
            }
            try await tasks.waitForAll()
        }
        #expect(replicator.rounds.mostInside == 1)
        #expect(replicator.successfulRounds == 12)
        #expect(replicator.connectionsOpened.withLock { $0 } == 1)
        // Whatever order they ran in, one more sync leaves the device and the server equal.
        try await replicator.sync()
        #expect(try device.storedNotes() == cluster.storedNotes(group: device.group))
        await replicator.close()
    }

    /// A round's writes wait for the store's writer lock on the replicator's own thread, never on
    /// one of the cooperative pool's: with more replicators waiting for a held lock than the pool has
    /// threads, a task started meanwhile still runs. Each store's lock is held by a thread of the
    /// test's own, which lets go once that task ran, or after 15 minutes; what the test checks is which came
    /// first (were the waits on the pool, the task could not run until the locks were let go).
    @Test func roundsWaitingForTheWriterLockLeaveThePoolFree() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let count = ProcessInfo.processInfo.activeProcessorCount + 1
        let devices = try (0..<count).map { try Device(group: "group.com.example.rounds.pool\($0)") }
        let replicators = try devices.map { try $0.replicator(cluster.tcpURL) }
        let probed = Locked(false), probedBeforeRelease = Locked<[Bool]>([])
        let release = DispatchSemaphore(value: 0), holding = DispatchSemaphore(value: 0), released = DispatchSemaphore(value: 0)
        for device in devices {
            let container = device.container
            Thread.detachNewThread {
                try? container.store.write { _ in
                    holding.signal()
                    _ = release.wait(timeout: .now() + 900)
                    probedBeforeRelease.withLock { $0.append(probed.withLock { $0 }) }
                }
                released.signal()
            }
        }
        try await offPool { for _ in devices { holding.wait() } }
        let rounds = replicators.map { replicator in Task { try await replicator.sync() } }
        // Every round has connected; its next step is a write, which waits for the held lock.
        try await Self.waitUntil("every round connected (a round whose write waits on a pool thread holds it, and the last ones never get one)") { replicators.allSatisfy { $0.connectionsOpened.withLock { $0 } == 1 } }
        await Task.detached { probed.withLock { $0 = true } }.value
        for _ in devices { release.signal() }
        try await offPool { for _ in devices { released.wait() } }
        #expect(probedBeforeRelease.withLock { $0 } == Array(repeating: true, count: count))
        for round in rounds { _ = try await round.value }
        #expect(replicators.allSatisfy { $0.successfulRounds == 1 })
        for replicator in replicators { await replicator.close() }
    }
}
#endif
