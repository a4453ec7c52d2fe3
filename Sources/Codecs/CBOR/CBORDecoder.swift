#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Decodes `Decodable` values from CBOR (RFC 8949), the default value format of KVStore.
///
/// ```swift
/// let note = try CBORDecoder().decode(Note.self, from: bytes)
///
/// // Straight from memory that is valid only during the call (an LMDB page, say):
/// let note = try CBORDecoder().decode(Note.self, from: rawBuffer)
/// ```
///
/// It reads everything ``CBOREncoder`` writes and what other encoders commonly write:
/// indefinite-length strings, arrays and maps; float16, float32 and float64; integer map keys (their
/// decimal text becomes the `CodingKey`); integers where a `Double` or `Float` is expected when the
/// conversion is exact; integral floats where an integer is expected when they fit; bignums (tags
/// 2 and 3) that fit the integer type; null and undefined for `nil`. `Date` accepts tag 1 (integer
/// or float), tag 0 (an RFC 3339 string, as Python's `cbor2` writes by default) and the private tag
/// ``CBORTag/referenceDate``. `Decimal` accepts tag 4, integers and floats; `UUID` tag 37 (or 16 bare
/// bytes, or its text); `URL` tag 32 (or bare text). Other tags are skipped where the Swift type
/// does not ask for one.
///
/// Before decoding, the whole input is checked against ``limits`` and for well-formedness
/// (truncation, reserved values, stray breaks, invalid UTF-8, trailing bytes), without recursion;
/// no input makes decoding trap. Maps are checked for duplicate keys when they are decoded as
/// keyed containers.
public struct CBORDecoder: Sendable {
    /// The size and depth limits that input must respect.
    public var limits: CBORLimits

    /// Values handed to `init(from:)` implementations as `Decoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    /// Creates a decoder.
    ///
    /// - Parameter limits: The size and depth limits that input must respect.
    public init(limits: CBORLimits = .default) {
        self.limits = limits
    }

    /// Decodes a value from bytes that need to stay valid only during the call.
    ///
    /// ```swift
    /// let count = try value.withUnsafeBytes { try CBORDecoder().decode(Int.self, from: $0) }
    /// ```
    ///
    /// - Throws: ``CBORError`` when the input breaks the ``limits``, is not exactly one well-formed
    ///   data item, or does not fit `T` (a wrong type, a missing key, a number out of range, a
    ///   duplicate map key…); `DecodingError`s thrown by `init(from:)` are turned into
    ///   ``CBORError``, other errors pass through unchanged.
    public func decode<T: Decodable>(_ type: T.Type, from bytes: UnsafeRawBufferPointer) throws -> T {
        do {
            let reader = try CBORReader.validated(bytes, limits: limits, checkingText: false)
            let options = CBORDecodingOptions(userInfo: userInfo)
            return try options.decode(T.self, reader, at: 0, path: .root, needsEnd: false).value
        } catch {
            throw Self.convert(error)
        }
    }

    /// Decodes a value from an array of bytes.
    ///
    /// ```swift
    /// let numbers = try CBORDecoder().decode([Int].self, from: [0x82, 0x01, 0x02])   // [1, 2]
    /// ```
    ///
    /// - Throws: ``CBORError``, as the `UnsafeRawBufferPointer` variant does.
    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try bytes.withUnsafeBytes { try decode(type, from: $0) }
    }

    /// Turns a `DecodingError` into a one-line ``CBORError``.
    static func convert(_ error: any Error) -> any Error {
        if let error = error as? CBORError { return error }
        guard let error = error as? DecodingError else { return error }
        let kind: CBORError.Kind
        let context: DecodingError.Context
        switch error {
        case .typeMismatch(_, let c): (kind, context) = (.typeMismatch, c)
        case .valueNotFound(_, let c): (kind, context) = (.valueNotFound, c)
        case .keyNotFound(_, let c): (kind, context) = (.keyNotFound, c)
        case .dataCorrupted(let c): (kind, context) = (.invalidValue, c)
        @unknown default: return CBORError(.invalidValue, "\(error)")
        }
        if let underlying = context.underlyingError as? CBORError { return underlying }
        return CBORError(kind, context.debugDescription, codingPath: CBORCodingPath.render(context.codingPath))
    }
}

