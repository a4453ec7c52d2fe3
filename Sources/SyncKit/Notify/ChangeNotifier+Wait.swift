#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

extension ChangeNotifier {
    /// Blocks the calling thread until any process posts `name`, or `timeout` passes; returns whether
    /// a post came. For command-line tools and threads of their own, not for tasks of the cooperative
    /// pool (use ``notifications(_:)`` there).
    ///
    /// ```swift
    /// if try notifier.wait(timeout: .seconds(5)) { reload() }
    /// ```
    ///
    /// Observation starts when this is called and ends when it returns, so a post made between two
    /// calls is not seen. To wait again and again without missing a post, ``subscribe(_:)`` once and
    /// call ``Subscription/wait(timeout:)`` on the subscription.
    ///
    /// - Throws: ``SyncError/invalidNotificationName(_:)``, or ``KVStore/KVStoreError/io(operation:path:errno:)``
    ///   if the directory cannot be watched.
    public func wait(_ name: String = Self.changes, timeout: Duration) throws -> Bool {
        try subscribe(name).wait(timeout: timeout)
    }

    /// Starts observing `name`: posts from now on are kept for ``Subscription/wait(timeout:)``, until
    /// the subscription is released.
    ///
    /// ```swift
    /// let changes = try notifier.subscribe()
    /// while true {
    ///     printChanges()                                   // a post made meanwhile is not lost
    ///     _ = changes.wait(timeout: .seconds(1))
    /// }
    /// ```
    ///
    /// - Throws: ``SyncError/invalidNotificationName(_:)``, or ``KVStore/KVStoreError/io(operation:path:errno:)``
    ///   if the directory cannot be watched.
    public func subscribe(_ name: String = Self.changes) throws -> Subscription {
        _ = try path(for: name)
        return Subscription(watch: try InotifyWatch(directory: directory), name: name)
    }

    /// Posts of one name, observed from the moment ``ChangeNotifier/subscribe(_:)`` returned: an inotify
    /// watch, whose descriptors are closed when the subscription is released. Use it from one thread
    /// at a time.
    public final class Subscription: Sendable {
        let watch: InotifyWatch
        /// The name observed.
        public let name: String

        init(watch: InotifyWatch, name: String) {
            self.watch = watch
            self.name = name
        }

        /// Blocks until a post of ``name`` made since the previous call (or since the subscription
        /// began) is seen, or `timeout` passes; returns whether a post came. Posts made meanwhile
        /// coalesce into one wake.
        public func wait(timeout: Duration) -> Bool {
            watch.wait(for: Array(name.utf8), timeout: timeout)
        }
    }
}

extension InotifyWatch {
    /// Blocks until a batch of events names `name`, or `timeout` passes (or the watch fails); returns
    /// whether events named `name`.
    func wait(for name: [UInt8], timeout: Duration) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        return nextBatch(naming: name, timeout: timeout, buffer: &buffer) == .named
    }
}
