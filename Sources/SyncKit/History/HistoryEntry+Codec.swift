#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import Codecs
import KVStore

extension HistoryEntry {
    /// The codec of history's entries: the same CBOR as ``CBORCodec`` writes and reads (the catalog
    /// records `cbor`), written directly (``encodedDirectly()``, the bytes `Codable` writes: every write
    /// to a collection with history writes an entry per change) and read by a decoder written for this
    /// shape first.
    ///
    /// A replicator reads every pending entry before its first batch leaves; through `Codable`, 50,000
    /// entries took about 150 ms of the 210 ms before that batch. ``decodedDirectly(from:)`` reads the
    /// map this library writes and nothing else: any other form (keys in other encodings, an unknown
    /// key, a tag or a float where an integer was written, text that is not UTF-8…) gives `nil`, and
    /// `Codable` decides, with its errors. So the direct decoder never answers differently from
    /// `Codable`; it only answers first (the differential tests feed both the same bytes).
    static let codec = DirectCBORCodec<HistoryEntry>(encode: { $0.encodedDirectly() }, decode: { decodedDirectly(from: $0) })
}

extension HistoryEntry {
    /// The bytes ``CBOREncoder`` writes for this entry, written without `Codable`: a map of the fields
    /// in their declaration order, `nil` ones left out, the key as an array of integers, the timestamp
    /// as ``CBOREncoder`` writes a `Date`. `nil` for an entry outside the usual sizes (left to the
    /// general encoder and its limits).
    func encodedDirectly() -> [UInt8]? {
        let textBytes = (author?.utf8.count ?? 0) + kind.utf8.count + name.utf8.count
        guard textBytes <= 4096, key.count <= 4096 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(120 + textBytes + 2 * key.count)
        CBORAppend.head(5, UInt64(7 + (author == nil ? 0 : 1) + (clock == nil ? 0 : 1)), to: &bytes)
        CBORAppend.text("token", to: &bytes)
        CBORAppend.head(0, token.rawValue, to: &bytes)
        CBORAppend.text("transactionID", to: &bytes)
        CBORAppend.integer(Int64(transactionID), to: &bytes)
        if let author {
            CBORAppend.text("author", to: &bytes)
            CBORAppend.text(author, to: &bytes)
        }
        CBORAppend.text("timestamp", to: &bytes)
        let seconds = timestamp.timeIntervalSince1970
        if Date(timeIntervalSince1970: seconds) == timestamp {
            CBORAppend.head(6, CBORTag.epochDate, to: &bytes)
            CBORAppend.float64(seconds, to: &bytes)
        } else {
            CBORAppend.head(6, CBORTag.referenceDate, to: &bytes)
            CBORAppend.float64(timestamp.timeIntervalSinceReferenceDate, to: &bytes)
        }
        CBORAppend.text("kind", to: &bytes)
        CBORAppend.text(kind, to: &bytes)
        CBORAppend.text("name", to: &bytes)
        CBORAppend.text(name, to: &bytes)
        CBORAppend.text("key", to: &bytes)
        CBORAppend.head(4, UInt64(key.count), to: &bytes)
        for byte in key { CBORAppend.head(0, UInt64(byte), to: &bytes) }
        CBORAppend.text("operation", to: &bytes)
        CBORAppend.text(operation.rawValue, to: &bytes)
        if let clock {
            CBORAppend.text("clock", to: &bytes)
            CBORAppend.head(0, clock.rawValue, to: &bytes)
        }
        return bytes
    }

    /// The entry in `bytes` if they hold exactly one CBOR map of ``HistoryEntry``'s fields in the
    /// forms ``CBOREncoder`` writes them; otherwise `nil` (see ``codec``).
    static func decodedDirectly(from bytes: UnsafeRawBufferPointer) -> HistoryEntry? {
        var reader = DirectReader(bytes: bytes)
        guard let fields = reader.head(major: 5) else { return nil }
        var token: UInt64?, transactionID: UInt64?, author: String??, timestamp: Date?
        var kind: String?, name: String?, key: [UInt8]?, operation: Mutation.Operation?, clock: UInt64??
        for _ in 0..<fields {
            guard let field = reader.keyName() else { return nil }
            switch field {
            case .token:
                guard token == nil, let value = reader.head(major: 0) else { return nil }
                token = value
            case .transactionID:
                guard transactionID == nil, let value = reader.head(major: 0), value <= UInt64(Int.max) else { return nil }
                transactionID = value
            case .author:
                guard author == nil else { return nil }
                if reader.null() {
                    author = .some(nil)
                } else {
                    guard let value = reader.text() else { return nil }
                    author = value
                }
            case .timestamp:
                guard timestamp == nil, let value = reader.date() else { return nil }
                timestamp = value
            case .kind:
                guard kind == nil, let value = reader.text() else { return nil }
                kind = value
            case .name:
                guard name == nil, let value = reader.text() else { return nil }
                name = value
            case .key:
                guard key == nil, let value = reader.byteArray() else { return nil }
                key = value
            case .operation:
                guard operation == nil, let text = reader.text(), let value = Mutation.Operation(rawValue: text) else { return nil }
                operation = value
            case .clock:
                guard clock == nil else { return nil }
                if reader.null() {
                    clock = .some(nil)
                } else {
                    guard let value = reader.head(major: 0) else { return nil }
                    clock = value
                }
            }
        }
        guard reader.atEnd, let token, let transactionID, let timestamp, let kind, let name, let key, let operation else {
            return nil
        }
        var entry = HistoryEntry(token: ChangeToken(rawValue: token), transactionID: Int(transactionID), author: author ?? nil,
                                 timestamp: timestamp, target: .collection(name), key: key, operation: operation,
                                 clock: (clock ?? nil).map { HybridTimestamp(rawValue: $0) })
        entry.kind = kind
        return entry
    }

