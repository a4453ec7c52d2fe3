#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Encodes `Encodable` values as CBOR (RFC 8949), the default value format of KVStore.
///
/// ```swift
/// struct Note: Codable { var title: String; var created: Date; var tags: [String] }
/// let bytes = try CBOREncoder().encode(Note(title: "Hi", created: .now, tags: ["a"]))
/// let note = try CBORDecoder().decode(Note.self, from: bytes)
/// ```
///
/// The output is plain CBOR that other languages read (Python's `cbor2`, for example):
///
/// - Integers of every width use major types 0 and 1 in their shortest form; `Bool` is `true`/`false`;
///   `nil` is null; `Float` and `Double` are always float64; `String` is a text string and `Data` a
///   byte string.
/// - Keyed containers are definite-length maps with text keys (`CodingKey.stringValue`) in the
///   order they were encoded (encoding a key again replaces its value in place); unkeyed containers
///   are definite-length arrays.
/// - A `Dictionary`, whose order Swift does not fix (it differs from process to process), is written
///   in the deterministic order of RFC 8949 section 4.2.1: keys sorted by their encoded bytes (for text
///   keys, shorter first, then bytewise). So equal values give equal bytes in every process, which
///   checksums and byte-exact dumps rely on.
/// - `Date` is tag 1 with a float64 of seconds since 1970 when that float64 gives back the same
///   `Date`, and otherwise the private tag ``CBORTag/referenceDate`` with a float64 of
///   `timeIntervalSinceReferenceDate`, so that every `Date` round-trips exactly.
/// - `Decimal` is tag 4 `[exponent, mantissa]` with trailing zeros moved into the exponent (so equal
///   decimals give equal bytes) and the mantissa as an integer or, beyond 64 bits, a tag 2/3 bignum;
///   `Decimal.nan` is a float64 NaN.
/// - `UUID` is tag 37 with its 16 bytes; `URL` is tag 32 with its `absoluteString`.
///
/// These types are recognized wherever they appear, not only at the top level.
public struct CBOREncoder: Sendable {
    /// Values handed to `encode(to:)` implementations as `Encoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    /// Creates an encoder.
    public init() {}

    /// Encodes a value.
    ///
    /// ```swift
    /// let bytes = try CBOREncoder().encode([1, 2, 3])      // [0x83, 0x01, 0x02, 0x03]
    /// ```
    ///
    /// - Returns: The CBOR bytes of one data item.
    /// - Throws: ``CBORError`` of kind ``CBORError/Kind/unencodable`` when the value encodes nothing
    ///   or an `encode(to:)` throws an `EncodingError`; other errors thrown by `encode(to:)` pass
    ///   through unchanged.
    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        try encode(value, within: nil)
    }

    /// Encodes a value, refusing (before writing a byte) one that `limits` would refuse to decode:
    /// larger than ``CBORLimits/maxInputSize`` or nested deeper than ``CBORLimits/maxDepth``.
    package func encode<T: Encodable>(_ value: T, within limits: CBORLimits?) throws -> [UInt8] {
        let options = CBOREncodingOptions(userInfo: userInfo)
        let node: CBOREncodingNode
        do {
            node = try options.node(for: value, at: .root, topLevel: true)
        } catch let error as EncodingError {
            throw Self.convert(error)
        }
        let size = node.encodedSize
        if let limits {
            guard size <= limits.maxInputSize else {
                throw CBORError(.limitExceeded, "input is \(size) bytes, over the maxInputSize limit of \(limits.maxInputSize)")
            }
            guard node.fitsDepth(limits.maxDepth) else {
                throw CBORError(.limitExceeded, "nesting is deeper than maxDepth (\(limits.maxDepth))")
            }
        }
        return CBORWriter.serialize(size: size) { node.write(to: &$0) }
    }

    static func convert(_ error: EncodingError) -> CBORError {
        switch error {
        case .invalidValue(_, let context):
            if let underlying = context.underlyingError as? CBORError { return underlying }
            return CBORError(.unencodable, context.debugDescription, codingPath: CBORCodingPath.render(context.codingPath))
        @unknown default:
            return CBORError(.unencodable, "\(error)")
        }
    }
}