extension CBORError {
    /// The `DecodingError` that `Codable` code expects, with this error (and the path) underneath.
    func decodingError(_ type: Any.Type, _ path: [any CodingKey]) -> DecodingError {
        let full = CBORError(kind, reason, offset: offset, codingPath: CBORCodingPath.render(path))
        let context = DecodingError.Context(codingPath: path, debugDescription: full.description, underlyingError: full)
        switch kind {
        case .typeMismatch: return .typeMismatch(type, context)
        case .valueNotFound: return .valueNotFound(type, context)
        default: return .dataCorrupted(context)
        }
    }
}

// MARK: - Decoder

/// A reader over a single null byte, for `superDecoder()` when the key is missing.
nonisolated(unsafe) private let cborNullByte: UnsafeRawPointer = {
    let pointer = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)
    pointer.storeBytes(of: 0xF6, as: UInt8.self)
    return UnsafeRawPointer(pointer)
}()

/// State shared by all decoders of one `decode` call.
final class CBORDecodingOptions {
    let userInfo: [CodingUserInfoKey: Any]
    /// When set, the keyed container of the top-level map (the item at offset 0) records which of its
    /// keys the type asked for (``CBORMapIndex/requested``): what ``CBORUnknownFields`` keeps is the rest.
    var recordsTopLevelKeys = false
    /// The top-level map's index, once a recording decode has opened it as a keyed container.
    var topLevelMap: CBORMapIndex?

    init(userInfo: [CodingUserInfoKey: any Sendable]) {
        self.userInfo = userInfo
    }

