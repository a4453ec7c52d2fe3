import KVStore

/// Files that travel with the container (issue 49): the vocabulary the device, the server's SQL and
/// the sync gateway share for content-addressed blobs. A blob is the bytes of one file of a group,
/// named by their SHA-256; the manifest (``BlobWire/manifestCollection``) says which path holds which.
///
/// Transfers go in chunks of at most ``chunkBytes`` at an offset, so that an upload cut by a `kill -9`
/// or a dropped network goes on from where the server has it. The server hashes the whole blob again
/// when the last byte arrives and refuses a mismatch: nothing half-written is ever served.
package enum BlobWire {
    /// The largest chunk one `PUT` (or one direct statement) carries: 1 MiB.
    package static let chunkBytes = 1 << 20
    /// A file's largest size, unless the server says otherwise: 64 MiB.
    package static let defaultMaxFileBytes: Int64 = 64 << 20
    /// The most bytes of blobs one group may hold on the server, unless it says otherwise: 1 GiB.
    package static let defaultMaxGroupBytes: Int64 = 1 << 30
    /// The internal collection that holds the manifest: key the path relative to `Files/`, value a
    /// `FileManifestEntry` (a CBOR map whose `sha256` entry is a 32-byte string, `size` an unsigned
    /// integer), a delete its tombstone.
    package static let manifestCollection = FileManifestEntry.collectionName
}

/// A blob's name: the 32 bytes of its SHA-256. In a path or a header it is 64 lower-case hex digits.
package struct BlobHash: Hashable, Sendable, CustomStringConvertible {
    package static let byteCount = 32
    package let bytes: [UInt8]

    /// `nil` unless `bytes` are exactly 32.
    package init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
    }

    /// Reads 64 lower-case hex digits (a path segment or a header); anything else is refused with a
    /// line that says what is wrong.
    package init(hex: some StringProtocol) throws(GatewayWireError) {
        let digits = Array(hex.utf8)
        guard digits.count == Self.byteCount * 2 else {
            throw GatewayWireError(description: "a blob hash is 64 lower-case hex digits (a SHA-256), not \(digits.count) characters")
        }
        guard digits.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }), let bytes = Hex.decode(digits) else {
            throw GatewayWireError(description: "a blob hash is 64 lower-case hex digits (a SHA-256): it has another character")
        }
        self.bytes = bytes
    }

    /// 64 lower-case hex digits.
    package var hex: String { Hex.encode(bytes) }
    package var description: String { hex }
}

/// Where the server's copy of a blob stands.
package struct BlobStatus: Hashable, Sendable {
    /// The blob's whole size, as its upload declared it.
    package var size: Int64
    /// How many bytes from its start the server holds: where an upload goes on.
    package var received: Int64
    /// Whether every byte is in and hashed to its name: only then is it served.
    package var complete: Bool

    package init(size: Int64, received: Int64, complete: Bool) {
        (self.size, self.received, self.complete) = (size, received, complete)
    }
}

/// What the server did with one chunk of an upload.
package enum BlobPutOutcome: Hashable, Sendable {
    /// The chunk is in; the server now holds `received` bytes. When `received` is the size, the whole
    /// blob hashed to its name and is complete.
    case accepted(received: Int64)
    /// The blob was already complete: nothing was written.
    case complete
    /// The upload is at `received`, not at the chunk's offset: send from there.
    case offsetMismatch(received: Int64)
    /// An upload of this hash with another size (`size`) is under way (or complete).
    case sizeMismatch(size: Int64)
    /// The file is over the largest size the server takes (`limit` bytes).
    case tooLarge(limit: Int64)
    /// The group's blobs would go over its quota (`limit` bytes).
    case quotaExceeded(limit: Int64)
    /// The chunk is over ``BlobWire/chunkBytes`` (`limit`).
    case chunkTooLarge(limit: Int64)
    /// The last byte arrived, and the whole did not hash to the blob's name: the upload was dropped
    /// (nothing of it is served), and starts again from 0.
    case hashMismatch

    /// The outcome's name, as the server's SQL answers it and a gateway's refusal carries it.
    package var name: String {
        switch self {
        case .accepted: "accepted"
        case .complete: "complete"
        case .offsetMismatch: "offset_mismatch"
        case .sizeMismatch: "size_mismatch"
        case .tooLarge: "too_large"
        case .quotaExceeded: "quota_exceeded"
        case .chunkTooLarge: "chunk_too_large"
        case .hashMismatch: "hash_mismatch"
        }
    }

    /// The outcome `name` with its figure (`received`, `size` or `limit` as the name needs); `nil` for a
    /// name this version does not know.
    package init?(name: String, figure: Int64) {
        switch name {
        case "accepted": self = .accepted(received: figure)
        case "complete": self = .complete
        case "offset_mismatch": self = .offsetMismatch(received: figure)
        case "size_mismatch": self = .sizeMismatch(size: figure)
        case "too_large": self = .tooLarge(limit: figure)
        case "quota_exceeded": self = .quotaExceeded(limit: figure)
        case "chunk_too_large": self = .chunkTooLarge(limit: figure)
        case "hash_mismatch": self = .hashMismatch
        default: return nil
        }
    }

    /// The figure that goes with ``name`` (0 when it has none).
    package var figure: Int64 {
        switch self {
        case .accepted(let received), .offsetMismatch(let received): received
        case .sizeMismatch(let size): size
        case .tooLarge(let limit), .quotaExceeded(let limit), .chunkTooLarge(let limit): limit
        case .complete, .hashMismatch: 0
        }
    }
}