// MARK: - Tree of containers

/// What an encoder has produced: a finished value, or a container that may still grow (containers
/// can be written to in any order, so they are kept by reference until the end).
enum CBOREncodingNode {
    case value(CBORValue)
    case array(CBORArrayBox)
    case map(CBORMapBox)
    /// A super encoder, which `encode(to:)` may fill after the parent's other entries.
    case encoder(CBOREncoderImpl)

    var encodedSize: Int {
        switch self {
        case .value(let v): return v.encodedSize
        case .array(let box):
            var size = CBORWriter.headSize(UInt64(box.items.count))
            for item in box.items { size += item.encodedSize }
            return size
        case .map(let box):
            var size = CBORWriter.headSize(UInt64(box.keys.count))
            for i in box.keys.indices { size += CBORWriter.textSize(box.keys[i]) + box.values[i].encodedSize }
            return size
        case .encoder(let encoder):
            return encoder.storage?.encodedSize ?? 1
        }
    }

    /// Whether no path through the item nests more than `depth` arrays, maps and tags (as
    /// ``CBORReader``'s validation counts them). Stops descending past the limit.
    func fitsDepth(_ depth: Int) -> Bool {
        switch self {
        case .value(let v): return v.fitsDepth(depth)
        case .array(let box): return depth > 0 && box.items.allSatisfy { $0.fitsDepth(depth - 1) }
        case .map(let box): return depth > 0 && box.values.allSatisfy { $0.fitsDepth(depth - 1) }
        case .encoder(let encoder): return encoder.storage?.fitsDepth(depth) ?? (depth > 0)
        }
    }

    func write(to writer: inout CBORWriter) {
        switch self {
        case .value(let v): v.write(to: &writer)
        case .array(let box):
            writer.head(4, UInt64(box.items.count))
            for item in box.items { item.write(to: &writer) }
        case .map(let box):
            writer.head(5, UInt64(box.keys.count))
            for i in box.keys.indices {
                writer.text(box.keys[i])
                box.values[i].write(to: &writer)
            }
        case .encoder(let encoder):
            if let storage = encoder.storage { storage.write(to: &writer) } else { writer.byte(0xA0) }
        }
    }
}

extension CBOREncodingNode {
    /// Puts what a `Dictionary` encoded into RFC 8949's deterministic order: a map's entries by key
    /// (shorter text first, then bytewise); the `[key, value, key, value…]` array Swift writes for
    /// other key types by each key's encoded bytes.
    func sortAsDictionary() {
        switch self {
        case .map(let box):
            box.sortKeys()
        case .array(let box):
            guard box.items.count % 2 == 0 else { return }
            let pairs = stride(from: 0, to: box.items.count, by: 2).map { (key: box.items[$0], value: box.items[$0 + 1]) }
            let sorted = pairs.map { (encoded: $0.key.encodedBytes(), pair: $0) }
                .sorted { $0.encoded.lexicographicallyPrecedes($1.encoded) }
            box.items = sorted.flatMap { [$0.pair.key, $0.pair.value] }
        case .value, .encoder:
            return
        }
    }

    func encodedBytes() -> [UInt8] {
        CBORWriter.serialize(size: encodedSize) { write(to: &$0) }
    }
}

final class CBORArrayBox {
    var items: [CBOREncodingNode] = []
}

final class CBORMapBox {
    // A box lives inside one `encode` call, on one thread: its fields need no dynamic exclusivity
    // checks, which cost an encoded DailyRecord about 4,000 instructions (69.1k before, 64.9k after).
    @exclusivity(unchecked) var keys: [String] = []
    @exclusivity(unchecked) var values: [CBOREncodingNode] = []
    /// Key → position, built once the map is too large for a linear search.
    @exclusivity(unchecked) private var index: [String: Int]?