    /// Decodes a `T` from the item at `p`. When `needsEnd`, also returns the offset after the item
    /// (otherwise `next` may be `p`).
    func decode<T: Decodable>(_ type: T.Type, _ reader: CBORReader, at p: Int, path: @autoclosure () -> CBORCodingPath,
                              needsEnd: Bool) throws -> (value: T, next: Int) {
        // Primitives reach here through generic code such as `Array.init(from:)`; read them
        // without creating a decoder. `unsafeBitCast` only turns a value into its own type (the
        // type was just compared), which, unlike `as!`, costs no dynamic cast.
        do throws(CBORError) {
            if T.self == String.self { let r = try reader.readString(at: p); return (unsafeBitCast(r.value, to: T.self), r.next) }
            if T.self == Int.self { let r = try reader.readInteger(Int.self, at: p); return (unsafeBitCast(r.value, to: T.self), r.next) }
            if T.self == Double.self { let r = try reader.readDouble(at: p); return (unsafeBitCast(r.value, to: T.self), r.next) }
            if T.self == Bool.self { let r = try reader.readBool(at: p); return (unsafeBitCast(r.value, to: T.self), r.next) }
            if T.self == Int64.self { let r = try reader.readInteger(Int64.self, at: p); return (unsafeBitCast(r.value, to: T.self), r.next) }
            if T.self == UInt64.self { let r = try reader.readInteger(UInt64.self, at: p); return (unsafeBitCast(r.value, to: T.self), r.next) }
            if T.self == Int32.self { let r = try reader.readInteger(Int32.self, at: p); return (unsafeBitCast(r.value, to: T.self), r.next) }
            if T.self == UInt32.self { let r = try reader.readInteger(UInt32.self, at: p); return (unsafeBitCast(r.value, to: T.self), r.next) }
            if T.self == UInt8.self { let r = try reader.readInteger(UInt8.self, at: p); return (unsafeBitCast(r.value, to: T.self), r.next) }
            if T.self == Float.self { let r = try reader.readFloat(at: p); return (unsafeBitCast(r.value, to: T.self), r.next) }
            if T.self == Date.self { let r = try reader.readDate(at: p); return (unsafeBitCast(r.value, to: T.self), r.next) }
            if T.self == Data.self { let r = try reader.readData(at: p); return (unsafeBitCast(r.value, to: T.self), r.next) }
            if T.self == Decimal.self { let r = try reader.readDecimal(at: p); return (unsafeBitCast(r.value, to: T.self), r.next) }
            if T.self == UUID.self { let r = try reader.readUUID(at: p); return (unsafeBitCast(r.value, to: T.self), r.next) }
            if T.self == URL.self { let r = try reader.readURL(at: p); return (unsafeBitCast(r.value, to: T.self), r.next) }
            if T.self == LogicalDay.self { let r = try reader.readDay(at: p); return (unsafeBitCast(r.value, to: T.self), r.next) }
        } catch {
            throw error.decodingError(T.self, path().keys)
        }
        // Arrays of common scalars, without the generic `Array.init(from:)` machinery. On any error
        // fall through to the general path, which reports it with the element's coding path.
        if ObjectIdentifier(T.self) == CBORKnownTypes.intArray, let r = try? reader.readArray(at: p, { q throws(CBORError) in try reader.readInteger(Int.self, at: q) }) {
            return (unsafeBitCast(r.value, to: T.self), r.next)
        }
        if ObjectIdentifier(T.self) == CBORKnownTypes.doubleArray, let r = try? reader.readArray(at: p, reader.readDouble) {
            return (unsafeBitCast(r.value, to: T.self), r.next)
        }
        if ObjectIdentifier(T.self) == CBORKnownTypes.stringArray, let r = try? reader.readArray(at: p, reader.readString) {
            return (unsafeBitCast(r.value, to: T.self), r.next)
        }
        if ObjectIdentifier(T.self) == CBORKnownTypes.byteArray, let r = try? reader.readArray(at: p, { q throws(CBORError) in try reader.readInteger(UInt8.self, at: q) }) {
            return (unsafeBitCast(r.value, to: T.self), r.next)
        }
        if ObjectIdentifier(T.self) == CBORKnownTypes.int64Array, let r = try? reader.readArray(at: p, { q throws(CBORError) in try reader.readInteger(Int64.self, at: q) }) {
            return (unsafeBitCast(r.value, to: T.self), r.next)
        }

        // Dictionaries with string keys, straight from the map: common value types without a
        // generic call per value, any other through the same one-pass loop.
        if ObjectIdentifier(T.self) == CBORKnownTypes.stringIntMap, let r = try decodeStringMap(reader, at: p, path: path(), { q, _ in try reader.readInteger(Int.self, at: q) }) {
            return (unsafeBitCast(r.value, to: T.self), r.next)
        }
        if ObjectIdentifier(T.self) == CBORKnownTypes.stringStringMap, let r = try decodeStringMap(reader, at: p, path: path(), { q, _ in try reader.readString(at: q) }) {
            return (unsafeBitCast(r.value, to: T.self), r.next)
        }
        if ObjectIdentifier(T.self) == CBORKnownTypes.stringDoubleMap, let r = try decodeStringMap(reader, at: p, path: path(), { q, _ in try reader.readDouble(at: q) }) {
            return (unsafeBitCast(r.value, to: T.self), r.next)
        }
        if ObjectIdentifier(T.self) == CBORKnownTypes.stringBoolMap, let r = try decodeStringMap(reader, at: p, path: path(), { q, _ in try reader.readBool(at: q) }) {
            return (unsafeBitCast(r.value, to: T.self), r.next)
        }
        if CBORKnownTypes.isDictionary(T.self), let mapType = T.self as? any CBORDecodableStringMap.Type {
            return try decodeMap(mapType, as: T.self, reader, at: p, path: path(), needsEnd: needsEnd)
        }
        return try decodeWithDecoder(T.self, reader, at: p, path: path(), needsEnd: needsEnd)
    }

    /// Decodes a `T` with `T.init(from:)`.
    ///
    /// Kept apart from ``decode(_:_:at:path:needsEnd:)`` on purpose: a local whose type depends on `T`
    /// (an optional `(value: T, next: Int)`, say) makes every call of that unspecialised function look
    /// up the tuple's and the optional's metadata at entry, about 1,300 instructions a call, whichever
    /// path it then takes.
    private func decodeWithDecoder<T: Decodable>(_ type: T.Type, _ reader: CBORReader, at p: Int, path: CBORCodingPath,
                                                 needsEnd: Bool) throws -> (value: T, next: Int) {
        let decoder = CBORDecoderImpl(reader: reader, offset: p, path: path, options: self)
        let value = try T(from: decoder)
        guard needsEnd else { return (value, p) }
        if let end = decoder.knownEnd { return (value, end) }
        do throws(CBORError) {
            return (value, try reader.skip(p))
        } catch {
            throw error.decodingError(T.self, decoder.codingPath)
        }
    }
}

