#if PostgreSQL
import KVStore

/// Why a file's transfer between this device and the server stopped (issue 49). Each is one line; a
/// refusal carries the server's limit. The file stays where it was (waiting to upload, or missing), so
/// the next round tries again; nothing is retried in a loop within one.
public enum FileTransferError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The server takes no file over `limit` bytes (`too_large`).
    case tooLarge(path: String, size: Int64, limit: Int64)
    /// The group's files on the server would go over `limit` bytes (`quota_exceeded`).
    case quotaExceeded(path: String, limit: Int64)
    /// The server has an upload of these bytes with another size: its hash and size disagree.
    case sizeMismatch(path: String, size: Int64, serverSize: Int64)
    /// The copy this device keeps (`Blobs/`) does not hash to what the manifest names: it changed (a
    /// co-tenant wrote into it), so it is not sent.
    case localBytesDiffer(path: String)
    /// The server refused the whole as not hashing to its name twice, the second time after this
    /// device read and checked its bytes again.
    case hashMismatch(path: String)
    /// The server's chunk limit is under the one this device sends (`chunk_too_large`).
    case chunkTooLarge(path: String, limit: Int64)
    /// The server went back and forth on where the upload stands more often than the file has chunks.
    case noProgress(path: String, offset: Int64)
    /// The server has no complete copy of these bytes that this group's manifest names.
    case notOnServer(path: String, sha256: String)
    /// What the server sent did not hash to the manifest's name, or was not its size: nothing of it was kept.
    case downloadMismatch(path: String, reason: String)
    /// This device has no copy of the bytes to upload.
    case notHere(path: String)

    public var description: String {
        switch self {
        case .tooLarge(let path, let size, let limit):
            "Files/\(path) (\(size) bytes) is over the server's limit of \(limit) bytes per file (too_large); it waits to upload"
        case .quotaExceeded(let path, let limit):
            "Files/\(path) would take the group's files on the server over its quota of \(limit) bytes (quota_exceeded); it waits to upload"
        case .sizeMismatch(let path, let size, let serverSize):
            "Files/\(path): the server has an upload of the same hash with \(serverSize) bytes, not \(size)"
        case .localBytesDiffer(let path):
            "Files/\(path): this device's copy no longer hashes to what the manifest names; it is not sent"
        case .hashMismatch(let path):
            "Files/\(path): the server refused the upload twice as not hashing to its name (hash_mismatch)"
        case .chunkTooLarge(let path, let limit):
            "Files/\(path): the server takes chunks of \(limit) bytes at most (chunk_too_large)"
        case .noProgress(let path, let offset):
            "Files/\(path): the server kept moving the upload's offset (last \(offset)); stopped for this round"
        case .notOnServer(let path, let sha256):
            "Files/\(path): the server has no complete copy of \(sha256.prefix(12))… that this group's manifest names"
        case .downloadMismatch(let path, let reason):
            "Files/\(path): the download was refused (\(reason)); nothing of it was kept"
        case .notHere(let path):
            "Files/\(path): this device has no copy of the bytes its manifest row names"
        }
    }
}
#endif
