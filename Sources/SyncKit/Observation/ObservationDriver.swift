#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// Runs one observation without a thread of its own: the process's ``KVStore/Watcher`` waits for a
/// local commit that touched what the value read, or for a change notification from another process,
/// and the value is read again on the ``KVStore/BlockingPool`` (one step at a time, then it waits again).
///
/// Sendable without a check: every stored property is a constant of a Sendable type, and what changes
/// is behind ``Locked`` (`reads`, `progress`). One step runs at a time (the next wait is armed at the
/// end of a step), so the state a step takes from `progress` and puts back is never shared.
final class ObservationDriver<Value: Sendable>: WriteObserver, Sendable {
    let observation: ValueObservation<Value>
    let store: Store
    let notifier: ChangeNotifier?
    let continuation: AsyncThrowingStream<Value, any Error>.Continuation
    /// A pipe the committing thread writes to for a local commit that may change the value.
    private let local: (read: Int32, write: Int32)
    /// What the last read read (`nil` before the first one), for filtering local commits.
    private let reads = Locked<ReadSet?>(nil)
    /// The watch on the notification directory (made by the first step), the armed wait, whether the
    /// observation stopped, and what the steps carry from one to the next.
    private let progress = Locked(Progress())

    private struct Progress {
        var watch: InotifyWatch?
        var ticket: Watcher.Ticket?
        var stopped = false
        var state = State()
    }

    private init(_ observation: ValueObservation<Value>, store: Store, notifier: ChangeNotifier?,
                 continuation: AsyncThrowingStream<Value, any Error>.Continuation) {
        self.observation = observation
        self.store = store
        self.notifier = notifier
        self.continuation = continuation
        local = Watcher.makePipe()
    }

    deinit {
        for fd in [local.read, local.write] where fd >= 0 { close(fd) }
    }

    static func start(_ observation: ValueObservation<Value>, store: Store, notifier: ChangeNotifier?,
                      continuation: AsyncThrowingStream<Value, any Error>.Continuation) {
        let driver = ObservationDriver(observation, store: store, notifier: notifier, continuation: continuation)
        ObservationCount.add(store.directory, 1)
        continuation.onTermination = { _ in driver.stop() }
        BlockingPool.shared.submit { driver.step(first: true) }
    }

    func stop() {
        let (ticket, wasStopped) = progress.withLock { progress -> (Watcher.Ticket?, Bool) in
            defer { progress.stopped = true }
            return (progress.ticket, progress.stopped)
        }
        guard !wasStopped else { return }
        store.removeObserver(self)
        // A step running now sees `stopped` and ends the observation; otherwise it ends here.
        if let ticket, Watcher.shared.cancel(ticket) { end(nil) }
    }

    /// Ends the observation once: finishes the stream, lets go of the watch and the store.
    private func end(_ error: (any Error)?) {
        let watch = progress.withLock { progress -> InotifyWatch? in
            progress.stopped = true
            defer { progress.watch = nil }
            return progress.watch
        }
        _ = watch
        store.removeObserver(self)
        if let error { continuation.finish(throwing: error) } else { continuation.finish() }
        ObservationCount.add(store.directory, -1)
    }

    // MARK: - WriteObserver (the committing thread)

    func transactionDidCommit(_ commit: CommittedTransaction) {
        if reads.withLock({ $0?.isAffected(by: commit.mutations) ?? true }) { Watcher.signal(local.write) }
    }

    // MARK: - One step (on the pool)

