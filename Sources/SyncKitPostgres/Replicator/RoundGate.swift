#if PostgreSQL
import KVStore

/// Lets one round of a replicator in at a time, in the order they came: the others wait suspended,
/// holding no thread (a lock that blocked would hold one of the cooperative pool's few threads while
/// a round, which awaits the server, runs on another). A round that waits is not cancelled with its
/// task: it waits for the round before it, which has timeouts of its own.
final class RoundGate: Sendable {
    private struct State {
        var busy = false
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// Rounds between ``enter()`` and ``leave()`` now, and the most there ever were at once.
        var inside = 0
        var mostInside = 0
    }
    private let state = Locked(State())

    /// Rounds waiting for the one inside.
    var waiting: Int { state.withLock { $0.waiters.count } }
    /// The most rounds that were ever inside at once (1 unless the gate is broken).
    var mostInside: Int { state.withLock { $0.mostInside } }

    /// Runs `body` once the rounds before it have left.
    func run<R>(_ body: () async throws -> R) async throws -> R {
        await enter()
        defer { leave() }
        return try await body()
    }

    private func enter() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                guard state.busy else {
                    state.busy = true
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
        state.withLock { state in
            state.inside += 1
            state.mostInside = max(state.mostInside, state.inside)
        }
    }

    private func leave() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.inside -= 1
            // Handed over to the next one, still busy; or free.
            guard !state.waiters.isEmpty else {
                state.busy = false
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}
#endif
