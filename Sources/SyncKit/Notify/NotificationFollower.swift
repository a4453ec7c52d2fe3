import KVStore

/// ``ChangeNotifier/notifications(_:)``'s stream, fed by the process's ``KVStore/Watcher``: each time
/// the watch is readable, the watcher's thread reads its events (without waiting), yields once if one
/// names the notification, and waits again. No thread of its own.
final class NotificationFollower: Sendable {
    let watch: InotifyWatch
    let name: [UInt8]
    let continuation: AsyncStream<Void>.Continuation
    /// The armed wait, and whether the stream ended.
    private let state = Locked<(ticket: Watcher.Ticket?, stopped: Bool)>((nil, false))

    init(watch: InotifyWatch, name: [UInt8], continuation: AsyncStream<Void>.Continuation) {
        (self.watch, self.name, self.continuation) = (watch, name, continuation)
    }

    /// Waits for the next events, unless the stream ended.
    func arm() throws(KVStoreError) {
        try state.withLock { state throws(KVStoreError) in
            guard !state.stopped else { return }
            state.ticket = try Watcher.shared.arm([watch.inotify]) { [self] _ in fired() }
        }
    }

    func stop() {
        let ticket = state.withLock { state -> Watcher.Ticket? in
            state.stopped = true
            return state.ticket
        }
        if let ticket { Watcher.shared.cancel(ticket) }
    }

    /// On the watcher's thread: the events there are, then the next wait.
    private func fired() {
        guard let named = watch.drain(naming: name) else { return continuation.finish() }
        if named { continuation.yield(()) }
        do {
            try arm()
        } catch {
            continuation.finish()
        }
    }
}
