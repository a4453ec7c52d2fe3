#if PostgreSQL
import KVStore

/// The codec of the replicator's per-key versions (`_sync.versions.*`): the bytes ``CBOREncoder``
/// writes for a ``KeyVersion``, written directly, and read by ``CBORCodec``.
///
/// A push records one version per change it sent; through `Codable`, encoding them was most of the
/// device's work while its batches were in flight (dynamic casts and conformance lookups per field).
/// The bytes are the same (a test compares them over many values), so the catalog's `cbor`, other
/// readers and older builds are unaffected.
struct KeyVersionCodec: ValueCodec {
    let cbor = CBORCodec<KeyVersion>()

    var encodingName: String { cbor.encodingName }
    var maxEncodedSize: Int? { cbor.maxEncodedSize }
    var keepsUnknownFields: Bool { cbor.keepsUnknownFields }

    func keepingUnknownFields(of old: UnsafeRawBufferPointer, in new: [UInt8]) -> [UInt8]? {
        cbor.keepingUnknownFields(of: old, in: new)
    }

    func encode(_ value: KeyVersion) throws -> [UInt8] {
        // Longer than a device id ever is: leave it to the general encoder (and its limits).
        guard value.device.utf8.count <= 4096 else { return try cbor.encode(value) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(40 + value.device.utf8.count)
        bytes.append(0xA3)   // a map of 3
        CBORAppend.text("version", to: &bytes)
        CBORAppend.integer(value.version, to: &bytes)
        CBORAppend.text("clock", to: &bytes)
        CBORAppend.head(0, value.clock, to: &bytes)
        CBORAppend.text("device", to: &bytes)
        CBORAppend.text(value.device, to: &bytes)
        return bytes
    }

    func decode(_ bytes: UnsafeRawBufferPointer) throws -> KeyVersion { try cbor.decode(bytes) }
}
#endif
