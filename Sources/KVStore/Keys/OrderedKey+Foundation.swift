#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Codecs

extension String: OrderedKey {
    public static var keyEncoding: KeyEncoding { .string }

    public func encodeKey(into bytes: inout [UInt8], terminal: Bool) {
        // ASCII is already in normalisation form C; anything else is normalised so that strings that
        // Swift considers equal (precomposed and decomposed "é") share one key. `_nfcCodeUnits` is the
        // standard library's own NFC, the one its `==` and `<` compare, so the key order is Swift's.
        let ascii = utf8.withContiguousStorageIfAvailable { CBORReader.isASCII(UnsafeRawBufferPointer($0)) }
            ?? utf8.allSatisfy { $0 < 0x80 }
        if ascii {
            bytes.appendVariable(utf8, terminal: terminal)
        } else {
            bytes.appendVariable(_nfcCodeUnits, terminal: terminal)
        }
    }

    public static func decodeKey(from reader: inout KeyReader, terminal: Bool) throws(KeyDecodingError) -> String {
        let raw = try reader.readVariable(terminal: terminal)
        // ``CBORReader/string(_:)``: `String(validating:as:)` instantiates its generic types at each call.
        guard let string = raw.withUnsafeBytes({ CBORReader.string($0) }) else {
            throw KeyDecodingError("key is not valid UTF-8")
        }
        return string
    }
}

extension UUID: OrderedKey {
    public static var keyEncoding: KeyEncoding { .uuid }

    public func encodeKey(into bytes: inout [UInt8], terminal: Bool) {
        withUnsafeBytes(of: uuid) { bytes.append(contentsOf: $0) }
    }

    public static func decodeKey(from reader: inout KeyReader, terminal: Bool) throws(KeyDecodingError) -> UUID {
        let raw = try reader.readBytes(16)
        var value = UUID().uuid
        withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: raw) }
        return UUID(uuid: value)
    }
}

extension Date: OrderedKey {
    public static var keyEncoding: KeyEncoding { .date }

    /// The bits of `timeIntervalSinceReferenceDate` (Date's own representation, so the round trip is
    /// exact), with the sign bit flipped for positives and all bits flipped for negatives. `-0.0` is
    /// written as `0.0`: the two dates are `==`, so they must be one key.
    public func encodeKey(into bytes: inout [UInt8], terminal: Bool) {
        let seconds = timeIntervalSinceReferenceDate
        let bits = (seconds == 0 ? 0 : seconds).bitPattern
        let ordered = bits & (1 << 63) == 0 ? bits ^ (1 << 63) : ~bits
        bytes.appendBigEndian(ordered, count: 8)
    }

    public static func decodeKey(from reader: inout KeyReader, terminal: Bool) throws(KeyDecodingError) -> Date {
        let ordered = try reader.readBigEndian(8)
        let bits = ordered & (1 << 63) != 0 ? ordered ^ (1 << 63) : ~ordered
        return Date(timeIntervalSinceReferenceDate: Double(bitPattern: bits))
    }
}

/// Raw bytes as a key, ordered lexicographically (as LMDB orders them).
public struct ByteKey: OrderedKey, Hashable, CustomStringConvertible {
    public var bytes: [UInt8]
    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public static var keyEncoding: KeyEncoding { .bytes }

    public static func < (lhs: ByteKey, rhs: ByteKey) -> Bool {
        lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
    }

    public func encodeKey(into bytes: inout [UInt8], terminal: Bool) {
        bytes.appendVariable(self.bytes, terminal: terminal)
    }

    public static func decodeKey(from reader: inout KeyReader, terminal: Bool) throws(KeyDecodingError) -> ByteKey {
        ByteKey(try reader.readVariable(terminal: terminal))
    }

    public var description: String { Hex.encode(bytes) }
}
