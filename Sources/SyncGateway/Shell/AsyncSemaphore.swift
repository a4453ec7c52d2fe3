#if PostgreSQL
import Foundation
import KVStore
import NIOCore

/// At most `permits` holders at once; the others wait in order, without a thread.
final class AsyncSemaphore: Sendable {
    private let state: Locked<(permits: Int, waiting: [CheckedContinuation<Void, Never>])>

    init(permits: Int) { state = Locked((permits, [])) }

    func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = state.withLock { state -> Bool in
                guard state.permits > 0 else {
                    state.waiting.append(continuation)
                    return false
                }
                state.permits -= 1
                return true
            }
            if granted { continuation.resume() }
        }
    }

    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiting.isEmpty else {
                state.permits += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
#endif
