import KVStore

/// An error reading or publishing a widget feed. System-call failures are
/// ``KVStore/KVStoreError/io(operation:path:errno:)``.
///
/// Each ``description`` is one line naming the feed file and the problem.
public enum WidgetFeedError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The feed name is not 1–100 ASCII letters, digits, `.`, `_` or `-` (not starting with `.`).
    case invalidName(String, reason: String)
    /// Nothing has been published under this name yet.
    case notPublished(name: String, path: String)
    /// The file is not a complete, intact feed: too short, wrong magic, a length that disagrees with
    /// the file, or a checksum mismatch. Publishers never leave such a file, so it was damaged or
    /// written by something else.
    case corrupt(path: String, reason: String)
    /// The file was written in a newer format than this code reads.
    case unsupportedVersion(path: String, version: Int, supported: Int)
    /// The file is intact, but its payload does not decode as the requested type.
    case payloadMismatch(path: String, type: String, reason: String)
    /// The payload is larger than the feed's limit.
    case payloadTooLarge(name: String, size: Int, limit: Int)
    /// The feed file is larger than the header plus the payload limit: refused from its size
    /// (`fstat` on the opened file), before anything is read.
    case fileTooLarge(path: String, size: Int, limit: Int)

    public var description: String {
        switch self {
        case .invalidName(let name, let reason):
            "invalid feed name \(KVStoreError.quote(name)): \(reason)"
        case .notPublished(let name, let path):
            "feed '\(name)' has not been published (no \(path))"
        case .corrupt(let path, let reason):
            "corrupt feed \(path): \(reason)"
        case .unsupportedVersion(let path, let version, let supported):
            "feed \(path) has format version \(version); this program reads up to \(supported)"
        case .payloadMismatch(let path, let type, let reason):
            "feed \(path) does not decode as \(type): \(reason.singleLine)"
        case .payloadTooLarge(let name, let size, let limit):
            "payload of feed '\(name)' is \(size) bytes, over the \(limit)-byte limit"
        case .fileTooLarge(let path, let size, let limit):
            "feed \(path) is \(size) bytes, over the \(limit)-byte limit (header and largest payload); not read"
        }
    }
}