    func set(_ key: String, _ node: CBOREncodingNode) {
        if let i = position(of: key) {
            values[i] = node
            return
        }
        keys.append(key)
        values.append(node)
        if index != nil {
            index?[key] = keys.count - 1
        } else if keys.count > 16 {
            var built: [String: Int] = [:]
            built.reserveCapacity(keys.count * 2)
            for (i, k) in keys.enumerated() { built[k] = i }
            index = built
        }
    }

    init() {}

    /// A map of these entries, sorted as ``sortKeys()`` sorts.
    init(sorting keys: [String], _ values: [CBOREncodingNode]) {
        (self.keys, self.values) = CBORKeyOrder.sorted(keys, values)
    }

    /// Sorts the entries by key as RFC 8949 section 4.2.1 orders text keys: shorter first, then bytewise.
    func sortKeys() {
        (keys, values) = CBORKeyOrder.sorted(keys, values)
        index = nil
    }

    private func position(of key: String) -> Int? {
        if let index { return index[key] }
        for i in keys.indices where keys[i] == key { return i }
        return nil
    }
}

/// State shared by all encoders of one `encode` call.
final class CBOREncodingOptions {
    let userInfo: [CodingUserInfoKey: Any]

    init(userInfo: [CodingUserInfoKey: any Sendable]) {
        self.userInfo = userInfo
    }

    /// The node for a value: a scalar, one of the recognized Foundation types, or whatever the
    /// value's `encode(to:)` produces.
    func node<T: Encodable>(for value: T, at path: @autoclosure () -> CBORCodingPath, topLevel: Bool = false) throws -> CBOREncodingNode {
        // Primitives reach here through generic code such as `Array.encode(to:)`; handle them
        // without creating an encoder. `unsafeBitCast` only turns a value into its own type (the
        // type was just compared), which, unlike `as!`, costs no dynamic cast.
        if T.self == String.self { return .value(.text(unsafeBitCast(value, to: String.self))) }
        if T.self == Int.self { return .value(Self.integer(unsafeBitCast(value, to: Int.self))) }
        if T.self == Double.self { return .value(.float(unsafeBitCast(value, to: Double.self))) }
        if T.self == Bool.self { return .value(.bool(unsafeBitCast(value, to: Bool.self))) }
        if T.self == Int64.self { return .value(Self.integer(unsafeBitCast(value, to: Int64.self))) }
        if T.self == UInt64.self { return .value(.unsigned(unsafeBitCast(value, to: UInt64.self))) }
        if T.self == Int32.self { return .value(Self.integer(unsafeBitCast(value, to: Int32.self))) }
        if T.self == UInt32.self { return .value(.unsigned(UInt64(unsafeBitCast(value, to: UInt32.self)))) }
        if T.self == UInt8.self { return .value(.unsigned(UInt64(unsafeBitCast(value, to: UInt8.self)))) }
        if T.self == Float.self { return .value(.float(Double(unsafeBitCast(value, to: Float.self)))) }
        if T.self == Date.self { return .value(Self.date(unsafeBitCast(value, to: Date.self))) }
        if T.self == Data.self { return .value(.bytes([UInt8](unsafeBitCast(value, to: Data.self)))) }
        if T.self == Decimal.self { return .value(try Self.decimal(unsafeBitCast(value, to: Decimal.self), path: path())) }
        if T.self == UUID.self { return .value(Self.uuid(unsafeBitCast(value, to: UUID.self))) }
        if T.self == URL.self { return .value(.tagged(CBORTag.uri, .text(unsafeBitCast(value, to: URL.self).absoluteString))) }
        if T.self == LogicalDay.self { return .value(.text(unsafeBitCast(value, to: LogicalDay.self).description)) }
        // Arrays of common scalars, without the generic `Array.encode(to:)` machinery.
        if ObjectIdentifier(T.self) == CBORKnownTypes.intArray { return .value(.array(unsafeBitCast(value, to: [Int].self).map(Self.integer))) }
        if ObjectIdentifier(T.self) == CBORKnownTypes.doubleArray { return .value(.array(unsafeBitCast(value, to: [Double].self).map(CBORValue.float))) }
        if ObjectIdentifier(T.self) == CBORKnownTypes.stringArray { return .value(.array(unsafeBitCast(value, to: [String].self).map(CBORValue.text))) }
        if ObjectIdentifier(T.self) == CBORKnownTypes.byteArray { return .value(.array(unsafeBitCast(value, to: [UInt8].self).map { .unsigned(UInt64($0)) })) }
        if ObjectIdentifier(T.self) == CBORKnownTypes.int64Array { return .value(.array(unsafeBitCast(value, to: [Int64].self).map(Self.integer))) }
        // Dictionaries, whose order must be made deterministic: with string keys straight into a
        // sorted map (common scalar values without a generic call each); others sorted after.
        if ObjectIdentifier(T.self) == CBORKnownTypes.stringIntMap { return Self.stringMap(unsafeBitCast(value, to: [String: Int].self), Self.integer) }
        if ObjectIdentifier(T.self) == CBORKnownTypes.stringStringMap { return Self.stringMap(unsafeBitCast(value, to: [String: String].self), CBORValue.text) }
        if ObjectIdentifier(T.self) == CBORKnownTypes.stringDoubleMap { return Self.stringMap(unsafeBitCast(value, to: [String: Double].self), CBORValue.float) }
        if ObjectIdentifier(T.self) == CBORKnownTypes.stringBoolMap { return Self.stringMap(unsafeBitCast(value, to: [String: Bool].self), CBORValue.bool) }
        var isDictionary = false
        if let map = value as? any UnorderedCBORMap {
            if let node = try map.cborStringKeyedNode(self, path: path()) { return node }
            isDictionary = true
        }
        let encoder = CBOREncoderImpl(path: path(), options: self)
        try value.encode(to: encoder)
        if let storage = encoder.storage {
            if isDictionary { storage.sortAsDictionary() }
            return storage
        }
        if topLevel {
            let reason = "\(T.self) did not encode any value"
            throw EncodingError.invalidValue(value, EncodingError.Context(
                codingPath: [], debugDescription: reason, underlyingError: CBORError(.unencodable, reason)))
        }
        // Like JSONEncoder: a nested value that encodes nothing becomes an empty map.
        return .map(CBORMapBox())
    }

