/// Lower-case hexadecimal: the one hex encoder and decoder of this package's targets (KVStore,
/// SyncKit, Workloads, kvtool), for keys in messages, `mdb_dump` data lines, digests and dumps.
///
/// ```swift
/// Hex.encode([0x01, 0xAB])           // "01ab"
/// Hex.decode(Array("01AB".utf8))     // [0x01, 0xAB]
/// ```
package enum Hex {
    /// The digits, `0`–`9` then `a`–`f`.
    @usableFromInline
    static let digits: StaticString = "0123456789abcdef"

    /// `bytes` as lower-case hex, two digits per byte, without a prefix.
    @inlinable
    package static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        encode(bytes, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the lower-case hex digits of `bytes` (two per byte) to `out`.
    @inlinable
    package static func encode(_ bytes: some Sequence<UInt8>, into out: inout [UInt8]) {
        digits.withUTF8Buffer { digits in
            for byte in bytes {
                out.append(digits[Int(byte >> 4)])
                out.append(digits[Int(byte & 0x0F)])
            }
        }
    }

    /// The value of one hex digit (either case), or `nil` for any other byte.
    @inlinable
    package static func value(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Decodes hex digits (either case, no prefix); `nil` for an odd count or a byte that is not a
    /// digit.
    package static func decode(_ digits: some Collection<UInt8>) -> [UInt8]? {
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var high: UInt8?
        for digit in digits {
            guard let v = value(digit) else { return nil }
            if let h = high {
                out.append(h << 4 | v)
                high = nil
            } else {
                high = v
            }
        }
        return out
    }
}
