#if PostgreSQL
import KVStore

/// What a replicator knows of one key: the server version it last saw (the base of its next change).
struct KeyVersion: Codable, Hashable, Sendable {
    var version: Int64
    var clock: UInt64
    var device: String
}

extension KeyVersion {
    /// The codec of the replicator's per-key versions (`_sync.versions.*`): the bytes ``CBOREncoder``
    /// writes for a ``KeyVersion``, written directly, and read by ``CBORCodec``.
    ///
    /// A push records one version per change it sent; through `Codable`, encoding them was most of the
    /// device's work while its batches were in flight (dynamic casts and conformance lookups per
    /// field). The bytes are the same (a test compares them over many values), so the catalog's `cbor`,
    /// other readers and older builds are unaffected.
    static let codec = DirectCBORCodec<KeyVersion>(encode: { $0.encodedDirectly() })

    /// ``CBOREncoder``'s bytes for this version; `nil` for a device id longer than any is (left to the
    /// general encoder and its limits).
    func encodedDirectly() -> [UInt8]? {
        guard device.utf8.count <= 4096 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(40 + device.utf8.count)
        bytes.append(0xA3)   // a map of 3
        CBORAppend.text("version", to: &bytes)
        CBORAppend.integer(version, to: &bytes)
        CBORAppend.text("clock", to: &bytes)
        CBORAppend.head(0, clock, to: &bytes)
        CBORAppend.text("device", to: &bytes)
        CBORAppend.text(device, to: &bytes)
        return bytes
    }
}
#endif
