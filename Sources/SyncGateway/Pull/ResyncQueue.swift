#if PostgreSQL
import Foundation
import KVStore

/// Resyncs (`GET /v1/state`, whole or a page) taken in turn, fairly: at most ``permits`` are read at
/// once over the whole gateway, and at most one per credential is read or written at a time. A
/// credential's turn lasts until its answer is written (or abandoned), so that one that asks for many
/// resyncs and reads them slowly holds one answer of the budget, never the others' share, and waits
/// behind itself only. Waiting requests are taken one group after the other (round-robin over the
/// groups with a request waiting, first come first served within a group), so that a member that
/// queues many resyncs delays another group's by one read at most. A credential may have
/// ``maxWaitingPerCredential`` requests waiting; one more is refused at once (429, naming the reason)
/// rather than queued.
///
/// A second resync of one credential waits rather than being refused: an app and its extension
/// share a credential, and a device whose connection dropped mid-answer asks again before the
/// gateway has noticed; both are honest and get their answer once the first is written.
final class ResyncQueue: Sendable {
    private struct Waiter {
        let credential: String
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var free: Int
        /// Per group, its waiting requests in order of arrival.
        var queues: [String: [Waiter]] = [:]
        /// The groups with a request waiting, in the order they are served.
        var rotation: [String] = []
        /// Credentials whose resync is being read or written.
        var holding: Set<String> = []
        /// Requests waiting, per credential.
        var waiting: [String: Int] = [:]
    }

    let permits: Int
    let maxWaitingPerCredential: Int
    private let state: Locked<State>

    init(permits: Int, maxWaitingPerCredential: Int = 8) {
        self.permits = max(1, permits)
        self.maxWaitingPerCredential = max(0, maxWaitingPerCredential)
        state = Locked(State(free: max(1, permits)))
    }

    /// A turn for `credential`'s resync in `group` (as its request claims it: a credential of another
    /// group is refused once its turn comes), waited for; `nil` when the credential already has
    /// ``maxWaitingPerCredential`` requests waiting (nothing was queued).
    func turn(group: String, credential: String) async -> ResyncTurn? {
        let admitted: Bool? = state.withLock { state in
            if state.free > 0 && !state.holding.contains(credential) {
                state.free -= 1
                state.holding.insert(credential)
                return true
            }
            guard state.waiting[credential, default: 0] < maxWaitingPerCredential else { return nil }
            return false
        }
        guard let admitted else { return nil }
        if !admitted {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                    state.waiting[credential, default: 0] += 1
                    if state.queues[group] == nil || state.queues[group]!.isEmpty { state.rotation.append(group) }
                    state.queues[group, default: []].append(Waiter(credential: credential, continuation: continuation))
                    // The state may have changed since the first look (a turn ended meanwhile).
                    return Self.dispatch(&state)
                }
                for next in ready { next.resume() }
            }
        }
        return ResyncTurn(queue: self, credential: credential)
    }

    /// Requests waiting now, and credentials holding a turn (for tests and metrics).
    var counts: (waiting: Int, holding: Int) {
        state.withLock { state in (state.waiting.values.reduce(0, +), state.holding.count) }
    }

    /// Gives back a read's permit (its answer may still be being written).
    fileprivate func endRead() {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.free += 1
            return Self.dispatch(&state)
        }
        for next in ready { next.resume() }
    }

    /// Ends `credential`'s turn: its answer is written, or abandoned.
    fileprivate func endTurn(_ credential: String) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.holding.remove(credential)
            return Self.dispatch(&state)
        }
        for next in ready { next.resume() }
    }

    /// Grants the free permits to waiting requests whose credential holds no turn: the first such
    /// request of each group in turn, the group then going to the end of the rotation.
    private static func dispatch(_ state: inout State) -> [CheckedContinuation<Void, Never>] {
        var ready: [CheckedContinuation<Void, Never>] = []
        while state.free > 0 {
            var granted = false
            for (position, group) in state.rotation.enumerated() {
                guard var queue = state.queues[group],
                      let index = queue.firstIndex(where: { !state.holding.contains($0.credential) }) else { continue }
                let waiter = queue.remove(at: index)
                state.free -= 1
                state.holding.insert(waiter.credential)
                state.waiting[waiter.credential, default: 1] -= 1
                if state.waiting[waiter.credential] == 0 { state.waiting[waiter.credential] = nil }
                state.rotation.remove(at: position)
                if queue.isEmpty {
                    state.queues[group] = nil
                } else {
                    state.queues[group] = queue
                    state.rotation.append(group)
                }
                ready.append(waiter.continuation)
                granted = true
                break
            }
            if !granted { break }
        }
        return ready
    }
}

/// One resync's turn (``ResyncQueue``): its read's permit, given back as soon as the read is done
/// (``endRead()``), and its credential's hold, given back once its answer is written or abandoned
/// (``end()``; at the latest when the last reference to it goes, so that no path can keep it).
final class ResyncTurn: Sendable {
    private let queue: ResyncQueue
    private let credential: String
    /// Whether the read's permit, and the credential's hold, were given back.
    private let ended = Locked((read: false, turn: false))

    fileprivate init(queue: ResyncQueue, credential: String) {
        (self.queue, self.credential) = (queue, credential)
    }

    func endRead() {
        guard ended.withLock({ state in defer { state.read = true }; return !state.read }) else { return }
        queue.endRead()
    }

    func end() {
        endRead()
        guard ended.withLock({ state in defer { state.turn = true }; return !state.turn }) else { return }
        queue.endTurn(credential)
    }

    deinit { end() }
}
#endif
