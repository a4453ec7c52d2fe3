/// What a read of a replicated file can answer besides the errors of ``SharedFiles/read(_:maxSize:)``.
public enum SharedFilesError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The manifest names bytes (`sha256`, 64 hex digits) for `path` that are not on this device yet:
    /// a sync owner fetches them (at once under an eager prefix, when asked under a lazy one). Never a
    /// half file, and never other bytes than those.
    case notYetDownloaded(path: String, sha256: String)
    /// A transactional write or remove on a ``SharedFiles`` that is not a container's `Files/`: only a
    /// container has a store to record the manifest in and a `Blobs/` directory to stage the bytes.
    case notAContainer(directory: String)

    public var description: String {
        switch self {
        case .notYetDownloaded(let path, let sha256):
            "Files/\(path) is not downloaded yet (the manifest names bytes \(sha256.prefix(12))… that are not on this device)"
        case .notAContainer(let directory):
            "\(directory) is not a container's Files/: a write in a transaction needs the container's store and Blobs/ directory"
        }
    }
}
