#if PostgreSQL
import KVStore

/// The wake-ups a pusher sends after its pushes commit (issue 51), at most one per group per
/// ``window``: the first push of a group sends one at once; a push within the window after it marks
/// the group, and one more is sent at the window's end, so the last push is never left unwoken.
///
/// Why after the commit: `kvsync_push` notified inside its transaction up to revision 6, and a
/// transaction that notified takes a lock of the whole cluster while it commits, so the pushes of all
/// groups committed one at a time. A wake-up sent on its own (`SELECT pg_notify`, in autocommit) still
/// takes it, but only once per group per window, and never while a push holds its group's row.
///
/// A wake-up that is lost (the pusher died between the commit and the send, or the send failed) is
/// found by the gateways' poll of their live groups' sequences (`SyncGateway.Options.wakePollInterval`).
package final class WakeUps: Sendable {
    /// How long after a wake-up of a group the next one waits.
    package static let defaultWindow: Duration = .milliseconds(20)

    package let window: Duration
    /// Sends one wake-up of the group (`SELECT pg_notify('kvsync', group)`); errors are its own to
    /// swallow (the poll finds what a lost wake-up did not tell).
    private let send: @Sendable (String) async -> Void
    /// The groups woken within their window, each with whether a push came after its wake-up (then
    /// one more is due at the window's end). Bounded by the groups pushed to in the last window.
    private let recent = Locked<[String: Bool]>([:])

    package init(window: Duration = defaultWindow, send: @escaping @Sendable (String) async -> Void) {
        self.window = window
        self.send = send
    }

    /// After a push of `group` committed: the wake-up now (returns once it is sent), or at the end of
    /// the window of the one sent before.
    package func wake(_ group: String) async {
        let now = recent.withLock { recent -> Bool in
            guard recent[group] == nil else {
                recent[group] = true
                return false
            }
            recent[group] = false
            return true
        }
        guard now else { return }
        await send(group)
        Task { await self.endWindows(of: group) }
    }

    /// At each window's end, the wake-up a push within it is owed, until a window passes without one.
    private func endWindows(of group: String) async {
        while true {
            try? await Task.sleep(for: window)
            let owed = recent.withLock { recent -> Bool in
                guard recent[group] == true else {
                    recent[group] = nil
                    return false
                }
                recent[group] = false
                return true
            }
            guard owed else { return }
            await send(group)
        }
    }

    /// Sends now the wake-ups owed at their window's end (before the connection they go on closes).
    package func flush() async {
        let owed = recent.withLock { recent -> [String] in
            let owed = recent.filter(\.value).map(\.key)
            for group in owed { recent[group] = false }
            return owed
        }
        for group in owed { await send(group) }
    }
}
#endif