    /// The first step subscribes and reads; each later one reads what woke it, reads the value again
    /// if it may have changed, then arms the next wait.
    private func step(first: Bool) {
        var (watch, state, stopped) = progress.withLock { ($0.watch, $0.state, $0.stopped) }
        guard !stopped else { return end(nil) }
        do {
            if first {
                guard local.read >= 0 else {
                    throw KVStoreError.io(operation: "pipe for the observation of", path: store.directory, errno: errno)
                }
                store.addObserver(self)
                watch = try notifier.map { try InotifyWatch(directory: $0.directory) }
                try refresh(&state, force: true)
            } else {
                let local = Watcher.drain(local.read)
                var remote = false
                var synced = false
                if let watch {
                    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
                    while true {
                        let count = buffer.withUnsafeMutableBytes { read(watch.inotify, $0.baseAddress, $0.count) }
                        guard count > 0 else { break }
                        remote = remote || InotifyWatch.names(in: buffer[0..<count], contain: Self.wanted)
                        // A sync owner's record is written outside history: its post reads the value again.
                        synced = synced || InotifyWatch.names(in: buffer[0..<count], contain: Self.syncStatus)
                    }
                }
                if local || remote || synced { try refresh(&state, force: local || synced) }
            }
            let fds = [local.read] + (watch.map { [$0.inotify] } ?? [])
            stopped = try progress.withLock { progress throws -> Bool in
                progress.watch = watch
                progress.state = state
                guard !progress.stopped else { return true }
                progress.ticket = try Watcher.shared.arm(fds) { [self] _ in
                    BlockingPool.shared.submit { self.step(first: false) }
                }
                return false
            }
            if stopped { end(nil) }
        } catch {
            end(error)
        }
    }

    private static var wanted: [UInt8] { Array(ChangeNotifier.changes.utf8) }
    private static var syncStatus: [UInt8] { Array(SyncService.statusNotification.utf8) }

    private struct State {
        var history: HistoryWatermark?
        /// The last history token seen, when history records every collection the value read.
        var token: UInt64?
        var last: Value?
    }

    private enum Outcome {
        /// History shows no change to what the value read, up to `token`.
        case unchanged(token: UInt64)
        /// The value read again, what it read, and the history token it saw if history covers that.
        case read(Value, ReadSet, token: UInt64?)
    }

    /// Reads the value again, unless `force` is false and history shows that nothing it read changed;
    /// delivers it unless it is a duplicate.
    private func refresh(_ state: inout State, force: Bool) throws {
        if state.history == nil { state.history = try HistoryWatermark(store: store) }
        let history = state.history
        let token = state.token
        let known = force ? nil : reads.withLock { $0 }
        let outcome = try store.read { tx -> Outcome in
            var current: UInt64?
            if let history, let token, let known {
                // History must still record every collection read (one may have been disabled since).
                var covered = true
                for target in known.targets where covered {
                    covered = try store.observerRequirement(for: target, in: tx) == History.kind
                }
                let scan = try history.scan(since: token, affecting: known, in: tx)
                if covered && !scan.changed { return .unchanged(token: scan.last) }
                current = scan.last
            } else if let history {
                current = try history.lastToken(in: tx)
            }
            let (value, reads) = try tx.trackingReads { try observation.fetch(tx) }
            var covered = history != nil && reads.isComplete
            for target in reads.targets where covered {
                covered = try store.observerRequirement(for: target, in: tx) == History.kind
            }
            return .read(value, reads, token: covered ? current : nil)
        }
        switch outcome {
        case .unchanged(let last):
            state.token = last
        case .read(let value, let newReads, let last):
            state.token = last
            reads.withLock { $0 = newReads }
            if let previous = state.last, let isDuplicate = observation.isDuplicate, isDuplicate(previous, value) {
                return
            }
            state.last = value
            continuation.yield(value)
        }
    }
}

/// How many observations of each store run now: what a test counts to see that they end, and that
/// they cost the process no thread each.
package enum ObservationCount {
    private static let counts = Locked<[String: Int]>([:])

    /// The observations of the store in `directory` running now.
    package static func running(forStoreAt directory: String) -> Int {
        counts.withLock { $0[directory] ?? 0 }
    }

    static func add(_ directory: String, _ delta: Int) {
        counts.withLock { counts in
            let now = (counts[directory] ?? 0) + delta
            counts[directory] = now == 0 ? nil : now
        }
    }
}
