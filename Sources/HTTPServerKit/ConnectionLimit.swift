#if PostgreSQL || Serve
import Synchronization

/// At most ``max`` connections served at once, counted without a lock: the sync gateway's
/// (`Limits.maxConnections`) and `kvtool serve`'s. A connection over the limit is still accepted, and
/// its first request answered 503 with ``refusalLine`` before it is closed (a client that is told
/// why tries again later, where one whose connection is reset at once tries again at once).
public final class ConnectionLimit: Sendable {
    /// Connections served at once, at most.
    public let max: Int
    private let counted = Atomic<Int>(0)

    public init(max: Int) { self.max = max }

    /// Counts a connection in; false (nothing counted) when ``max`` are already served.
    public func enter() -> Bool {
        var current = counted.load(ordering: .relaxed)
        while current < max {
            let (exchanged, found) = counted.compareExchange(expected: current, desired: current + 1, ordering: .relaxed)
            if exchanged { return true }
            current = found
        }
        return false
    }

    /// Counts out a connection that ``enter()`` counted in.
    public func leave() {
        counted.subtract(1, ordering: .relaxed)
    }

    /// The connections counted in now.
    public var count: Int { counted.load(ordering: .relaxed) }

    /// The one line a connection over the limit is refused with (503).
    public var refusalLine: String { "too many connections (\(max)); try again" }
}
#endif