    @inline(__always)
    static func integer<I: FixedWidthInteger>(_ value: I) -> CBORValue {
        // Both conversions are exact for the standard integer types (64 bits at most).
        value < 0 ? .negative(UInt64(truncatingIfNeeded: ~value)) : .unsigned(UInt64(truncatingIfNeeded: value))
    }

    static func date(_ date: Date) -> CBORValue {
        let seconds = date.timeIntervalSince1970
        if Date(timeIntervalSince1970: seconds) == date {
            return .tagged(CBORTag.epochDate, .float(seconds))
        }
        return .tagged(CBORTag.referenceDate, .float(date.timeIntervalSinceReferenceDate))
    }

    static func uuid(_ uuid: UUID) -> CBORValue {
        let bytes = withUnsafeBytes(of: uuid.uuid) { [UInt8]($0) }
        return .tagged(CBORTag.uuid, .bytes(bytes))
    }

    /// Tag 4 `[exponent, mantissa]` from the exact digits of `significand` and `exponent`.
    static func decimal(_ decimal: Decimal, path: CBORCodingPath) throws -> CBORValue {
        if decimal.isNaN { return .float(.nan) }
        if decimal.isZero { return .tagged(CBORTag.decimalFraction, .array([.unsigned(0), .unsigned(0)])) }
        // `significand` is the integer mantissa (exponent 0), printed without sign or exponent.
        var mantissa = CBORMagnitude.zero
        var pendingZeros = 0
        var fractionDigits = 0
        var afterPoint = false
        var valid = true
        for unit in decimal.significand.description.utf8 {
            switch unit {
            case UInt8(ascii: "0"):
                pendingZeros += 1
                if afterPoint { fractionDigits += 1 }
            case UInt8(ascii: "1")...UInt8(ascii: "9"):
                if afterPoint { fractionDigits += 1 }
                if !mantissa.isZero {
                    for _ in 0 ..< pendingZeros where valid { valid = mantissa.multiplyBy10(adding: 0) }
                }
                pendingZeros = 0
                if valid { valid = mantissa.multiplyBy10(adding: UInt64(unit - UInt8(ascii: "0"))) }
            case UInt8(ascii: "."):
                afterPoint = true
            case UInt8(ascii: "-"), UInt8(ascii: "+"):
                break
            default:
                valid = false
            }
        }
        guard valid, !mantissa.isZero else {
            throw EncodingError.invalidValue(decimal, EncodingError.Context(
                codingPath: path.keys,
                debugDescription: "cannot read the digits of Decimal \(decimal)",
                underlyingError: CBORError(.unencodable, "cannot read the digits of Decimal \(decimal)", codingPath: CBORCodingPath.render(path.keys))))
        }
        let exponent = decimal.exponent + pendingZeros - fractionDigits
        let negative = decimal.sign == .minus
        let mantissaValue: CBORValue
        if negative {
            let n = mantissa.minusOne()
            mantissaValue = n.high == 0 ? .negative(n.low) : .tagged(CBORTag.negativeBignum, .bytes(n.bigEndianBytes))
        } else {
            mantissaValue = mantissa.high == 0 ? .unsigned(mantissa.low) : .tagged(CBORTag.positiveBignum, .bytes(mantissa.bigEndianBytes))
        }
        return .tagged(CBORTag.decimalFraction, .array([integer(exponent), mantissaValue]))
    }
}