    /// The map keys `Codable` gives ``HistoryEntry``'s stored properties.
    private enum Field {
        case token, transactionID, author, timestamp, kind, name, key, operation, clock
    }

    /// A bounds-checked cursor over one CBOR item; every read gives `nil` on any form it does not take.
    private struct DirectReader {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        var atEnd: Bool { offset == bytes.count }

        /// The argument of a head of `major` type with a definite argument (no indefinite lengths).
        mutating func head(major: UInt8) -> UInt64? {
            guard offset < bytes.count else { return nil }
            let initial = bytes[offset]
            guard initial >> 5 == major else { return nil }
            let info = initial & 0x1F
            if info < 24 {
                offset += 1
                return UInt64(info)
            }
            guard let size = CBORHead.argumentSize(info), bytes.count - offset - 1 >= size else { return nil }
            var value: UInt64 = 0
            for index in 1...size { value = value << 8 | UInt64(bytes[offset + index]) }
            offset += 1 + size
            return value
        }

        mutating func null() -> Bool {
            guard offset < bytes.count, bytes[offset] == 0xF6 else { return false }
            offset += 1
            return true
        }

        /// The bytes of a definite-length text string.
        mutating func textBytes() -> UnsafeRawBufferPointer? {
            guard let length = head(major: 3), length <= UInt64(bytes.count - offset) else { return nil }
            let start = offset
            offset += Int(length)
            return UnsafeRawBufferPointer(rebasing: bytes[start..<offset])
        }

        mutating func text() -> String? {
            guard let utf8 = textBytes() else { return nil }
            // Checked once and copied (``CBORReader/string(_:)``): `String(validating:as:)` is not
            // specialized, and instantiated its generic types at each call, three times an entry.
            return CBORReader.string(utf8)
        }

        mutating func keyName() -> Field? {
            guard let utf8 = textBytes() else { return nil }
            func matches(_ name: StaticString) -> Bool {
                name.utf8CodeUnitCount == utf8.count && memcmp(name.utf8Start, utf8.baseAddress!, utf8.count) == 0
            }
            switch utf8.count {
            case 3 where matches("key"): return .key
            case 4 where matches("kind"): return .kind
            case 4 where matches("name"): return .name
            case 5 where matches("token"): return .token
            case 5 where matches("clock"): return .clock
            case 6 where matches("author"): return .author
            case 9 where matches("timestamp"): return .timestamp
            case 9 where matches("operation"): return .operation
            case 13 where matches("transactionID"): return .transactionID
            default: return nil
            }
        }

        /// An array of integers 0...255 (how `[UInt8]` is written).
        mutating func byteArray() -> [UInt8]? {
            guard let count = head(major: 4), count <= UInt64(bytes.count - offset) else { return nil }
            var result = [UInt8]()
            result.reserveCapacity(Int(count))
            for _ in 0..<count {
                guard let value = head(major: 0), value <= 255 else { return nil }
                result.append(UInt8(value))
            }
            return result
        }

        /// Tag 1 or ``CBORTag/referenceDate`` on a float64, as ``CBOREncoder`` writes a `Date`.
        mutating func date() -> Date? {
            guard let tag = head(major: 6), tag == CBORTag.epochDate || tag == CBORTag.referenceDate,
                  offset < bytes.count, bytes[offset] == 0xFB, bytes.count - offset >= 9 else { return nil }
            var bits: UInt64 = 0
            for index in 1...8 { bits = bits << 8 | UInt64(bytes[offset + index]) }
            offset += 9
            let seconds = Double(bitPattern: bits)
            return tag == CBORTag.epochDate ? Date(timeIntervalSince1970: seconds) : Date(timeIntervalSinceReferenceDate: seconds)
        }
    }
}