extension CBORDecodingOptions {
    /// `M.decodeCBORMap`, its result as `T` (which is `M`); `T.init(from:)` where that declines.
    private func decodeMap<M: CBORDecodableStringMap, T: Decodable>(_ mapType: M.Type, as type: T.Type, _ reader: CBORReader,
                                                                     at p: Int, path: CBORCodingPath,
                                                                     needsEnd: Bool) throws -> (value: T, next: Int) {
        if let r = try M.decodeCBORMap(self, reader, at: p, path: path) { return (unsafeBitCast(r.value, to: T.self), r.next) }
        return try decodeWithDecoder(T.self, reader, at: p, path: path, needsEnd: needsEnd)
    }
}

final class CBORDecoderImpl: Decoder, SingleValueDecodingContainer {
    let reader: CBORReader
    let offset: Int
    let path: CBORCodingPath
    let options: CBORDecodingOptions
    /// The offset after the item, once a keyed container has found it.
    var knownEnd: Int?

    init(reader: CBORReader, offset: Int, path: CBORCodingPath, options: CBORDecodingOptions) {
        self.reader = reader
        self.offset = offset
        self.path = path
        self.options = options
    }

    var codingPath: [any CodingKey] { path.keys }
    var userInfo: [CodingUserInfoKey: Any] { options.userInfo }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        let map: CBORMapIndex
        do throws(CBORError) {
            map = try CBORMapIndex(reader: reader, at: offset)
        } catch {
            throw error.decodingError(KeyedDecodingContainer<Key>.self, codingPath)
        }
        if options.recordsTopLevelKeys && offset == 0 && options.topLevelMap == nil {
            map.startRecording()
            options.topLevelMap = map
        }
        knownEnd = map.end
        return KeyedDecodingContainer(CBORKeyedDecoder<Key>(reader: reader, map: map, path: path, options: options))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try CBORUnkeyedDecoder(reader: reader, at: offset, path: path, options: options)
    }

    func singleValueContainer() -> any SingleValueDecodingContainer { self }

    // SingleValueDecodingContainer

    private func read<R>(_ body: (Int) throws(CBORError) -> (value: R, next: Int)) throws -> R {
        do throws(CBORError) {
            return try body(offset).value
        } catch {
            throw error.decodingError(R.self, codingPath)
        }
    }

    func decodeNil() -> Bool { reader.isNil(at: offset) }
    func decode(_ type: Bool.Type) throws -> Bool { try read(reader.readBool) }
    func decode(_ type: String.Type) throws -> String { try read(reader.readString) }
    func decode(_ type: Double.Type) throws -> Double { try read(reader.readDouble) }
    func decode(_ type: Float.Type) throws -> Float { try read(reader.readFloat) }
    func decode(_ type: Int.Type) throws -> Int { try read { p throws(CBORError) in try reader.readInteger(Int.self, at: p) } }
    func decode(_ type: Int8.Type) throws -> Int8 { try read { p throws(CBORError) in try reader.readInteger(Int8.self, at: p) } }
    func decode(_ type: Int16.Type) throws -> Int16 { try read { p throws(CBORError) in try reader.readInteger(Int16.self, at: p) } }
    func decode(_ type: Int32.Type) throws -> Int32 { try read { p throws(CBORError) in try reader.readInteger(Int32.self, at: p) } }
    func decode(_ type: Int64.Type) throws -> Int64 { try read { p throws(CBORError) in try reader.readInteger(Int64.self, at: p) } }
    func decode(_ type: UInt.Type) throws -> UInt { try read { p throws(CBORError) in try reader.readInteger(UInt.self, at: p) } }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try read { p throws(CBORError) in try reader.readInteger(UInt8.self, at: p) } }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try read { p throws(CBORError) in try reader.readInteger(UInt16.self, at: p) } }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try read { p throws(CBORError) in try reader.readInteger(UInt32.self, at: p) } }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try read { p throws(CBORError) in try reader.readInteger(UInt64.self, at: p) } }
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try options.decode(T.self, reader, at: offset, path: path, needsEnd: false).value
    }
}

// MARK: - Keyed container

/// The entries of one map: where each key's bytes and each value are, found in one pass.
final class CBORMapIndex {
    struct Entry {
        /// Offset of the key's head (for error messages).
        var keyHead: Int
        /// Offset of the key's UTF-8 bytes, or an index into `synthesized` when `keyCount` is -1.
        var keyStart: Int
        var keyCount: Int
        /// Offset of the value's head.
        var value: Int
    }

