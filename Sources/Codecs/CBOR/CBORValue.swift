// CBOR (RFC 8949): the data model. The limits, errors and tags of decoding and the low-level
// reader and writer that ``CBOREncoder`` and ``CBORDecoder`` share have files of their own.

/// One CBOR data item: the data model of RFC 8949, for reading CBOR without a Swift type and for
/// building CBOR by hand.
///
/// ```swift
/// let value = try CBORValue.decode(bytes)          // any well-formed CBOR within the limits
/// print(value)                                     // {"name": "Ada", "age": 36}
/// let again = value.encoded()                      // definite lengths, float64 floats
/// ```
///
/// Equality is structural: maps compare entry by entry in order, and floats compare by bit
/// pattern, so `.float(.nan) == .float(.nan)` and `.float(0.0) != .float(-0.0)`.
public enum CBORValue: Hashable, Sendable {
    /// Major type 0: an unsigned integer.
    case unsigned(UInt64)
    /// Major type 1: the negative integer -1 - n (so `.negative(0)` is -1).
    case negative(UInt64)
    /// Major type 2: a byte string.
    case bytes([UInt8])
    /// Major type 3: a text string.
    case text(String)
    /// Major type 4: an array.
    case array([CBORValue])
    /// Major type 5: a map, its entries in the order they appear.
    case map([CBORMapEntry])
    /// Major type 6: a tag number and the tagged item.
    indirect case tagged(UInt64, CBORValue)
    /// Simple values 20 and 21.
    case bool(Bool)
    /// Simple value 22.
    case null
    /// Simple value 23.
    case undefined
    /// Any other simple value: 0–19 or 32–255 (20–31 are not valid here).
    case simple(UInt8)
    /// A float16, float32 or float64 (decoding widens all of them to `Double`; encoding writes float64).
    case float(Double)

    /// Structural equality; floats compare by bit pattern.
    public static func == (lhs: CBORValue, rhs: CBORValue) -> Bool {
        switch (lhs, rhs) {
        case let (.unsigned(a), .unsigned(b)): a == b
        case let (.negative(a), .negative(b)): a == b
        case let (.bytes(a), .bytes(b)): a == b
        case let (.text(a), .text(b)): a == b
        case let (.array(a), .array(b)): a == b
        case let (.map(a), .map(b)): a == b
        case let (.tagged(t, a), .tagged(u, b)): t == u && a == b
        case let (.bool(a), .bool(b)): a == b
        case (.null, .null), (.undefined, .undefined): true
        case let (.simple(a), .simple(b)): a == b
        case let (.float(a), .float(b)): a.bitPattern == b.bitPattern
        default: false
        }
    }

    /// Hashes the item consistently with ``==(_:_:)``.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .unsigned(let n): hasher.combine(0 as UInt8); hasher.combine(n)
        case .negative(let n): hasher.combine(1 as UInt8); hasher.combine(n)
        case .bytes(let b): hasher.combine(2 as UInt8); hasher.combine(b)
        case .text(let s): hasher.combine(3 as UInt8); hasher.combine(s)
        case .array(let a): hasher.combine(4 as UInt8); hasher.combine(a)
        case .map(let m): hasher.combine(5 as UInt8); hasher.combine(m)
        case .tagged(let t, let v): hasher.combine(6 as UInt8); hasher.combine(t); hasher.combine(v)
        case .bool(let b): hasher.combine(7 as UInt8); hasher.combine(b)
        case .null: hasher.combine(8 as UInt8)
        case .undefined: hasher.combine(9 as UInt8)
        case .simple(let s): hasher.combine(10 as UInt8); hasher.combine(s)
        case .float(let d): hasher.combine(11 as UInt8); hasher.combine(d.bitPattern)
        }
    }
}

extension CBORValue {
    /// Whether no path through the item nests more than `depth` arrays, maps and tags.
    func fitsDepth(_ depth: Int) -> Bool {
        switch self {
        case .array(let items): return depth > 0 && items.allSatisfy { $0.fitsDepth(depth - 1) }
        case .map(let entries): return depth > 0 && entries.allSatisfy { $0.key.fitsDepth(depth - 1) && $0.value.fitsDepth(depth - 1) }
        case .tagged(_, let item): return depth > 0 && item.fitsDepth(depth - 1)
        default: return true
        }
    }

    /// Decodes one complete data item from bytes.
    ///
    /// Accepts any well-formed CBOR: indefinite lengths, float16/32/64, any tags (kept as
    /// ``tagged(_:_:)``, bignums included). Text is checked to be UTF-8.
    ///
    /// ```swift
    /// let value = try bytes.withUnsafeBytes { try CBORValue.decode($0) }
    /// ```
    ///
    /// - Throws: ``CBORError`` when the input is empty or larger than `limits.maxInputSize`, nests
    ///   deeper than `limits.maxDepth`, is truncated or malformed, has invalid UTF-8, has a map with
    ///   a duplicate key, or has bytes after the item.
    public static func decode(_ bytes: UnsafeRawBufferPointer, limits: CBORLimits = .default) throws -> CBORValue {
        let reader = try CBORReader.validated(bytes, limits: limits)
        return try reader.readValue(at: 0).value
    }