// MARK: - Encoder

final class CBOREncoderImpl: Encoder, SingleValueEncodingContainer {
    var storage: CBOREncodingNode?
    let path: CBORCodingPath
    let options: CBOREncodingOptions

    init(path: CBORCodingPath, options: CBOREncodingOptions) {
        self.path = path
        self.options = options
    }

    var codingPath: [any CodingKey] { path.keys }
    var userInfo: [CodingUserInfoKey: Any] { options.userInfo }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let box: CBORMapBox
        if case .map(let existing)? = storage {
            box = existing
        } else {
            box = CBORMapBox()
            storage = .map(box)
        }
        return KeyedEncodingContainer(CBORKeyedEncoder<Key>(box: box, path: path, options: options))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let box: CBORArrayBox
        if case .array(let existing)? = storage {
            box = existing
        } else {
            box = CBORArrayBox()
            storage = .array(box)
        }
        return CBORUnkeyedEncoder(box: box, path: path, options: options)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    // SingleValueEncodingContainer

    func encodeNil() throws { storage = .value(.null) }
    func encode(_ value: Bool) throws { storage = .value(.bool(value)) }
    func encode(_ value: String) throws { storage = .value(.text(value)) }
    func encode(_ value: Double) throws { storage = .value(.float(value)) }
    func encode(_ value: Float) throws { storage = .value(.float(Double(value))) }
    func encode(_ value: Int) throws { storage = .value(CBOREncodingOptions.integer(value)) }
    func encode(_ value: Int8) throws { storage = .value(CBOREncodingOptions.integer(value)) }
    func encode(_ value: Int16) throws { storage = .value(CBOREncodingOptions.integer(value)) }
    func encode(_ value: Int32) throws { storage = .value(CBOREncodingOptions.integer(value)) }
    func encode(_ value: Int64) throws { storage = .value(CBOREncodingOptions.integer(value)) }
    func encode(_ value: UInt) throws { storage = .value(.unsigned(UInt64(value))) }
    func encode(_ value: UInt8) throws { storage = .value(.unsigned(UInt64(value))) }
    func encode(_ value: UInt16) throws { storage = .value(.unsigned(UInt64(value))) }
    func encode(_ value: UInt32) throws { storage = .value(.unsigned(UInt64(value))) }
    func encode(_ value: UInt64) throws { storage = .value(.unsigned(value)) }
    func encode<T: Encodable>(_ value: T) throws { storage = try options.node(for: value, at: path) }
}