    let start: Int
    /// The offset after the map.
    let end: Int
    private let entries: [Entry]
    /// Keys that are not a definite-length text string in the input: integers and chunked text.
    private let synthesized: [String]
    /// Key → entry, for large maps.
    private let lookup: [String: Int]?
    /// Where the next search starts: fields are usually decoded in the order they were encoded.
    private var hint = 0
    private let base: UnsafeRawPointer
    /// Per entry, whether the decoded type asked for its key; `nil` unless recording.
    private(set) var requested: [Bool]?

    func startRecording() { requested = Array(repeating: false, count: entries.count) }
    func requestedAll() { if requested != nil { requested = Array(repeating: true, count: entries.count) } }

    /// Whether this map has a key that `other` does not, compared as bytes (no string is made).
    func hasKey(notIn other: CBORMapIndex) -> Bool {
        for mine in entries {
            var found = false
            for theirs in other.entries {
                if mine.keyCount >= 0 && theirs.keyCount >= 0 {
                    found = mine.keyCount == theirs.keyCount && memcmp(base + mine.keyStart, other.base + theirs.keyStart, mine.keyCount) == 0
                } else {
                    found = Self.keyString(mine, base: base, synthesized: synthesized)
                        == Self.keyString(theirs, base: other.base, synthesized: other.synthesized)
                }
                if found { break }
            }
            if !found { return true }
        }
        return false
    }

    /// Each entry's key, and where the entry starts (its key's head) and where its value starts.
    var entryOffsets: [(key: String, start: Int, value: Int)] {
        entries.map { (Self.keyString($0, base: base, synthesized: synthesized), $0.keyHead, $0.value) }
    }

    init(reader: CBORReader, at p: Int) throws(CBORError) {
        let (h, q0) = try reader.untagged(at: p)
        guard h.major == 5 else { throw reader.mismatch("a map (keyed container)", h, at: q0) }
        var entries: [Entry] = []
        var synthesized: [String] = []
        var q = h.next

        func addEntry() throws(CBORError) {
            let kh = try reader.head(at: q)
            var entry = Entry(keyHead: q, keyStart: 0, keyCount: -1, value: 0)
            switch kh.major {
            case 3 where !kh.isIndefinite:
                entry.keyCount = try reader.length(kh, at: q)
                entry.keyStart = kh.next
                try reader.checkUTF8(from: kh.next, count: entry.keyCount)
                entry.value = kh.next + entry.keyCount
            case 3:
                let (key, next) = try reader.text(kh, at: q)
                entry.keyStart = synthesized.count
                synthesized.append(key)
                entry.value = next
            case 0, 1:
                entry.keyStart = synthesized.count
                synthesized.append(kh.major == 0 ? String(kh.argument) : CBORReader.negativeString(kh.argument))
                entry.value = kh.next
            default:
                throw CBORError(.typeMismatch, "a keyed container needs text or integer map keys, found \(reader.describe(kh))", offset: q)
            }
            entries.append(entry)
            q = try reader.skip(entry.value)
        }

        if h.isIndefinite {
            while q < reader.end, reader.byte(q) != 0xFF { try addEntry() }
            guard q < reader.end else { throw CBORError(.truncated, "indefinite-length map has no break (0xFF)", offset: q) }
            q += 1
        } else {
            entries.reserveCapacity(Int(min(h.argument, UInt64(reader.end - q) / 2)))
            var i: UInt64 = 0
            while i < h.argument {
                try addEntry()
                i += 1
            }
        }
        self.start = q0
        self.end = q
        self.entries = entries
        self.synthesized = synthesized
        self.base = reader.base

        if entries.count > 16 {
            var lookup: [String: Int] = [:]
            lookup.reserveCapacity(entries.count)
            for i in entries.indices {
                let key = Self.keyString(entries[i], base: reader.base, synthesized: synthesized)
                if lookup.updateValue(i, forKey: key) != nil {
                    throw CBORError(.duplicateKey, "map has the key \"\(key.prefix(64))\" twice", offset: entries[i].keyHead)
                }
            }
            self.lookup = lookup
        } else {
            self.lookup = nil
            for i in entries.indices.dropFirst() {
                for j in 0 ..< i where Self.sameKey(entries[i], entries[j], base: reader.base, synthesized: synthesized) {
                    let key = Self.keyString(entries[i], base: reader.base, synthesized: synthesized)
                    throw CBORError(.duplicateKey, "map has the key \"\(key.prefix(64))\" twice", offset: entries[i].keyHead)
                }
            }
        }
    }

