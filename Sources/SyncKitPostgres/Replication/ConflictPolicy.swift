#if PostgreSQL
import KVStore
import SyncKit

/// How a replicated collection settles two writes of one key that did not see each other.
///
/// Whatever the policy, every resolution is reported as a ``ConflictEvent``.
public struct ConflictPolicy<Value>: Sendable {
    enum Kind: Sendable {
        case lastWriterWins
        case rejectAndReport
        case merge(@Sendable (_ local: Value, _ remote: Value) throws -> Value)
    }
    let kind: Kind

    /// The write with the later hybrid logical clock wins; equal clocks are ordered by device id, so
    /// every device picks the same winner. The default.
    public static var lastWriterWins: Self { Self(kind: .lastWriterWins) }

    /// The write that reached the server first wins; the other device's write is dropped there and
    /// reported to it (``ConflictEvent/Resolution-swift.enum/rejectedLocal``).
    public static var rejectAndReport: Self { Self(kind: .rejectAndReport) }

    /// `merge(local, remote)` gives the value both devices end with (it must not depend on which
    /// side is local: both devices may compute it). When one side deleted the key, there is nothing to
    /// merge and last-writer-wins decides.
    public static func merge(_ merge: @escaping @Sendable (_ local: Value, _ remote: Value) throws -> Value) -> Self {
        Self(kind: .merge(merge))
    }
}
#endif
