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
        Self.text("version", into: &bytes)
        if value.version >= 0 {
            Self.head(0, UInt64(value.version), into: &bytes)
        } else {
            Self.head(1, UInt64(~value.version), into: &bytes)
        }
        Self.text("clock", into: &bytes)
        Self.head(0, value.clock, into: &bytes)
        Self.text("device", into: &bytes)
        Self.text(value.device, into: &bytes)
        return bytes
    }

    func decode(_ bytes: UnsafeRawBufferPointer) throws -> KeyVersion { try cbor.decode(bytes) }

    /// A head in its shortest form (RFC 8949's preferred serialization).
    static func head(_ major: UInt8, _ argument: UInt64, into bytes: inout [UInt8]) {
        let type = major << 5
        switch argument {
        case 0..<24:
            bytes.append(type | UInt8(argument))
        case 24...0xFF:
            bytes.append(type | 24)
            bytes.append(UInt8(argument))
        case 0x100...0xFFFF:
            bytes.append(type | 25)
            withUnsafeBytes(of: UInt16(argument).bigEndian) { bytes += $0 }
        case 0x1_0000...0xFFFF_FFFF:
            bytes.append(type | 26)
            withUnsafeBytes(of: UInt32(argument).bigEndian) { bytes += $0 }
        default:
            bytes.append(type | 27)
            withUnsafeBytes(of: argument.bigEndian) { bytes += $0 }
        }
    }

    static func text(_ text: String, into bytes: inout [UInt8]) {
        head(3, UInt64(text.utf8.count), into: &bytes)
        bytes += text.utf8
    }
}
#endif
