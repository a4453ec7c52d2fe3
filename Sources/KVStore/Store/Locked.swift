#if canImport(Glibc)
import Glibc
#endif

/// A value that threads share, guarded by a pthread mutex: `Synchronization.Mutex`'s `withLock`
/// without its blind spot.
///
/// ```swift
/// let cache = Locked<[String: Int]>([:])
/// cache.withLock { $0["a"] = 1 }
/// ```
///
/// On Linux, `Mutex` hands a contended lock over inside the kernel (a priority-inheritance futex)
/// with no user-space atomic, so ThreadSanitizer sees no order between two critical sections: it
/// reports races on correct code and cannot check the locking at all
/// (scripts/sanitize/mutex-tsan-repro.swift shows it). ThreadSanitizer intercepts pthread mutexes, so
/// with this type `swift test --sanitize=thread` checks KVStore's and SyncKit's locking for real.
///
/// Thread safety: `body` runs with the lock held; the value never leaves it except as what `body`
/// returns. Not reentrant: calling `withLock` on the same instance inside `body` deadlocks.
///
/// `@unchecked Sendable`: `mutex` guards `value` (and `condition` waits on `mutex`); nothing else is
/// stored.
package final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// Signalled by ``broadcast()``, for ``withLock(when:_:)``; `nil` unless made `waitable`.
    private let condition: UnsafeMutablePointer<pthread_cond_t>?
    // Only ever touched with the mutex held, so the runtime's exclusivity check adds nothing.
    @exclusivity(unchecked) private var value: Value

    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let rc = pthread_mutex_init(mutex, nil)
        precondition(rc == 0, "pthread_mutex_init failed: \(rc)")
        condition = nil
    }

    /// A value that threads may also wait on (``withLock(when:_:)``), woken by ``broadcast()``.
    package init(_ value: Value, waitable: Bool) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let rc = pthread_mutex_init(mutex, nil)
        precondition(rc == 0, "pthread_mutex_init failed: \(rc)")
        if waitable {
            let made = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
            made.initialize(to: pthread_cond_t())
            pthread_cond_init(made, nil)
            condition = made
        } else {
            condition = nil
        }
    }

    deinit {
        if let condition {
            pthread_cond_destroy(condition)
            condition.deinitialize(count: 1)
            condition.deallocate()
        }
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` on the value with the lock held, and returns what it returns.
    package func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Waits, the lock released meanwhile, until `ready` holds (checked with the lock held, again after
    /// each ``broadcast()``), then runs `body` with the lock still held. Only for a value made
    /// `waitable` (otherwise `ready` is only polled once, and must hold).
    package func withLock<R>(when ready: (Value) -> Bool, _ body: (inout Value) -> R) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !ready(value) {
            guard let condition else { preconditionFailure("withLock(when:) on a Locked that is not waitable") }
            pthread_cond_wait(condition, mutex)
        }
        return body(&value)
    }

    /// Wakes every thread waiting in ``withLock(when:_:)``.
    package func broadcast() {
        if let condition { pthread_cond_broadcast(condition) }
    }

    /// Runs `body` with the lock held if it can be taken at once (`pthread_mutex_trylock`); returns
    /// `nil` without waiting otherwise. For code that must never block, such as an exit handler.
    package func withLockIfAvailable<R>(_ body: (inout Value) -> R) -> R? {
        guard pthread_mutex_trylock(mutex) == 0 else { return nil }
        defer { pthread_mutex_unlock(mutex) }
        return body(&value)
    }
}
