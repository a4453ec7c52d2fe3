import KVStore

/// The kinds of integrity problem that SyncKit's checks report (KVStore's own walk knows nothing of
/// history, snapshots or feeds).
extension IntegrityProblem.Kind {
    /// A gap, a duplicate or an inconsistency in SyncKit's history.
    public static let history = Self(rawValue: "history")
    /// A published snapshot whose size or checksum does not match its manifest, or a manifest that
    /// does not parse.
    public static let snapshot = Self(rawValue: "snapshot")
    /// A widget feed file that does not read back intact.
    public static let feed = Self(rawValue: "feed")
}