// MARK: - Keyed container

struct CBORKeyedEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let box: CBORMapBox
    let path: CBORCodingPath
    let options: CBOREncodingOptions

    var codingPath: [any CodingKey] { path.keys }

    private func put(_ value: CBORValue, _ key: Key) { box.set(key.stringValue, .value(value)) }

    mutating func encodeNil(forKey key: Key) throws { put(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { put(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { put(.text(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { put(.float(value), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { put(.float(Double(value)), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { put(CBOREncodingOptions.integer(value), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { put(CBOREncodingOptions.integer(value), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { put(CBOREncodingOptions.integer(value), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { put(CBOREncodingOptions.integer(value), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { put(CBOREncodingOptions.integer(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { put(.unsigned(UInt64(value)), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { put(.unsigned(UInt64(value)), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { put(.unsigned(UInt64(value)), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { put(.unsigned(UInt64(value)), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { put(.unsigned(value), key) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        box.set(key.stringValue, try options.node(for: value, at: path.appending(key)))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let nested = CBORMapBox()
        box.set(key.stringValue, .map(nested))
        return KeyedEncodingContainer(CBORKeyedEncoder<NestedKey>(box: nested, path: path.appending(key), options: options))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = CBORArrayBox()
        box.set(key.stringValue, .array(nested))
        return CBORUnkeyedEncoder(box: nested, path: path.appending(key), options: options)
    }

    mutating func superEncoder() -> any Encoder {
        superEncoder(CBORStringKey(stringValue: "super"))
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        superEncoder(key)
    }

    private func superEncoder(_ key: any CodingKey) -> any Encoder {
        let encoder = CBOREncoderImpl(path: path.appending(key), options: options)
        box.set(key.stringValue, .encoder(encoder))
        return encoder
    }
}

// MARK: - Unkeyed container

struct CBORUnkeyedEncoder: UnkeyedEncodingContainer {
    let box: CBORArrayBox
    let path: CBORCodingPath
    let options: CBOREncodingOptions

    var codingPath: [any CodingKey] { path.keys }
    var count: Int { box.items.count }

    private func put(_ value: CBORValue) { box.items.append(.value(value)) }

    mutating func encodeNil() throws { put(.null) }
    mutating func encode(_ value: Bool) throws { put(.bool(value)) }
    mutating func encode(_ value: String) throws { put(.text(value)) }
    mutating func encode(_ value: Double) throws { put(.float(value)) }
    mutating func encode(_ value: Float) throws { put(.float(Double(value))) }
    mutating func encode(_ value: Int) throws { put(CBOREncodingOptions.integer(value)) }
    mutating func encode(_ value: Int8) throws { put(CBOREncodingOptions.integer(value)) }
    mutating func encode(_ value: Int16) throws { put(CBOREncodingOptions.integer(value)) }
    mutating func encode(_ value: Int32) throws { put(CBOREncodingOptions.integer(value)) }
    mutating func encode(_ value: Int64) throws { put(CBOREncodingOptions.integer(value)) }
    mutating func encode(_ value: UInt) throws { put(.unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt8) throws { put(.unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt16) throws { put(.unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt32) throws { put(.unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt64) throws { put(.unsigned(value)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        box.items.append(try options.node(for: value, at: path.appending(index: box.items.count)))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let nested = CBORMapBox()
        let nestedPath = path.appending(index: box.items.count)
        box.items.append(.map(nested))
        return KeyedEncodingContainer(CBORKeyedEncoder<NestedKey>(box: nested, path: nestedPath, options: options))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let nested = CBORArrayBox()
        let nestedPath = path.appending(index: box.items.count)
        box.items.append(.array(nested))
        return CBORUnkeyedEncoder(box: nested, path: nestedPath, options: options)
    }

    mutating func superEncoder() -> any Encoder {
        let encoder = CBOREncoderImpl(path: path.appending(index: box.items.count), options: options)
        box.items.append(.encoder(encoder))
        return encoder
    }
}
