#if PostgreSQL
import KVStore
import NIOCore

/// The connections accepted whose first request's head has not come yet, which the accept loop lets
/// reach at most ``limit`` before it takes the next: 10,000 devices that connect at once are
/// accepted as fast as the gateway reads their requests, not all in the first half second.
///
/// Why: each connection accepted takes memory at once (its channel, its HTTP handlers, the tasks that
/// read it), and frees most of it when its request has been read and its stream queued. Accepted
/// 5,000 at a time (what the event loops did when nothing held them back), those allocations
/// interleave with the streams' long-lived ones, and glibc keeps the freed memory between them: one
/// gateway's peak RSS was 123 – 162 MiB at 10,000 devices, against 77 – 85 MiB with the gate (6 runs
/// each, `kvtool bench gateway --devices 10000 --skip-push`, benchmarks/baseline.md).
///
/// A connection counts for ``window`` at most: one that says nothing is the request deadline's to
/// close (``SyncGateway/Limits/requestTimeout``), and it must not hold the gate shut meanwhile. So
/// clients that connect and stay silent can slow the accepting to ``limit`` connections a
/// ``window`` (theirs and everyone's, in the order they connected), never stop it.
///
/// `Sendable`: its state is under one lock; an ``Entry``'s flag is read and written under that lock only.
final class ConnectionsAwaitingRequest: Sendable {
    /// One connection's place in the count.
    final class Entry: @unchecked Sendable {
        fileprivate let since: NIODeadline
        /// Whether it still counts (under the owner's lock only).
        fileprivate var counted = true
        fileprivate init(since: NIODeadline) { self.since = since }
    }

    let limit: Int
    let window: TimeAmount
    private let state = Locked<(entries: CircularBuffer<Entry>, counted: Int)>((CircularBuffer(), 0))

    init(limit: Int, window: TimeAmount = .seconds(1)) {
        self.limit = max(1, limit)
        self.window = window
    }

    /// Counts a connection just accepted.
    func accepted(now: NIODeadline = .now()) -> Entry {
        let entry = Entry(since: now)
        state.withLock { state in
            state.entries.append(entry)
            state.counted += 1
        }
        return entry
    }

    /// The connection's first request head came (or the connection ended first): it no longer counts.
    func requestArrived(_ entry: Entry) {
        state.withLock { state in
            guard entry.counted else { return }
            entry.counted = false
            state.counted -= 1
        }
    }

    /// Whether the accept loop waits: ``limit`` connections or more, accepted within the last
    /// ``window``, have sent no request head yet. Forgets the entries that no longer count.
    func isFull(now: NIODeadline = .now()) -> Bool {
        state.withLock { state in
            while let first = state.entries.first, !first.counted || first.since + window <= now {
                if first.counted {
                    first.counted = false
                    state.counted -= 1
                }
                state.entries.removeFirst()
            }
            return state.counted >= limit
        }
    }

    /// The connections counted now (for tests).
    var count: Int { state.withLock { $0.counted } }
    /// The entries kept (for tests): those of the last window, and those behind one that still counts.
    var kept: Int { state.withLock { $0.entries.count } }
}
#endif
