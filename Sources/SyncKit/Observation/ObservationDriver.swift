#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// Runs one observation on a thread of its own: waits for a local commit that touched what the value
/// read, or for a change notification from another process, then reads again.
final class ObservationDriver<Value: Sendable>: WriteObserver, @unchecked Sendable {
    let observation: ValueObservation<Value>
    let store: Store
    let notifier: ChangeNotifier?
    let continuation: AsyncThrowingStream<Value, any Error>.Continuation
    /// A pipe the committing thread writes to for a local commit that may change the value.
    private let local: (read: Int32, write: Int32)
    /// A pipe written once to stop the thread.
    private let stopping: (read: Int32, write: Int32)
    /// What the last read read (`nil` before the first one), for filtering local commits.
    private let reads = Locked<ReadSet?>(nil)

    private init(_ observation: ValueObservation<Value>, store: Store, notifier: ChangeNotifier?,
                 continuation: AsyncThrowingStream<Value, any Error>.Continuation) {
        self.observation = observation
        self.store = store
        self.notifier = notifier
        self.continuation = continuation
        local = Self.makePipe()
        stopping = Self.makePipe()
    }

    deinit {
        for fd in [local.read, local.write, stopping.read, stopping.write] where fd >= 0 { close(fd) }
    }

    /// A non-blocking pipe, or `(-1, -1)`.
    private static func makePipe() -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return (-1, -1) }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        return (fds[0], fds[1])
    }

    static func start(_ observation: ValueObservation<Value>, store: Store, notifier: ChangeNotifier?,
                      continuation: AsyncThrowingStream<Value, any Error>.Continuation) {
        let driver = ObservationDriver(observation, store: store, notifier: notifier, continuation: continuation)
        continuation.onTermination = { _ in driver.stop() }
        do {
            try SystemCall.startThread {
                nameThisThread(ObservationThread.name(forStoreAt: store.directory))
                driver.run()
            }
        } catch {
            driver.stop()
            continuation.finish(throwing: error)
        }
    }

    func stop() {
        store.removeObserver(self)
        Self.signal(stopping.write)
    }

    // MARK: - WriteObserver (the committing thread)

    func transactionDidCommit(_ commit: CommittedTransaction) {
        if reads.withLock({ $0?.isAffected(by: commit.mutations) ?? true }) { Self.signal(local.write) }
    }

    // MARK: - The observation thread

    private func run() {
        do {
            guard local.read >= 0, stopping.read >= 0 else {
                throw KVStoreError.io(operation: "pipe for the observation of", path: store.directory, errno: errno)
            }
            store.addObserver(self)
            let watch = try notifier.map { try InotifyWatch(directory: $0.directory) }
            let wanted = Array(ChangeNotifier.changes.utf8)
            // A sync owner's record is written outside history: its post reads the value again.
            let syncStatus = Array(SyncService.statusNotification.utf8)
            var state = State()
            try refresh(&state, force: true)
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                var fds = [pollfd(fd: stopping.read, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: local.read, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: watch?.inotify ?? -1, events: Int16(POLLIN), revents: 0)]
                if poll(&fds, 3, -1) < 0 {
                    if errno == EINTR { continue }
                    throw KVStoreError.io(operation: "poll for the observation of", path: store.directory, errno: errno)
                }
                if fds[0].revents != 0 { break }
                let local = fds[1].revents != 0 && Self.drain(local.read)
                var remote = false
                var synced = false
                if let watch, fds[2].revents != 0 {
                    let count = buffer.withUnsafeMutableBytes { read(watch.inotify, $0.baseAddress, $0.count) }
                    if count > 0 {
                        remote = InotifyWatch.names(in: buffer[0..<count], contain: wanted)
                        synced = InotifyWatch.names(in: buffer[0..<count], contain: syncStatus)
                    }
                }
                if local || remote || synced { try refresh(&state, force: local || synced) }
            }
            continuation.finish()
        } catch {
            continuation.finish(throwing: error)
        }
        store.removeObserver(self)
    }

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

    private static func signal(_ fd: Int32) {
        var byte: UInt8 = 1
        _ = write(fd, &byte, 1)   // a full pipe is signalled already
    }

    /// Empties a pipe; returns whether it had been signalled.
    private static func drain(_ fd: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 256)
        var signalled = false
        while buffer.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }) > 0 { signalled = true }
        return signalled
    }
}

/// Names the calling thread as `ps -L`, `top -H` and `/proc/<pid>/task/<tid>/comm` show it (at most 15
/// bytes). `Thread.name` does not always reach the kernel (it races with the thread's start), and
/// neither `prctl` (variadic) nor `pthread_setname_np` is visible from Swift's Glibc module, so this
/// writes the thread's own `comm` file.
/// The name of an observation's thread: `KVObs` and a hash of its store's directory, so that the
/// threads of one store's observations can be told from another's (in `top -H`, or a test that
/// checks they end while other observations run).
package enum ObservationThread {
    package static func name(forStoreAt directory: String) -> String {
        var hash: UInt32 = 2_166_136_261
        for byte in directory.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        let hex = String(hash, radix: 16)
        return "KVObs " + String(repeating: "0", count: 8 - hex.count) + hex
    }
}

func nameThisThread(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else { return }
    defer { close(fd) }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}