    /// Checks that `bytes` hold exactly one well-formed data item within `limits`, building nothing,
    /// without recursion whatever the depth allowed: what a sync server checks of a value before it
    /// hands it to devices (SyncWire's `UndecodableValue`).
    ///
    /// - Throws: ``CBORError``, as ``decode(_:limits:)-(UnsafeRawBufferPointer,_)`` does, but for a
    ///   duplicate map key (found only by reading the item).
    package static func validate(_ bytes: [UInt8], limits: CBORLimits = .default) throws {
        try CBORReader.check(bytes, limits: limits)
    }

    /// Decodes one complete data item from an array of bytes.
    ///
    /// ```swift
    /// let value = try CBORValue.decode([0x82, 0x01, 0x02])   // .array([.unsigned(1), .unsigned(2)])
    /// ```
    ///
    /// - Throws: ``CBORError``, as the `UnsafeRawBufferPointer` variant does.
    public static func decode(_ bytes: [UInt8], limits: CBORLimits = .default) throws -> CBORValue {
        try bytes.withUnsafeBytes { try decode($0, limits: limits) }
    }

    /// The item's CBOR bytes: shortest argument forms, definite lengths, floats as float64, map
    /// entries in their order.
    ///
    /// ```swift
    /// CBORValue.array([.unsigned(1), .text("a")]).encoded()   // [0x82, 0x01, 0x61, 0x61]
    /// ```
    ///
    /// `.simple(n)` is written as it is, so values 20–31 alias `false`…`undefined` or give bytes that
    /// no decoder accepts; use ``bool(_:)``, ``null`` and ``undefined`` instead.
    public func encoded() -> [UInt8] {
        CBORWriter.serialize(size: encodedSize) { writer in write(to: &writer) }
    }

    var encodedSize: Int {
        switch self {
        case .unsigned(let n), .negative(let n): return CBORWriter.headSize(n)
        case .bytes(let b): return CBORWriter.headSize(UInt64(b.count)) + b.count
        case .text(let s): return CBORWriter.textSize(s)
        case .array(let items):
            var size = CBORWriter.headSize(UInt64(items.count))
            for item in items { size += item.encodedSize }
            return size
        case .map(let entries):
            var size = CBORWriter.headSize(UInt64(entries.count))
            for entry in entries { size += entry.key.encodedSize + entry.value.encodedSize }
            return size
        case .tagged(let tag, let item): return CBORWriter.headSize(tag) + item.encodedSize
        case .bool, .null, .undefined: return 1
        case .simple(let n): return n < 24 ? 1 : 2
        case .float: return 9
        }
    }

    func write(to writer: inout CBORWriter) {
        switch self {
        case .unsigned(let n): writer.head(0, n)
        case .negative(let n): writer.head(1, n)
        case .bytes(let b):
            writer.head(2, UInt64(b.count))
            b.withUnsafeBytes { writer.raw($0) }
        case .text(let s): writer.text(s)
        case .array(let items):
            writer.head(4, UInt64(items.count))
            for item in items { item.write(to: &writer) }
        case .map(let entries):
            writer.head(5, UInt64(entries.count))
            for entry in entries {
                entry.key.write(to: &writer)
                entry.value.write(to: &writer)
            }
        case .tagged(let tag, let item):
            writer.head(6, tag)
            item.write(to: &writer)
        case .bool(let b): writer.byte(b ? 0xF5 : 0xF4)
        case .null: writer.byte(0xF6)
        case .undefined: writer.byte(0xF7)
        case .simple(let n): writer.head(7, UInt64(n))
        case .float(let d): writer.double(d)
        }
    }
}

extension CBORValue: CustomStringConvertible {
    /// The item in CBOR diagnostic notation (RFC 8949 section 8), on one line:
    /// `{"a": 1, "b": [h'01ff', -2, 1.5, 1(1363896240)]}`.
    public var description: String {
        var out = ""
        describe(into: &out)
        return out
    }

    private func describe(into out: inout String) {
        switch self {
        case .unsigned(let n): out += String(n)
        case .negative(let n): out += CBORReader.negativeString(n)
        case .bytes(let b):
            out += "h'"
            out += Hex.encode(b)
            out += "'"
        case .text(let s): out += JSONText.quoted(s)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += ", " }
                item.describe(into: &out)
            }
            out += "]"
        case .map(let entries):
            out += "{"
            for (i, entry) in entries.enumerated() {
                if i > 0 { out += ", " }
                entry.key.describe(into: &out)
                out += ": "
                entry.value.describe(into: &out)
            }
            out += "}"
        case .tagged(let tag, let item):
            out += "\(tag)("
            item.describe(into: &out)
            out += ")"
        case .bool(let b): out += b ? "true" : "false"
        case .null: out += "null"
        case .undefined: out += "undefined"
        case .simple(let n): out += "simple(\(n))"
        case .float(let d):
            if d.isNaN { out += "NaN" } else if d.isInfinite { out += d < 0 ? "-Infinity" : "Infinity" } else { out += "\(d)" }
        }
    }
}
