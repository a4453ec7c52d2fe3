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
package final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    // Only ever touched with the mutex held, so the runtime's exclusivity check adds nothing.
    @exclusivity(unchecked) private var value: Value

    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let rc = pthread_mutex_init(mutex, nil)
        precondition(rc == 0, "pthread_mutex_init failed: \(rc)")
    }

    deinit {
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

    /// Runs `body` with the lock held if it can be taken at once (`pthread_mutex_trylock`); returns
    /// `nil` without waiting otherwise. For code that must never block, such as an exit handler.
    package func withLockIfAvailable<R>(_ body: (inout Value) -> R) -> R? {
        guard pthread_mutex_trylock(mutex) == 0 else { return nil }
        defer { pthread_mutex_unlock(mutex) }
        return body(&value)
    }
}
