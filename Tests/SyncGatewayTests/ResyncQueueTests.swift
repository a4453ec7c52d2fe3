#if PostgreSQL
import Foundation
import KVStore
@testable import SyncGateway
import Testing

/// The order in which the gateway takes resyncs (``ResyncQueue``): one credential's one at a time,
/// the groups in turn, and a bound on what one credential may have waiting.
@Suite struct ResyncQueueTests {
    /// Waits until `queue` has `count` requests waiting (each task enqueues itself in its own time).
    static func waiting(_ queue: ResyncQueue, _ count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while queue.counts.waiting != count {
            guard ContinuousClock.now < deadline else { throw CancellationError() }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Five requests of group A (three of one credential) and then one of group B wait behind a turn
    /// of A's: B's is the second served, not the sixth (as first come, first served would have it),
    /// and A's credential never has two turns at once (its waiting requests go after the others').
    @Test func anotherGroupIsServedAfterOneTurnAndACredentialHasOneTurnAtATime() async throws {
        let queue = ResyncQueue(permits: 1)
        let first = try #require(await queue.turn(group: "A", credential: "a1"))
        let order = Locked<[String]>([])
        var tasks: [Task<Void, Never>] = []
        for (index, (group, credential)) in [("A", "a1"), ("A", "a1"), ("A", "a1"), ("A", "a2"), ("A", "a3"), ("B", "b1")].enumerated() {
            tasks.append(Task {
                let turn = await queue.turn(group: group, credential: credential)
                order.withLock { $0.append(credential) }
                turn?.end()
            })
            try await Self.waiting(queue, index + 1)
        }
        first.end()
        for task in tasks { await task.value }
        // The first turn's read ends before its answer is written: a2 takes the permit (a1 still holds
        // its turn), then B's, then A's in order, a1 never twice in a row while another of A's waits.
        #expect(order.withLock { $0 } == ["a2", "b1", "a1", "a3", "a1", "a1"], "\(order.withLock { $0 })")
        #expect(queue.counts.waiting == 0 && queue.counts.holding == 0)
    }

    /// With permits free, a credential's second resync waits for its first to be written (not only
    /// read); past the requests a credential may have waiting, one more is refused at once.
    @Test func aCredentialsSecondResyncWaitsForItsFirstAnswerAndTheWaitingAreBounded() async throws {
        let queue = ResyncQueue(permits: 4, maxWaitingPerCredential: 2)
        let first = try #require(await queue.turn(group: "A", credential: "a1"))
        first.endRead()
        let granted = Locked(0)
        let second = Task {
            let turn = await queue.turn(group: "A", credential: "a1")
            granted.withLock { $0 += 1 }
            turn?.end()
        }
        let third = Task { await queue.turn(group: "A", credential: "a1")?.end() }
        try await Self.waiting(queue, 2)
        // Another credential of the group is served at once meanwhile.
        let other = try #require(await queue.turn(group: "A", credential: "a2"))
        other.end()
        // The credential's third waiting request is refused.
        #expect(await queue.turn(group: "A", credential: "a1") == nil)
        #expect(granted.withLock { $0 } == 0)
        first.end()
        await second.value
        await third.value
        #expect(granted.withLock { $0 } == 1)
        #expect(queue.counts.waiting == 0 && queue.counts.holding == 0)
    }
}
#endif
