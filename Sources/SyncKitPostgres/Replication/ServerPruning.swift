#if PostgreSQL

/// What a prune of a group's server log did (``Replicator/pruneServerReport(olderThan:)``, `kvtool sync
/// prune`).
public struct ServerPruning: Hashable, Sendable, Codable {
    /// The log's changes removed (older than the age asked for).
    public var changes: Int
    /// The deletions' tombstones removed from the current state with them.
    public var tombstones: Int
    /// The group's horizon after the prune: every change through this sequence number is gone, and a
    /// device whose cursor is behind it resyncs. Never moves back: a prune that removes nothing
    /// leaves it where an earlier one put it (0 when the log was never pruned).
    public var prunedThrough: Int64

    public init(changes: Int, tombstones: Int, prunedThrough: Int64) {
        (self.changes, self.tombstones, self.prunedThrough) = (changes, tombstones, prunedThrough)
    }
}
#endif
