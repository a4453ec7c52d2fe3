/// Signed integers: big-endian two's complement with the sign bit flipped, so negatives sort first.
public protocol SignedOrderedKey: OrderedKey, FixedWidthInteger, SignedInteger {}
/// Unsigned integers: big-endian.
public protocol UnsignedOrderedKey: OrderedKey, FixedWidthInteger, UnsignedInteger {}

extension SignedOrderedKey {
    public func encodeKey(into bytes: inout [UInt8], terminal: Bool) {
        let width = Self.bitWidth / 8
        let bits = UInt64(truncatingIfNeeded: self) & (width == 8 ? .max : (1 << UInt64(Self.bitWidth)) - 1)
        bytes.appendBigEndian(bits ^ (1 << UInt64(Self.bitWidth - 1)), count: width)
    }

    public static func decodeKey(from reader: inout KeyReader, terminal: Bool) throws(KeyDecodingError) -> Self {
        let width = bitWidth / 8
        let raw = try reader.readBigEndian(width) ^ (1 << UInt64(bitWidth - 1))
        return Self(truncatingIfNeeded: raw)
    }

    /// A whole key of exactly the width, loaded in one step (a scan decodes one per entry).
    @inline(__always)
    public static func decodeKey(_ bytes: UnsafeRawBufferPointer) throws(KeyDecodingError) -> Self {
        guard let raw = loadBigEndian(bytes, width: bitWidth / 8) else { return try decodeWholeKey(bytes) }
        return Self(truncatingIfNeeded: raw ^ (1 << UInt64(bitWidth - 1)))
    }
}

/// The big-endian integer that is all of `bytes`, if they are `width` bytes (1, 2, 4 or 8).
@inline(__always)
func loadBigEndian(_ bytes: UnsafeRawBufferPointer, width: Int) -> UInt64? {
    guard bytes.count == width else { return nil }
    switch width {
    case 8: return UInt64(bigEndian: bytes.loadUnaligned(as: UInt64.self))
    case 4: return UInt64(UInt32(bigEndian: bytes.loadUnaligned(as: UInt32.self)))
    case 2: return UInt64(UInt16(bigEndian: bytes.loadUnaligned(as: UInt16.self)))
    case 1: return UInt64(bytes[0])
    default: return nil
    }
}

extension UnsignedOrderedKey {
    public func encodeKey(into bytes: inout [UInt8], terminal: Bool) {
        bytes.appendBigEndian(UInt64(self), count: Self.bitWidth / 8)
    }

    public static func decodeKey(from reader: inout KeyReader, terminal: Bool) throws(KeyDecodingError) -> Self {
        Self(truncatingIfNeeded: try reader.readBigEndian(bitWidth / 8))
    }

    /// A whole key of exactly the width, loaded in one step.
    @inline(__always)
    public static func decodeKey(_ bytes: UnsafeRawBufferPointer) throws(KeyDecodingError) -> Self {
        guard let raw = loadBigEndian(bytes, width: bitWidth / 8) else { return try decodeWholeKey(bytes) }
        return Self(truncatingIfNeeded: raw)
    }
}

extension Int: SignedOrderedKey { public static var keyEncoding: KeyEncoding { .int64 } }
extension Int64: SignedOrderedKey { public static var keyEncoding: KeyEncoding { .int64 } }
extension Int32: SignedOrderedKey { public static var keyEncoding: KeyEncoding { .int32 } }
extension UInt: UnsignedOrderedKey { public static var keyEncoding: KeyEncoding { .uint64 } }
extension UInt64: UnsignedOrderedKey { public static var keyEncoding: KeyEncoding { .uint64 } }
extension UInt32: UnsignedOrderedKey { public static var keyEncoding: KeyEncoding { .uint32 } }
