/// Turns a collection's values into bytes and back. Chosen once per collection, and recorded in the
/// catalog by ``encodingName``.
///
/// KVStore ships three: ``CBORCodec`` (any `Codable`, self-describing; the default),
/// ``FixedLayoutCodec`` (small trivial structs read straight from the memory map) and
/// ``RawBytesCodec``.
public protocol ValueCodec<Value>: Sendable {
    associatedtype Value
    /// The name recorded in the catalog, such as `cbor` or `fixed(24)`.
    var encodingName: String { get }
    /// The value's bytes.
    func encode(_ value: Value) throws -> [UInt8]
    /// Reads a value from bytes that are valid only during the call (they may point into the map).
    func decode(_ bytes: UnsafeRawBufferPointer) throws -> Value
}

/// The default codec: CBOR (RFC 8949) for any `Codable` value, readable without the Swift types by
/// `kvtool` and by other languages (Python's `cbor2`, for example).
///
/// Decoding enforces ``CBORLimits`` (input size and nesting depth), so hostile bytes give an error,
/// never a crash.
public struct CBORCodec<Value: Codable>: ValueCodec {
    public var limits: CBORLimits

    public init(limits: CBORLimits = .default) { self.limits = limits }

    public var encodingName: String { "cbor" }

    /// The value's CBOR. Values that ``decode(_:)`` would refuse (over ``CBORLimits/maxInputSize``,
    /// or nested deeper than ``CBORLimits/maxDepth``) are refused here, so that nothing is stored that
    /// cannot be read back.
    public func encode(_ value: Value) throws -> [UInt8] {
        let bytes = try CBOREncoder().encode(value)
        try CBORReader.check(bytes, limits: limits)
        return bytes
    }

    public func decode(_ bytes: UnsafeRawBufferPointer) throws -> Value {
        try CBORDecoder(limits: limits).decode(Value.self, from: bytes)
    }
}

/// Stores values as the raw bytes you give it.
public struct RawBytesCodec: ValueCodec {
    public init() {}
    public var encodingName: String { "bytes" }
    public func encode(_ value: [UInt8]) throws -> [UInt8] { value }
    public func decode(_ bytes: UnsafeRawBufferPointer) throws -> [UInt8] { Array(bytes) }
}