    private static func keyString(_ entry: Entry, base: UnsafeRawPointer, synthesized: [String]) -> String {
        if entry.keyCount < 0 { return synthesized[entry.keyStart] }
        return String(decoding: UnsafeRawBufferPointer(start: base + entry.keyStart, count: entry.keyCount), as: UTF8.self)
    }

    private static func sameKey(_ a: Entry, _ b: Entry, base: UnsafeRawPointer, synthesized: [String]) -> Bool {
        if a.keyCount >= 0 && b.keyCount >= 0 {
            return a.keyCount == b.keyCount && memcmp(base + a.keyStart, base + b.keyStart, a.keyCount) == 0
        }
        return keyString(a, base: base, synthesized: synthesized).utf8
            .elementsEqual(keyString(b, base: base, synthesized: synthesized).utf8)
    }

    var keys: [String] { entries.map { Self.keyString($0, base: base, synthesized: synthesized) } }

    /// The offset of the value for `key`, or nil.
    func find(_ key: String) -> Int? {
        if requested != nil { return recordingFind(key) }
        if let lookup { return lookup[key].map { entries[$0].value } }
        let count = entries.count
        guard count > 0 else { return nil }
        var key = key
        return key.withUTF8 { utf8 -> Int? in
            var i = hint < count ? hint : 0
            for _ in 0 ..< count {
                let entry = entries[i]
                let matches: Bool
                if entry.keyCount >= 0 {
                    if entry.keyCount != utf8.count {
                        matches = false
                    } else if let keyBase = utf8.baseAddress {
                        matches = memcmp(base + entry.keyStart, keyBase, utf8.count) == 0
                    } else {
                        matches = true
                    }
                } else {
                    matches = synthesized[entry.keyStart].utf8.elementsEqual(utf8)
                }
                if matches {
                    hint = i + 1
                    return entry.value
                }
                i = i + 1 == count ? 0 : i + 1
            }
            return nil
        }
    }

    /// `find`, marking the entry found as requested (off the fast path: only a recording decode, one
    /// per write that replaces a map with keys the new value does not have, comes here).
    private func recordingFind(_ key: String) -> Int? {
        for i in entries.indices where Self.keyString(entries[i], base: base, synthesized: synthesized) == key {
            requested?[i] = true
            return entries[i].value
        }
        return nil
    }
}

