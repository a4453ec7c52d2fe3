/// Base64 (RFC 4648 §4) and base64url (§5), for the places that show or carry bytes as text: CBOR
/// byte strings rendered as JSON (RFC 8949 §6.1), sync tokens, JWTs. No Foundation, one table each.
package enum Base64 {
    static let standardAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    static let urlAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// `bytes` in base64url without padding (RFC 4648 §5; what RFC 8949 §6.1 and JWTs use).
    package static func url(_ bytes: some Collection<UInt8>) -> String { encode(bytes, alphabet: urlAlphabet, padded: false) }

    /// `bytes` in classic base64 with padding (RFC 4648 §4).
    package static func standard(_ bytes: some Collection<UInt8>) -> String { encode(bytes, alphabet: standardAlphabet, padded: true) }

    static func encode(_ bytes: some Collection<UInt8>, alphabet: [UInt8], padded: Bool) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var iterator = bytes.makeIterator()
        while let first = iterator.next() {
            let second = iterator.next(), third = iterator.next()
            let group = UInt32(first) << 16 | UInt32(second ?? 0) << 8 | UInt32(third ?? 0)
            out.append(alphabet[Int(group >> 18 & 63)])
            out.append(alphabet[Int(group >> 12 & 63)])
            if second != nil { out.append(alphabet[Int(group >> 6 & 63)]) } else if padded { out.append(UInt8(ascii: "=")) }
            if third != nil { out.append(alphabet[Int(group & 63)]) } else if padded { out.append(UInt8(ascii: "=")) }
            if third == nil { break }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of base64url text without padding, or `nil` for any other character or a length
    /// no encoding has (4n + 1).
    package static func decodeURL(_ text: some StringProtocol) -> [UInt8]? {
        var values: [UInt8] = []
        values.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): values.append(byte - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): values.append(byte - UInt8(ascii: "a") + 26)
            case UInt8(ascii: "0")...UInt8(ascii: "9"): values.append(byte - UInt8(ascii: "0") + 52)
            case UInt8(ascii: "-"): values.append(62)
            case UInt8(ascii: "_"): values.append(63)
            default: return nil
            }
        }
        guard values.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(values.count * 3 / 4)
        var index = 0
        while index < values.count {
            let chunk = values[index..<min(index + 4, values.count)]
            var group: UInt32 = 0
            for (offset, value) in chunk.enumerated() { group |= UInt32(value) << (18 - 6 * offset) }
            out.append(UInt8(group >> 16 & 0xFF))
            if chunk.count > 2 { out.append(UInt8(group >> 8 & 0xFF)) }
            if chunk.count > 3 { out.append(UInt8(group & 0xFF)) }
            index += 4
        }
        return out
    }
}
