import Foundation
import KVStore

/// Lower-case hex, as `mdb_dump` writes it and `"k"` holds it.
enum DumpHex {
    static func encode(_ bytes: [UInt8]) -> String { DumpError.hex(bytes) }

    static func value(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Decodes hex digits (either case); `nil` for an odd count or a non-digit.
    static func decode<C: Collection<UInt8>>(_ digits: C) -> [UInt8]? {
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