struct CBORKeyedDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let reader: CBORReader
    let map: CBORMapIndex
    let path: CBORCodingPath
    let options: CBORDecodingOptions

    var codingPath: [any CodingKey] { path.keys }
    var allKeys: [Key] {
        map.requestedAll()   // a type that lists the keys reads them all: none is unknown to it
        return map.keys.compactMap { Key(stringValue: $0) }
    }

    func contains(_ key: Key) -> Bool { map.find(key.stringValue) != nil }

    private func offset(of key: Key) throws -> Int {
        if let p = map.find(key.stringValue) { return p }
        let error = CBORError(.keyNotFound, "no value for key \"\(key.stringValue)\"", offset: map.start,
                              codingPath: CBORCodingPath.render(codingPath))
        throw DecodingError.keyNotFound(key, DecodingError.Context(codingPath: codingPath, debugDescription: error.description, underlyingError: error))
    }

    private func read<R>(_ key: Key, _ body: (Int) throws(CBORError) -> (value: R, next: Int)) throws -> R {
        let p = try offset(of: key)
        do throws(CBORError) {
            return try body(p).value
        } catch {
            throw error.decodingError(R.self, path.appending(key).keys)
        }
    }

    private func readIfPresent<R>(_ key: Key, _ body: (Int) throws(CBORError) -> (value: R, next: Int)) throws -> R? {
        guard let p = map.find(key.stringValue), !reader.isNil(at: p) else { return nil }
        do throws(CBORError) {
            return try body(p).value
        } catch {
            throw error.decodingError(R.self, path.appending(key).keys)
        }
    }

    func decodeNil(forKey key: Key) throws -> Bool { reader.isNil(at: try offset(of: key)) }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try read(key, reader.readBool) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try read(key, reader.readString) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try read(key, reader.readDouble) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try read(key, reader.readFloat) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try read(key) { p throws(CBORError) in try reader.readInteger(Int.self, at: p) } }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try read(key) { p throws(CBORError) in try reader.readInteger(Int8.self, at: p) } }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try read(key) { p throws(CBORError) in try reader.readInteger(Int16.self, at: p) } }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try read(key) { p throws(CBORError) in try reader.readInteger(Int32.self, at: p) } }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try read(key) { p throws(CBORError) in try reader.readInteger(Int64.self, at: p) } }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try read(key) { p throws(CBORError) in try reader.readInteger(UInt.self, at: p) } }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try read(key) { p throws(CBORError) in try reader.readInteger(UInt8.self, at: p) } }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try read(key) { p throws(CBORError) in try reader.readInteger(UInt16.self, at: p) } }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try read(key) { p throws(CBORError) in try reader.readInteger(UInt32.self, at: p) } }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try read(key) { p throws(CBORError) in try reader.readInteger(UInt64.self, at: p) } }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        let p = try offset(of: key)
        return try options.decode(T.self, reader, at: p, path: path.appending(key), needsEnd: false).value
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try readIfPresent(key, reader.readBool) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try readIfPresent(key, reader.readString) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try readIfPresent(key, reader.readDouble) }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try readIfPresent(key, reader.readFloat) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try readIfPresent(key) { p throws(CBORError) in try reader.readInteger(Int.self, at: p) } }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try readIfPresent(key) { p throws(CBORError) in try reader.readInteger(Int8.self, at: p) } }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try readIfPresent(key) { p throws(CBORError) in try reader.readInteger(Int16.self, at: p) } }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try readIfPresent(key) { p throws(CBORError) in try reader.readInteger(Int32.self, at: p) } }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try readIfPresent(key) { p throws(CBORError) in try reader.readInteger(Int64.self, at: p) } }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try readIfPresent(key) { p throws(CBORError) in try reader.readInteger(UInt.self, at: p) } }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try readIfPresent(key) { p throws(CBORError) in try reader.readInteger(UInt8.self, at: p) } }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try readIfPresent(key) { p throws(CBORError) in try reader.readInteger(UInt16.self, at: p) } }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try readIfPresent(key) { p throws(CBORError) in try reader.readInteger(UInt32.self, at: p) } }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try readIfPresent(key) { p throws(CBORError) in try reader.readInteger(UInt64.self, at: p) } }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let p = map.find(key.stringValue), !reader.isNil(at: p) else { return nil }
        return try options.decode(T.self, reader, at: p, path: path.appending(key), needsEnd: false).value
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        let p = try offset(of: key)
        let nested: CBORMapIndex
        do throws(CBORError) {
            nested = try CBORMapIndex(reader: reader, at: p)
        } catch {
            throw error.decodingError(KeyedDecodingContainer<NestedKey>.self, path.appending(key).keys)
        }
        return KeyedDecodingContainer(CBORKeyedDecoder<NestedKey>(reader: reader, map: nested, path: path.appending(key), options: options))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let p = try offset(of: key)
        return try CBORUnkeyedDecoder(reader: reader, at: p, path: path.appending(key), options: options)
    }

    func superDecoder() throws -> any Decoder {
        superDecoder(CBORStringKey(stringValue: "super"))
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        superDecoder(key)
    }

    /// A decoder for the value of `key`, or for null when the map lacks it (as JSONDecoder does).
    private func superDecoder(_ key: any CodingKey) -> any Decoder {
        if let p = map.find(key.stringValue) {
            return CBORDecoderImpl(reader: reader, offset: p, path: path.appending(key), options: options)
        }
        return CBORDecoderImpl(reader: CBORReader(base: cborNullByte, end: 1), offset: 0, path: path.appending(key), options: options)
    }
}

// MARK: - Unkeyed container

struct CBORUnkeyedDecoder: UnkeyedDecodingContainer {
    let reader: CBORReader
    let path: CBORCodingPath
    let options: CBORDecodingOptions
    private(set) var currentIndex = 0
    /// The offset of the next item.
    private var offset: Int
    private let definiteCount: Int?

    init(reader: CBORReader, at p: Int, path: CBORCodingPath, options: CBORDecodingOptions) throws {
        self.reader = reader
        self.path = path
        self.options = options
        do throws(CBORError) {
            let (h, q) = try reader.untagged(at: p)
            guard h.major == 4 else { throw reader.mismatch("an array (unkeyed container)", h, at: q) }
            definiteCount = h.isIndefinite ? nil : Int(clamping: h.argument)
            offset = h.next
        } catch {
            throw error.decodingError([Any].self, path.keys)
        }
    }

