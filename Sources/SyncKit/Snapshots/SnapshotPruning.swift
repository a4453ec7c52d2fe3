/// What ``Snapshots/prune(keep:)`` removed and kept.
public struct SnapshotPruning: Hashable, Sendable {
    /// The snapshots removed from the manifest and the directory, oldest first.
    public var removed: [SnapshotEntry]
    /// The snapshots still listed, oldest first.
    public var kept: [SnapshotEntry]
    /// Snapshot files no manifest listed (left by crashed exports), removed too.
    public var removedUnlisted: [String]
    /// Orphaned temporary files of crashed exports, removed too.
    public var removedTemporaryFiles: [String]
}
