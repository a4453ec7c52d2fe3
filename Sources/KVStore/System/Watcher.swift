#if canImport(Glibc)
import Glibc
#endif

/// The process's one watcher thread: it waits, in one `poll`, for every file descriptor and deadline
/// the process waits on (each observation's local commits and change notifications, each sync
/// request's owner record, retry timers), and hands what became ready to whoever waited. N
/// observations cost one thread, not N.
///
/// ```swift
/// let posted = await Watcher.shared.readable([inotify], until: .now + .milliseconds(50))
/// ```
///
/// A wait is one-shot: it fires once (readable, or its deadline passed) and is gone; to wait again,
/// arm again. `fire` runs on the watcher's thread and must not block (hand blocking work to the
/// ``BlockingPool``). The thread starts with the first wait and stays for the process's life.
package final class Watcher: Sendable {
    package static let shared = Watcher()

    /// One armed wait's handle, for ``cancel(_:)``.
    package struct Ticket: Hashable, Sendable { let id: UInt64 }

    private struct Wait {
        let fds: [Int32]
        let deadline: ContinuousClock.Instant?
        let fire: @Sendable (_ readable: Bool) -> Void
    }

    private struct State {
        var waits: [UInt64: Wait] = [:]
        var nextID: UInt64 = 0
        var started = false
        /// The pipe that interrupts `poll` when a wait is armed or cancelled (made with the thread).
        var wake: (read: Int32, write: Int32) = (-1, -1)
    }

    private let state = Locked(State())

    private init() {}

    /// Arms a wait: `fire(true)` once any of `fds` is readable (or reports an error or hang-up), or
    /// `fire(false)` once `deadline` passes (never, for `nil`). An empty `fds` is a timer.
    ///
    /// - Throws: ``KVStoreError/io(operation:path:errno:)`` if the watcher's thread or pipe cannot be made.
    @discardableResult
    package func arm(_ fds: [Int32], until deadline: ContinuousClock.Instant? = nil,
                     _ fire: @escaping @Sendable (_ readable: Bool) -> Void) throws(KVStoreError) -> Ticket {
        let (ticket, wake) = try state.withLock { state throws(KVStoreError) -> (Ticket, Int32) in
            if !state.started {
                let fds = Self.makePipe()
                guard fds.read >= 0 else { throw .io(operation: "pipe for the watcher thread", path: "", errno: errno) }
                do throws(KVStoreError) {
                    try SystemCall.startThread { [self] in run(wake: fds.read) }
                } catch {
                    close(fds.read)
                    close(fds.write)
                    throw error
                }
                state.wake = fds
                state.started = true
            }
            state.nextID += 1
            state.waits[state.nextID] = Wait(fds: fds, deadline: deadline, fire: fire)
            return (Ticket(id: state.nextID), state.wake.write)
        }
        Self.signal(wake)
        return ticket
    }

    /// Disarms a wait; returns whether it was still armed (then `fire` is never called).
    @discardableResult
    package func cancel(_ ticket: Ticket) -> Bool {
        let removed = state.withLock { $0.waits.removeValue(forKey: ticket.id) != nil }
        // The descriptor may close now: `poll` must not go on watching its number.
        if removed { Self.signal(state.withLock { $0.wake.write }) }
        return removed
    }

    /// Suspends until one of `fds` is readable (`true`), `deadline` passes or the task is cancelled
    /// (`false`), holding no thread meanwhile.
    ///
    /// - Throws: what ``arm(_:until:_:)`` throws.
    package func readable(_ fds: [Int32], until deadline: ContinuousClock.Instant?) async throws(KVStoreError) -> Bool {
        let waiting = Locked<Waiting>(Waiting())
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Bool, KVStoreError>, Never>) in
                let cancelled = waiting.withLock { state -> Bool in
                    state.continuation = continuation
                    return state.cancelled
                }
                guard !cancelled else { return Self.finish(waiting, .success(false)) }
                do throws(KVStoreError) {
                    let ticket = try arm(fds, until: deadline) { readable in Self.finish(waiting, .success(readable)) }
                    let cancelledMeanwhile = waiting.withLock { state -> Bool in
                        state.ticket = ticket
                        return state.cancelled
                    }
                    if cancelledMeanwhile, cancel(ticket) { Self.finish(waiting, .success(false)) }
                } catch {
                    Self.finish(waiting, .failure(error))
                }
            }
        } onCancel: {
            let ticket = waiting.withLock { state -> Ticket? in
                state.cancelled = true
                return state.ticket
            }
            if let ticket, cancel(ticket) { Self.finish(waiting, .success(false)) }
        }
        return try result.get()
    }

    /// One ``readable(_:until:)``: its continuation (resumed once), its wait, whether it was cancelled.
    private struct Waiting {
        var continuation: CheckedContinuation<Result<Bool, KVStoreError>, Never>?
        var ticket: Ticket?
        var cancelled = false
    }

    private static func finish(_ waiting: Locked<Waiting>, _ result: Result<Bool, KVStoreError>) {
        waiting.withLock { state in
            state.continuation?.resume(returning: result)
            state.continuation = nil
        }
    }

    /// Suspends until `deadline` (a timer of the watcher's), or the task is cancelled: holds no thread.
    package func sleep(until deadline: ContinuousClock.Instant) async throws(KVStoreError) {
        _ = try await readable([], until: deadline)
    }

    // MARK: - The thread

    private func run(wake: Int32) {
        nameThisThread("KVWatch")
        let clock = ContinuousClock()
        var fds: [pollfd] = []
        var owners: [UInt64] = []
        while true {
            let now = clock.now
            var soonest: ContinuousClock.Instant?
            var due: [(UInt64, Bool)] = []
            fds.removeAll(keepingCapacity: true)
            owners.removeAll(keepingCapacity: true)
            fds.append(pollfd(fd: wake, events: Int16(POLLIN), revents: 0))
            owners.append(0)
            state.withLock { state in
                for (id, wait) in state.waits {
                    if let deadline = wait.deadline {
                        if deadline <= now {
                            due.append((id, false))
                            continue
                        }
                        soonest = min(soonest ?? deadline, deadline)
                    }
                    for fd in wait.fds {
                        fds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0))
                        owners.append(id)
                    }
                }
            }
            if due.isEmpty {
                var milliseconds: Int32 = -1
                if let soonest {
                    let (seconds, attoseconds) = now.duration(to: soonest).components
                    milliseconds = Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
                }
                let ready = poll(&fds, nfds_t(fds.count), milliseconds)
                if ready < 0 && errno != EINTR { usleep(1_000) }
                if ready > 0 {
                    if fds[0].revents != 0 { Self.drain(wake) }
                    for index in 1..<fds.count where fds[index].revents != 0 { due.append((owners[index], true)) }
                }
                if ready == 0 { continue }
            }
            for (id, readable) in due {
                // Cancelled meanwhile: it is not there, and is not fired.
                if let wait = state.withLock({ $0.waits.removeValue(forKey: id) }) { wait.fire(readable) }
            }
        }
    }

    // MARK: - Wake-up pipes (the watcher's own, and its users')

    /// A non-blocking, close-on-exec pipe, or `(-1, -1)`.
    package static func makePipe() -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return (-1, -1) }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        return (fds[0], fds[1])
    }

    /// Writes a byte to a pipe made by ``makePipe()``.
    package static func signal(_ fd: Int32) {
        var byte: UInt8 = 1
        _ = write(fd, &byte, 1)   // a full pipe is signalled already
    }

    /// Empties a pipe made by ``makePipe()``; returns whether it had been signalled.
    @discardableResult
    package static func drain(_ fd: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 256)
        var signalled = false
        while buffer.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }) > 0 { signalled = true }
        return signalled
    }
}
