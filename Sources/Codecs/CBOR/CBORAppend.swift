/// Appends CBOR items to a byte array, each head in its shortest form (RFC 8949's preferred
/// serialization, as ``CBOREncoder`` writes them): for codecs that write a known shape directly
/// and must give the bytes ``CBOREncoder`` gives.
package enum CBORAppend {
    package static func head(_ major: UInt8, _ argument: UInt64, to bytes: inout [UInt8]) {
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

    /// An integer: major type 0, or 1 for a negative one.
    package static func integer(_ value: Int64, to bytes: inout [UInt8]) {
        value >= 0 ? head(0, UInt64(value), to: &bytes) : head(1, UInt64(~value), to: &bytes)
    }

    package static func text(_ text: String, to bytes: inout [UInt8]) {
        head(3, UInt64(text.utf8.count), to: &bytes)
        bytes += text.utf8
    }

    /// A float64, as ``CBOREncoder`` writes every `Double`.
    package static func float64(_ value: Double, to bytes: inout [UInt8]) {
        bytes.append(0xFB)
        withUnsafeBytes(of: value.bitPattern.bigEndian) { bytes += $0 }
    }
}