    var codingPath: [any CodingKey] { path.keys }
    var count: Int? { definiteCount }

    var isAtEnd: Bool {
        if let definiteCount { return currentIndex >= definiteCount }
        return offset >= reader.end || reader.byte(offset) == 0xFF
    }

    private func checkNotAtEnd(_ type: Any.Type) throws {
        guard isAtEnd else { return }
        let elementPath = path.appending(index: currentIndex).keys
        let error = CBORError(.valueNotFound, "the array has only \(currentIndex) items", offset: offset,
                              codingPath: CBORCodingPath.render(elementPath))
        throw DecodingError.valueNotFound(type, DecodingError.Context(codingPath: elementPath, debugDescription: error.description, underlyingError: error))
    }

    private mutating func read<R>(_ body: (Int) throws(CBORError) -> (value: R, next: Int)) throws -> R {
        try checkNotAtEnd(R.self)
        do throws(CBORError) {
            let (value, next) = try body(offset)
            offset = next
            currentIndex += 1
            return value
        } catch {
            throw error.decodingError(R.self, path.appending(index: currentIndex).keys)
        }
    }

    /// Moves past the current item.
    private mutating func advance(_ type: Any.Type) throws {
        do throws(CBORError) {
            offset = try reader.skip(offset)
            currentIndex += 1
        } catch {
            throw error.decodingError(type, path.appending(index: currentIndex).keys)
        }
    }

    mutating func decodeNil() throws -> Bool {
        try checkNotAtEnd(Never?.self)
        guard reader.isNil(at: offset) else { return false }
        offset += 1
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try read(reader.readBool) }
    mutating func decode(_ type: String.Type) throws -> String { try read(reader.readString) }
    mutating func decode(_ type: Double.Type) throws -> Double { try read(reader.readDouble) }
    mutating func decode(_ type: Float.Type) throws -> Float { try read(reader.readFloat) }
    mutating func decode(_ type: Int.Type) throws -> Int { try read { [reader] p throws(CBORError) in try reader.readInteger(Int.self, at: p) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try read { [reader] p throws(CBORError) in try reader.readInteger(Int8.self, at: p) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try read { [reader] p throws(CBORError) in try reader.readInteger(Int16.self, at: p) } }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try read { [reader] p throws(CBORError) in try reader.readInteger(Int32.self, at: p) } }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try read { [reader] p throws(CBORError) in try reader.readInteger(Int64.self, at: p) } }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try read { [reader] p throws(CBORError) in try reader.readInteger(UInt.self, at: p) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try read { [reader] p throws(CBORError) in try reader.readInteger(UInt8.self, at: p) } }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try read { [reader] p throws(CBORError) in try reader.readInteger(UInt16.self, at: p) } }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try read { [reader] p throws(CBORError) in try reader.readInteger(UInt32.self, at: p) } }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try read { [reader] p throws(CBORError) in try reader.readInteger(UInt64.self, at: p) } }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try checkNotAtEnd(T.self)
        let (value, next) = try options.decode(T.self, reader, at: offset, path: path.appending(index: currentIndex), needsEnd: true)
        offset = next
        currentIndex += 1
        return value
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try checkNotAtEnd(KeyedDecodingContainer<NestedKey>.self)
        let elementPath = path.appending(index: currentIndex)
        let nested: CBORMapIndex
        do throws(CBORError) {
            nested = try CBORMapIndex(reader: reader, at: offset)
        } catch {
            throw error.decodingError(KeyedDecodingContainer<NestedKey>.self, elementPath.keys)
        }
        offset = nested.end
        currentIndex += 1
        return KeyedDecodingContainer(CBORKeyedDecoder<NestedKey>(reader: reader, map: nested, path: elementPath, options: options))
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try checkNotAtEnd([Any].self)
        let nested = try CBORUnkeyedDecoder(reader: reader, at: offset, path: path.appending(index: currentIndex), options: options)
        try advance([Any].self)
        return nested
    }

    mutating func superDecoder() throws -> any Decoder {
        try checkNotAtEnd((any Decoder).self)
        let decoder = CBORDecoderImpl(reader: reader, offset: offset, path: path.appending(index: currentIndex), options: options)
        try advance((any Decoder).self)
        return decoder
    }
}
