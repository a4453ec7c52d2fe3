import KVStore

/// An error of the snapshot machinery itself. System-call failures are
/// ``KVStoreError/io(operation:path:errno:)``, and LMDB's are ``LMDBError``.
///
/// Each ``description`` is one line naming the problem and the file or value concerned.
public enum SnapshotError: Error, Hashable, Sendable, CustomStringConvertible {
    /// `manifest.json` is not a valid manifest. Nothing was changed.
    case corruptManifest(path: String, reason: String)
    /// `manifest.json` was written by a newer format than this code reads.
    case unsupportedManifestVersion(path: String, version: Int, supported: Int)
    /// No snapshot of that generation is listed in the manifest.
    case generationNotFound(Int)
    /// A generation given as text (a command-line argument) is not a positive integer.
    case invalidGeneration(String)
    /// No snapshot has been exported yet (or all were pruned).
    case noSnapshots(directory: String)
    /// ``Snapshots/prune(keep:)`` was asked to keep a negative number of snapshots.
    case invalidKeepCount(Int)
    /// A freshly written snapshot did not read back as written (size or checksum); it was not
    /// published.
    case readBackMismatch(path: String, detail: String)

    public var description: String {
        switch self {
        case .corruptManifest(let path, let reason):
            "corrupt snapshot manifest \(path): \(reason)"
        case .unsupportedManifestVersion(let path, let version, let supported):
            "snapshot manifest \(path) has format version \(version); this program reads up to \(supported)"
        case .generationNotFound(let generation):
            "no snapshot of generation \(generation) in the manifest"
        case .invalidGeneration(let text):
            "invalid snapshot generation \(KVStoreError.quote(text)): expected a positive integer"
        case .noSnapshots(let directory):
            "no snapshot has been exported to \(directory)"
        case .invalidKeepCount(let count):
            "cannot keep \(count) snapshots: the count must be 0 or more"
        case .readBackMismatch(let path, let detail):
            "snapshot \(path) did not read back as written: \(detail)"
        }
    }
}
