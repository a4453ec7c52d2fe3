#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One row of the files manifest: what the file at a path relative to `Files/` holds, named by its
/// SHA-256. The manifest is the internal collection ``collectionName`` (key: the path, as
/// ``SharedFiles/validate(_:)`` accepts it); it replicates like any key, and a removed file is its
/// key's tombstone. The bytes stay a file in `Files/`; the server keeps them as a blob of the group.
///
/// Its value is a CBOR map (in RFC 8949's deterministic order) with text keys: `sha256` a byte string
/// of 32 bytes, `size` an unsigned integer, `type` a text string and `modified` an integer. The
/// server's SQL reads `sha256` and `size` from it (in any order, past keys it does not know).
public struct FileManifestEntry: Codable, Hashable, Sendable {
    /// The manifest's collection.
    public static let collectionName = "_files"

    /// The SHA-256 of the file's bytes: 32 bytes.
    public var sha256: Data
    /// The file's size in bytes.
    public var size: Int64
    /// Its media type (`image/png`), or `application/octet-stream` when not known.
    public var type: String
    /// When it was written, in milliseconds since 1970 (the writer's clock: shown, never compared).
    public var modified: Int64

    public init(sha256: Data, size: Int64, type: String = "application/octet-stream", modified: Int64) {
        (self.sha256, self.size, self.type, self.modified) = (sha256, size, type, modified)
    }
}
