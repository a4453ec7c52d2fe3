/// The outcome of ``Snapshots/verify()``: what was checked and every problem found.
public struct SnapshotVerification: Hashable, Sendable {
    /// The manifest entries that were checked, oldest first.
    public var checked: [SnapshotEntry]
    /// Every problem, in manifest order, then unlisted files by name. Empty when all is well.
    public var problems: [SnapshotProblem]

    /// Whether every listed snapshot matches the manifest and nothing unlisted lies around.
    public var isValid: Bool { problems.isEmpty }
}
