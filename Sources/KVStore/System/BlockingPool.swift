#if canImport(Glibc)
import Glibc
#endif

/// The process's one bounded pool of threads for blocking work: async transactions, observation
/// reads, waits for a writer lock another process holds. Work that may block never runs on Swift's
/// cooperative pool (a few threads for the whole program) and never gets a thread of its own: the
/// pool's threads start as work arrives, at most ``limit`` of them, and stay for the next work.
///
/// ```swift
/// let count = try await BlockingPool.shared.run { try store.read { tx in try items.count(in: tx) } }
/// ```
///
/// Work runs in the order it was submitted, as threads come free. Work that waits for other work
/// of the pool (not for another process, or the kernel) could wait for ever once every thread does
/// so: nothing of the package does. Waiting for a file descriptor or a deadline is not blocking
/// work either: that is the ``Watcher``'s, with no thread of its own per wait.
package final class BlockingPool: Sendable {
    /// The process's pool: twice the processors, at least 8 (a write waiting for another process's
    /// writer lock holds its thread meanwhile, so the bound is above the processors).
    package static let shared = BlockingPool(name: "KVPool", limit: max(8, 2 * Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))))

    package typealias Work = @Sendable () -> Void

    private struct State {
        var queue: [Work] = []
        var head = 0
        var threads = 0
        var busy = 0
        var pending: Int { queue.count - head }
    }

    private let state = Locked(State(), waitable: true)
    /// The most threads the pool runs at once.
    package let limit: Int
    private let name: String

    package init(name: String, limit: Int) {
        self.name = name
        self.limit = max(1, limit)
    }

    /// The pool's threads now (started, idle or busy).
    package var threadCount: Int { state.withLock { $0.threads } }

    /// Runs `work` on a thread of the pool, once one is free.
    package func submit(_ work: @escaping Work) {
        let start = state.withLock { state -> Bool in
            state.queue.append(work)
            // Every job waiting has an idle thread to take it, or a new one while the bound allows.
            guard state.threads - state.busy < state.pending, state.threads < limit else { return false }
            state.threads += 1
            return true
        }
        state.broadcast()
        guard start else { return }
        do {
            try SystemCall.startThread { [self] in loop() }
        } catch {
            // The work already queued runs on the threads there are; with none, on this one.
            let alone = state.withLock { state -> Bool in
                state.threads -= 1
                return state.threads == 0
            }
            if alone { drainHere() }
        }
    }

    /// Runs `work` on the pool and resumes the calling task with its result. If the task is cancelled
    /// before `work` starts, it does not start and this throws `CancellationError`; once started, it
    /// runs to the end.
    package func run<R: Sendable>(_ work: @escaping @Sendable () throws -> R) async throws -> R {
        try await run(submitting: submit, work)
    }

    /// ``run(_:)`` through `submit` (the pool's, or a ``Lane``'s).
    package func run<R: Sendable>(submitting submit: (@escaping Work) -> Void,
                                  _ work: @escaping @Sendable () throws -> R) async throws -> R {
        let cancelled = Locked(false)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<R, any Error>) in
                submit {
                    if cancelled.withLock({ $0 }) {
                        continuation.resume(throwing: CancellationError())
                    } else {
                        continuation.resume(with: Result { try work() })
                    }
                }
            }
        } onCancel: {
            cancelled.withLock { $0 = true }
        }
    }

    private func next() -> Work {
        state.withLock(when: { $0.pending > 0 }) { state in
            let work = state.queue[state.head]
            state.queue[state.head] = {}   // what the work captured is released when it ends, not when the queue empties
            state.head += 1
            if state.head == state.queue.count {
                state.queue.removeAll(keepingCapacity: true)
                state.head = 0
            } else if state.head >= 256 && state.head * 2 >= state.queue.count {
                // A queue that never empties (work arriving as fast as it runs) does not grow for ever.
                state.queue.removeFirst(state.head)
                state.head = 0
            }
            state.busy += 1
            return work
        }
    }

    private func loop() {
        nameThisThread(name)
        while true {
            next()()
            state.withLock { $0.busy -= 1 }
        }
    }

    /// The queue, on the calling thread (no thread could start).
    private func drainHere() {
        while let work = state.withLock({ state -> Work? in
            guard state.pending > 0 else { return nil }
            defer { state.head += 1 }
            return state.queue[state.head]
        }) { work() }
    }

    /// Work run one piece at a time, in order, on the pool's threads: a store's async writes (one
    /// writer at a time, however many wait, holds one thread).
    package final class Lane: Sendable {
        private let pool: BlockingPool
        private let state = Locked((queue: [Work](), running: false))

        package init(on pool: BlockingPool = .shared) { self.pool = pool }

        /// Runs `work` after the lane's earlier work, on the pool.
        package func submit(_ work: @escaping Work) {
            let start = state.withLock { state -> Bool in
                state.queue.append(work)
                guard !state.running else { return false }
                state.running = true
                return true
            }
            if start { pool.submit { [self] in drain() } }
        }

        /// ``BlockingPool/run(_:)`` after the lane's earlier work.
        package func run<R: Sendable>(_ work: @escaping @Sendable () throws -> R) async throws -> R {
            try await pool.run(submitting: submit, work)
        }

        private func drain() {
            while let work = state.withLock({ state -> Work? in
                guard !state.queue.isEmpty else {
                    state.running = false
                    return nil
                }
                return state.queue.removeFirst()
            }) { work() }
        }
    }
}

/// Names the calling thread as `ps -L`, `top -H` and `/proc/<pid>/task/<tid>/comm` show it (at most 15
/// bytes). `Thread.name` does not always reach the kernel (it races with the thread's start), and
/// neither `prctl` (variadic) nor `pthread_setname_np` is visible from Swift's Glibc module, so this
/// writes the thread's own `comm` file.
package func nameThisThread(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else { return }
    defer { close(fd) }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}
