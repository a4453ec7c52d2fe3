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
    /// The largest stored value, in bytes, that ``decode(_:)`` accepts, or `nil` for no limit.
    /// ``KVCollection`` refuses a larger stored value (one written by another process, say) before
    /// it copies or decodes a byte of it, with ``KVStoreError/corruptValue(collection:key:reason:underlying:)``.
    var maxEncodedSize: Int? { get }
    /// Whether a write through this codec keeps what the value it replaces holds that `Value` does
    /// not know (``keepingUnknownFields(of:in:)``). False unless the codec says otherwise.
    var keepsUnknownFields: Bool { get }
    /// `new` with what `old`, the stored value it replaces, holds that `Value` does not know; `nil` to
    /// store `new` as it is.
    func keepingUnknownFields(of old: UnsafeRawBufferPointer, in new: [UInt8]) -> [UInt8]?
}

extension ValueCodec {
    public var maxEncodedSize: Int? { nil }
    public var keepsUnknownFields: Bool { false }
    public func keepingUnknownFields(of old: UnsafeRawBufferPointer, in new: [UInt8]) -> [UInt8]? { nil }
}

/// The default codec: CBOR (RFC 8949) for any `Codable` value, readable without the Swift types by
/// `kvtool` and by other languages (Python's `cbor2`, for example).
///
/// Decoding enforces ``CBORLimits`` (input size and nesting depth), so hostile bytes give an error,
/// never a crash.
///
/// A write keeps the map keys that `Value` does not declare from the value it replaces
/// (``keepsUnknownFields``, on by default), so an older build of the app that decodes a newer
/// build's value, changes one field and writes it back, does not erase the fields it does not know:
/// the rule of protocol buffers' unknown fields. Keys `Value` declares and leaves out (a `nil`
/// optional) are removed as written. Only the top-level map is merged.
public struct CBORCodec<Value: Codable>: ValueCodec {
    public var limits: CBORLimits
    /// Whether a write keeps the top-level map keys of the replaced value that `Value` does not read.
    /// On by default: it costs a lookup of the stored value per write (and, only when the stored map
    /// has keys the new one lacks, a decode of it). Turn it off for a collection whose values must be
    /// exactly what the app wrote.
    public var keepsUnknownFields: Bool

    public init(limits: CBORLimits = .default, keepsUnknownFields: Bool = true) {
        self.limits = limits
        self.keepsUnknownFields = keepsUnknownFields
    }

    public func keepingUnknownFields(of old: UnsafeRawBufferPointer, in new: [UInt8]) -> [UInt8]? {
        CBORUnknownFields.merge(Value.self, new: new, old: old, limits: limits)
    }

    public var encodingName: String { ValueEncoding.cbor.description }

    /// ``CBORLimits/maxInputSize``.
    public var maxEncodedSize: Int? { limits.maxInputSize }

    /// The value's CBOR. Values that ``decode(_:)`` would refuse (over ``CBORLimits/maxInputSize``,
    /// or nested deeper than ``CBORLimits/maxDepth``) are refused here, so that nothing is stored that
    /// cannot be read back.
    public func encode(_ value: Value) throws -> [UInt8] {
        try CBOREncoder().encode(value, within: limits)
    }

    public func decode(_ bytes: UnsafeRawBufferPointer) throws -> Value {
        try CBORDecoder(limits: limits).decode(Value.self, from: bytes)
    }
}

/// Stores values as the raw bytes you give it, up to ``maxSize`` bytes each.
///
/// Reading copies the value out of the map, so the limit also bounds the memory one `get` can take
/// when another process has stored a huge value.
public struct RawBytesCodec: ValueCodec {
    /// The largest value, in bytes, that ``encode(_:)`` stores and ``decode(_:)`` copies: 16 MiB by
    /// default, as ``CBORLimits/maxInputSize``.
    public var maxSize: Int

    public init(maxSize: Int = CBORLimits.default.maxInputSize) { self.maxSize = maxSize }
    public var encodingName: String { ValueEncoding.bytes.description }
    public var maxEncodedSize: Int? { maxSize }

    /// The bytes themselves; over ``maxSize``, ``KVStoreError/valueTooLarge(what:size:limit:hint:)``.
    public func encode(_ value: [UInt8]) throws -> [UInt8] {
        guard value.count <= maxSize else {
            throw KVStoreError.valueTooLarge(what: "the value", size: value.count, limit: maxSize,
                                             hint: "store large data with SharedFiles instead")
        }
        return value
    }

    /// A copy of the bytes; over ``maxSize``, ``KVStoreError/valueTooLarge(what:size:limit:hint:)``,
    /// before anything is copied.
    public func decode(_ bytes: UnsafeRawBufferPointer) throws -> [UInt8] {
        guard bytes.count <= maxSize else {
            throw KVStoreError.valueTooLarge(what: "the stored value", size: bytes.count, limit: maxSize, hint: "")
        }
        return Array(bytes)
    }
}

/// ``CBORCodec`` for a type whose shape is known, with an encoder and a decoder written for it: the
/// same bytes (the catalog records `cbor`), without `Codable`'s dynamic casts.
///
/// `encode` must give exactly the bytes ``CBOREncoder`` gives, or `nil` to leave the value to it.
/// `decode` may take only what ``CBORDecoder`` takes, and must give the same value; `nil` leaves the
/// bytes to ``CBORDecoder`` (and its errors). Tests that compare them with `Codable` over many values,
/// and damaged bytes, are what make a direct codec safe.
package struct DirectCBORCodec<Value: Codable>: ValueCodec {
    package let cbor = CBORCodec<Value>()
    let encodeDirectly: @Sendable (Value) -> [UInt8]?
    let decodeDirectly: (@Sendable (UnsafeRawBufferPointer) -> Value?)?

    package init(encode: @escaping @Sendable (Value) -> [UInt8]?, decode: (@Sendable (UnsafeRawBufferPointer) -> Value?)? = nil) {
        (encodeDirectly, decodeDirectly) = (encode, decode)
    }

    package var encodingName: String { cbor.encodingName }
    package var maxEncodedSize: Int? { cbor.maxEncodedSize }
    package var keepsUnknownFields: Bool { cbor.keepsUnknownFields }

    package func keepingUnknownFields(of old: UnsafeRawBufferPointer, in new: [UInt8]) -> [UInt8]? {
        cbor.keepingUnknownFields(of: old, in: new)
    }

    package func encode(_ value: Value) throws -> [UInt8] {
        if let bytes = encodeDirectly(value) { return bytes }
        return try cbor.encode(value)
    }

    package func decode(_ bytes: UnsafeRawBufferPointer) throws -> Value {
        if bytes.count <= cbor.limits.maxInputSize, let value = decodeDirectly?(bytes) { return value }
        return try cbor.decode(bytes)
    }
}
