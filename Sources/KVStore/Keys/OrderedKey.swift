/// A type that can be a collection key: its encoded bytes sort, in LMDB's byte order, exactly as the
/// values compare in Swift.
///
/// That is what makes a range of keys (a week of days, one subscription's billing events) a single
/// cursor scan. KVStore ships conformances for `Int`, `Int64`, `Int32`, `UInt`, `UInt64`, `UInt32`,
/// `String`, `UUID`, `Date`, ``LogicalDay``, ``ByteKey`` and the tuples ``Pair`` and ``Triple``.
///
/// ```swift
/// let events = try store.collection("billingEvents",
///                                   key: Pair<UUID, Date>.self, value: BillingEvent.self)
/// ```
///
/// Encodings (each is recorded in the catalog as ``keyEncoding``):
/// - signed integers: big-endian with the sign bit flipped; unsigned integers: big-endian
/// - `String`: its UTF-8 bytes in Unicode normalisation form C (Swift compares strings by canonical
///   equivalence, so two strings that are `==` always get the same key)
/// - `UUID`: its 16 bytes; ``LogicalDay``: the day number as a 4-byte signed integer
/// - `Date`: the IEEE-754 bits of `timeIntervalSinceReferenceDate`, transformed to sort as numbers
/// - inside a ``Pair`` or ``Triple``, a variable-length component (string, bytes) that is not the last
///   one is escaped (`00` → `00 01`) and terminated with `00 00`, so a shorter component sorts first.
public protocol OrderedKey: Comparable, Sendable {
    /// The encoding, recorded in the catalog so that tools can render keys without the Swift type.
    static var keyEncoding: KeyEncoding { get }
    /// Appends the key's bytes. `terminal` is true when nothing follows the key in the encoded bytes.
    func encodeKey(into bytes: inout [UInt8], terminal: Bool)
    /// Reads a key written by ``encodeKey(into:terminal:)``. Throws ``KeyDecodingError`` on bad bytes.
    static func decodeKey(from reader: inout KeyReader, terminal: Bool) throws(KeyDecodingError) -> Self
    /// Decodes a whole stored key. Throws if bytes are left over or missing. The default reads it
    /// with a ``KeyReader``; fixed-width keys (integers, ``LogicalDay``) load it in one step.
    static func decodeKey(_ bytes: UnsafeRawBufferPointer) throws(KeyDecodingError) -> Self
}

extension OrderedKey {
    /// The key's bytes as they are stored.
    public var encodedKey: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        encodeKey(into: &bytes, terminal: true)
        return bytes
    }

    /// Decodes a whole stored key. Throws if bytes are left over or missing.
    public static func decodeKey(_ bytes: UnsafeRawBufferPointer) throws(KeyDecodingError) -> Self {
        try decodeWholeKey(bytes)
    }

    /// Decodes a whole stored key with a ``KeyReader``: what ``decodeKey(_:)-(UnsafeRawBufferPointer)``
    /// does by default, and what the fixed-width fast paths fall back to for its errors.
    public static func decodeWholeKey(_ bytes: UnsafeRawBufferPointer) throws(KeyDecodingError) -> Self {
        var reader = KeyReader(bytes)
        let key = try decodeKey(from: &reader, terminal: true)
        guard reader.isAtEnd else { throw KeyDecodingError("\(reader.remaining) unexpected trailing bytes") }
        return key
    }

    /// Decodes a whole stored key from an array.
    public static func decodeKey(_ bytes: [UInt8]) throws(KeyDecodingError) -> Self {
        do {
            return try bytes.withUnsafeBytes { buffer in try decodeKey(buffer) }
        } catch let error as KeyDecodingError {
            throw error
        } catch {
            throw KeyDecodingError("\(error)")
        }
    }
}

/// Stored key bytes that do not decode as the collection's key type.
public struct KeyDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// Reads the components of an encoded key. Valid only as long as the bytes it reads.
public struct KeyReader {
    let bytes: UnsafeRawBufferPointer
    public private(set) var offset = 0

    public init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    public var isAtEnd: Bool { offset >= bytes.count }
    public var remaining: Int { bytes.count - offset }

    /// Reads `count` bytes as a big-endian unsigned integer.
    mutating func readBigEndian(_ count: Int) throws(KeyDecodingError) -> UInt64 {
        guard remaining >= count else {
            throw KeyDecodingError("key is truncated: needs \(count) bytes at offset \(offset), \(remaining) remain")
        }
        var value: UInt64 = 0
        for i in 0..<count { value = value << 8 | UInt64(bytes[offset + i]) }
        offset += count
        return value
    }

    mutating func readBytes(_ count: Int) throws(KeyDecodingError) -> [UInt8] {
        guard remaining >= count else {
            throw KeyDecodingError("key is truncated: needs \(count) bytes at offset \(offset), \(remaining) remain")
        }
        defer { offset += count }
        return Array(bytes[offset..<(offset + count)])
    }

    /// Reads a variable-length component: the rest of the key if `terminal`, else up to the `00 00`
    /// terminator, undoing the `00 01` escapes.
    mutating func readVariable(terminal: Bool) throws(KeyDecodingError) -> [UInt8] {
        if terminal { return try readBytes(remaining) }
        var out: [UInt8] = []
        while offset < bytes.count {
            let byte = bytes[offset]
            offset += 1
            guard byte == 0 else { out.append(byte); continue }
            guard offset < bytes.count else { throw KeyDecodingError("key component is not terminated") }
            let next = bytes[offset]
            offset += 1
            switch next {
            case 0: return out
            case 1: out.append(0)
            default: throw KeyDecodingError("bad escape 00 \(next) in key component at offset \(offset - 2)")
            }
        }
        throw KeyDecodingError("key component is not terminated")
    }
}

extension Array where Element == UInt8 {
    /// Appends a variable-length component, escaped and terminated unless it is the last one.
    mutating func appendVariable<C: Swift.Collection<UInt8>>(_ component: C, terminal: Bool) {
        if terminal { append(contentsOf: component); return }
        for byte in component {
            append(byte)
            if byte == 0 { append(1) }
        }
        append(0)
        append(0)
    }

    mutating func appendBigEndian(_ value: UInt64, count: Int) {
        var shift = (count - 1) * 8
        while shift >= 0 {
            append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
            shift -= 8
        }
    }
}
