import Foundation
import KVStore

/// The CBOR reading the floors need, each item checked as it is read: definite-length heads, text as
/// UTF-8, nothing past the end of the buffer. Throws ``FloorError`` on anything else.
struct FloorReader {
    private let bytes: UnsafeRawBufferPointer
    private(set) var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var remaining: Int { bytes.count - offset }

    /// Throws unless every byte has been read.
    func finish() throws {
        guard offset == bytes.count else { throw FloorError(reason: "bytes after the item", offset: offset) }
    }

    @inline(__always)
    private mutating func byte() throws -> UInt8 {
        guard offset < bytes.count else { throw FloorError(reason: "truncated", offset: offset) }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// `count` bytes, big-endian, as an integer.
    @inline(__always)
    private mutating func bigEndian(_ count: Int) throws -> UInt64 {
        guard remaining >= count else { throw FloorError(reason: "truncated", offset: offset) }
        var value: UInt64 = 0
        for i in offset ..< offset + count { value = value << 8 | UInt64(bytes[i]) }
        offset += count
        return value
    }

    /// A head of major type `major` (any width), its argument.
    @inline(__always)
    mutating func head(_ major: UInt8) throws -> UInt64 {
        let initial = try byte()
        guard initial >> 5 == major else { throw FloorError(reason: "unexpected major type", offset: offset - 1) }
        let info = initial & 0x1F
        switch info {
        case 0..<24: return UInt64(info)
        case 24: return try bigEndian(1)
        case 25: return try bigEndian(2)
        case 26: return try bigEndian(4)
        case 27: return try bigEndian(8)
        default: throw FloorError(reason: "indefinite length or reserved additional information", offset: offset - 1)
        }
    }

    /// A definite-length map's entry count (each entry takes at least two bytes, so a count the input
    /// cannot hold is refused before anything is reserved for it).
    mutating func mapCount() throws -> Int {
        let count = try head(5)
        guard count <= UInt64(remaining / 2) else { throw FloorError(reason: "map count past the end", offset: offset) }
        return Int(count)
    }

    /// A text string's bytes, not yet checked as UTF-8 (valid as long as the buffer is).
    @inline(__always)
    mutating func textBytes() throws -> UnsafeRawBufferPointer {
        let count = try head(3)
        guard count <= UInt64(remaining) else { throw FloorError(reason: "text past the end", offset: offset) }
        let start = offset
        offset += Int(count)
        return UnsafeRawBufferPointer(rebasing: bytes[start ..< offset])
    }

    /// A text string, checked as UTF-8: ASCII (map keys, usually) eight bytes at a time, then made with
    /// `String(decoding:)`, which has nothing to repair; anything else with `String(validating:)`
    /// (generic and unspecialised in the standard library: a few hundred instructions a call more).
    @inline(__always)
    mutating func text() throws -> String {
        let start = offset
        let utf8 = try textBytes()
        if Self.isASCII(utf8) { return String(decoding: utf8, as: UTF8.self) }
        guard let string = String(validating: utf8.assumingMemoryBound(to: UInt8.self), as: UTF8.self) else {
            throw FloorError(reason: "text is not UTF-8", offset: start)
        }
        return string
    }

    @inline(__always)
    static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        var i = 0
        var bits: UInt64 = 0
        while i + 8 <= bytes.count {
            bits |= base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            i += 8
        }
        while i < bytes.count {
            bits |= UInt64(base.load(fromByteOffset: i, as: UInt8.self))
            i += 1
        }
        return bits & 0x8080_8080_8080_8080 == 0
    }

    /// An integer (major type 0 or 1) that fits in an `Int`.
    @inline(__always)
    mutating func int() throws -> Int {
        guard offset < bytes.count else { throw FloorError(reason: "truncated", offset: offset) }
        let negative = bytes[offset] >> 5 == 1
        let argument = try head(negative ? 1 : 0)
        guard argument <= UInt64(Int.max) else { throw FloorError(reason: "integer out of range", offset: offset) }
        return negative ? -1 - Int(argument) : Int(argument)
    }

    /// A float64 (0xFB and eight big-endian bytes), the only float CBOREncoder writes.
    @inline(__always)
    mutating func double() throws -> Double {
        guard try byte() == 0xFB else { throw FloorError(reason: "not a float64", offset: offset - 1) }
        return Double(bitPattern: try bigEndian(8))
    }

    /// A `"YYYY-MM-DD"` text string (years 0000 to 9999, a date that exists) as its day, parsed from
    /// the bytes.
    mutating func day() throws -> LogicalDay {
        let start = offset
        let text = try textBytes()
        guard text.count == 10, text[4] == UInt8(ascii: "-"), text[7] == UInt8(ascii: "-") else {
            throw FloorError(reason: "not a YYYY-MM-DD day", offset: start)
        }
        func number(_ from: Int, _ to: Int) throws -> Int {
            var value = 0
            for i in from ..< to {
                let digit = text[i] &- UInt8(ascii: "0")
                guard digit < 10 else { throw FloorError(reason: "not a YYYY-MM-DD day", offset: start) }
                value = value * 10 + Int(digit)
            }
            return value
        }
        guard let day = LogicalDay(year: try number(0, 4), month: try number(5, 7), day: try number(8, 10)) else {
            throw FloorError(reason: "no such day", offset: start)
        }
        return day
    }

    /// Whether `text` is exactly `name`'s bytes.
    @inline(__always)
    static func matches(_ text: UnsafeRawBufferPointer, _ name: StaticString) -> Bool {
        guard text.count == name.utf8CodeUnitCount, let base = text.baseAddress else { return text.isEmpty && name.utf8CodeUnitCount == 0 }
        return memcmp(base, name.utf8Start, text.count) == 0
    }
}
