// CBOR (RFC 8949): the data model (``CBORValue``), the limits and errors of decoding, and the
// low-level reader and writer that ``CBOREncoder`` and ``CBORDecoder`` share.
//
// Nothing in this file uses Foundation: the reader works on an `UnsafeRawPointer` and offsets, and
// the writer stores into a buffer whose exact size is computed first.

// MARK: - Limits

/// Limits that decoding enforces, so that corrupt or hostile bytes give an error instead of
/// exhausting memory or the stack.
///
/// ```swift
/// var limits = CBORLimits.default
/// limits.maxInputSize = 1 << 20            // refuse values over 1 MiB
/// let note = try CBORDecoder(limits: limits).decode(Note.self, from: bytes)
/// ```
public struct CBORLimits: Sendable, Hashable {
    /// The largest input, in bytes, that decoding accepts. Larger input fails with a
    /// ``CBORError`` of kind ``CBORError/Kind/limitExceeded`` before any byte is parsed.
    /// The default is 16 MiB.
    public var maxInputSize: Int

    /// The deepest nesting of arrays, maps and tags that decoding accepts. The default is 64:
    /// 64 nested arrays decode, 65 fail with ``CBORError/Kind/limitExceeded``.
    ///
    /// Decoding into Swift types recurses once per level, so keep this in the low thousands at most.
    public var maxDepth: Int

    /// Creates limits.
    ///
    /// - Parameters:
    ///   - maxInputSize: The largest input in bytes (default 16 MiB).
    ///   - maxDepth: The deepest nesting of arrays, maps and tags (default 64).
    public init(maxInputSize: Int = 16 * 1024 * 1024, maxDepth: Int = 64) {
        self.maxInputSize = maxInputSize
        self.maxDepth = maxDepth
    }

    /// 16 MiB of input and 64 levels of nesting.
    public static let `default` = CBORLimits()
}

// MARK: - Errors

/// An error from reading or writing CBOR.
///
/// ``description`` is one line that a command-line tool can print as it is, for example
/// `truncated input at byte 12: text string needs 40 bytes, 3 remain` or
/// `type mismatch at byte 7 in items[3].count: expected Int, found text string (5 bytes)`.
///
/// ``CBORDecoder`` and ``CBOREncoder`` throw this type for every problem they find themselves and
/// also turn the `DecodingError`s and `EncodingError`s that `Codable` types throw into it; errors of
/// other types thrown by your own `init(from:)` or `encode(to:)` pass through unchanged.
public struct CBORError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, broadly.
    public enum Kind: String, Hashable, Sendable {
        /// The input ends in the middle of a data item, or a declared length exceeds what remains.
        case truncated = "truncated input"
        /// The bytes are not well-formed CBOR: reserved additional information (28–30), a stray
        /// break, an invalid chunk of an indefinite-length string, a two-byte simple value below 32.
        case malformed = "malformed input"
        /// A text string is not valid UTF-8.
        case invalidUTF8 = "invalid UTF-8"
        /// Bytes follow the top-level data item.
        case trailingBytes = "trailing bytes"
        /// A map has the same key twice.
        case duplicateKey = "duplicate map key"
        /// The input is larger, or nests deeper, than ``CBORLimits`` allow.
        case limitExceeded = "limit exceeded"
        /// The data item has another type than the Swift type expects.
        case typeMismatch = "type mismatch"
        /// A non-optional value is null or undefined, or an array has fewer items than expected.
        case valueNotFound = "value not found"
        /// A map lacks a key that a keyed container asked for.
        case keyNotFound = "key not found"
        /// A number does not fit the Swift type (for example 300 for `UInt8`, 1e40 for `Float`).
        case outOfRange = "value out of range"
        /// A value has the right type but cannot be used (a bad date string, a UUID of 15 bytes…).
        case invalidValue = "invalid value"
        /// A value could not be encoded.
        case unencodable = "cannot encode value"
    }

    /// What went wrong, broadly.
    public let kind: Kind
    /// The details, one line, for example `text string needs 40 bytes, 3 remain`.
    public let reason: String
    /// The byte offset in the input of the data item at fault, when known.
    public let offset: Int?
    /// Where in the Swift value the problem is, such as `items[3].count`, or empty.
    public let codingPath: String

    /// Creates an error. Control characters in `reason` and `codingPath` are escaped so that
    /// ``description`` stays on one line.
    public init(_ kind: Kind, _ reason: String, offset: Int? = nil, codingPath: String = "") {
        self.kind = kind
        self.reason = Self.oneLine(reason)
        self.offset = offset
        self.codingPath = Self.oneLine(codingPath)
    }

    /// One line: the kind, the offset and coding path when known, and the reason.
    public var description: String {
        var text = kind.rawValue
        if let offset { text += " at byte \(offset)" }
        if !codingPath.isEmpty { text += " in \(codingPath)" }
        return text + ": " + reason
    }

    static func oneLine(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                out += "\\u{\(String(scalar.value, radix: 16))}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}

// MARK: - Tags

/// The CBOR tag numbers that ``CBOREncoder`` writes and ``CBORDecoder`` reads.
public enum CBORTag {
    /// Tag 1: a `Date` as seconds since 1970-01-01 UTC (an integer or a float).
    public static let epochDate: UInt64 = 1
    /// A private tag (first-come-first-served range): a `Date` as a float64 of seconds since
    /// 2001-01-01 UTC, Foundation's reference date, which is how `Date` stores its value.
    ///
    /// ``CBOREncoder`` uses it only for the `Date`s whose seconds since 1970 cannot be represented
    /// exactly by a float64 (converting to the 1970 base rounds away low bits), so that every `Date`
    /// round-trips exactly; all others are written with tag 1 (``epochDate``). Other CBOR readers
    /// see an unknown tag around a float (Python's `cbor2` gives a `CBORTag`).
    /// The number spells "KVS1" in ASCII (0x4B565331).
    public static let referenceDate: UInt64 = 1_262_698_545
    /// Tag 2: an unsigned bignum, a byte string holding a big-endian magnitude.
    public static let positiveBignum: UInt64 = 2
    /// Tag 3: a negative bignum, a byte string holding n for the value -1 - n.
    public static let negativeBignum: UInt64 = 3
    /// Tag 4: a decimal fraction, an array `[exponent, mantissa]` for mantissa × 10^exponent.
    public static let decimalFraction: UInt64 = 4
    /// Tag 32: a URI as a text string.
    public static let uri: UInt64 = 32
    /// Tag 37: a UUID as a byte string of 16 bytes.
    public static let uuid: UInt64 = 37
    /// Tag 0: a date as an RFC 3339 text string. Read (Python's `cbor2` writes it for `datetime`),
    /// never written.
    public static let dateString: UInt64 = 0
    /// Tag 55799: "self-described CBOR". Read and ignored wherever it appears.
    public static let selfDescribed: UInt64 = 55799
}

// MARK: - Value tree

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

/// One key–value pair of a ``CBORValue/map(_:)``.
public struct CBORMapEntry: Hashable, Sendable {
    /// The key: any data item, usually a text string or an integer.
    public var key: CBORValue
    /// The value.
    public var value: CBORValue

    /// Creates an entry.
    public init(key: CBORValue, value: CBORValue) {
        self.key = key
        self.value = value
    }
}

extension CBORValue {
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
            for byte in b {
                out += byte < 16 ? "0" : ""
                out += String(byte, radix: 16)
            }
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

// MARK: - Reader

/// Reads CBOR from a raw buffer by offset. Every read is bounds-checked and throws ``CBORError``;
/// nothing here traps on any input.
struct CBORReader {
    let base: UnsafeRawPointer
    /// The number of readable bytes; offsets run from 0 to `end`.
    let end: Int

    /// The initial byte and argument of a data item.
    struct Head {
        /// Major type, 0–7.
        let major: UInt8
        /// Additional information, 0–27 or 31.
        let info: UInt8
        /// The argument: a value, a length, a count, a tag number or float bits. 0 when indefinite.
        let argument: UInt64
        /// The offset just after the head.
        let next: Int
        var isIndefinite: Bool { info == 31 }
    }

    init(base: UnsafeRawPointer, end: Int) {
        self.base = base
        self.end = end
    }

    /// Checks the size limit and the well-formedness of the whole input, and returns a reader for it.
    /// Throws what decoding `bytes` would throw for their size, nesting and well-formedness, without
    /// building anything: how writers refuse values that readers would refuse.
    static func check(_ bytes: [UInt8], limits: CBORLimits) throws {
        try bytes.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) throws -> Void in
            _ = try validated(buffer, limits: limits)
        }
    }

    static func validated(_ bytes: UnsafeRawBufferPointer, limits: CBORLimits) throws(CBORError) -> CBORReader {
        guard bytes.count <= limits.maxInputSize else {
            throw CBORError(.limitExceeded, "input is \(bytes.count) bytes, over the maxInputSize limit of \(limits.maxInputSize)")
        }
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            throw CBORError(.truncated, "the input is empty", offset: 0)
        }
        let reader = CBORReader(base: base, end: bytes.count)
        try reader.validate(maxDepth: limits.maxDepth)
        return reader
    }

    @inline(__always)
    func byte(_ offset: Int) -> UInt8 {
        base.load(fromByteOffset: offset, as: UInt8.self)
    }

    /// Reads the head of the data item at `p`.
    @inline(__always)
    func head(at p: Int) throws(CBORError) -> Head {
        guard p >= 0, p < end else {
            throw CBORError(.truncated, "expected a data item, but the input ends", offset: p)
        }
        let initial = byte(p)
        let major = initial >> 5
        let info = initial & 0x1F
        if info < 24 {
            return Head(major: major, info: info, argument: UInt64(info), next: p + 1)
        }
        let size: Int
        switch info {
        case 24: size = 1
        case 25: size = 2
        case 26: size = 4
        case 27: size = 8
        case 31: return Head(major: major, info: info, argument: 0, next: p + 1)
        default:
            throw CBORError(.malformed, "reserved additional information \(info) in initial byte 0x\(Self.hex(initial))", offset: p)
        }
        guard end - p - 1 >= size else {
            throw CBORError(.truncated, "\(Self.majorName(major)) needs \(size) bytes for its argument, \(end - p - 1) remain", offset: p)
        }
        let argument: UInt64
        switch size {
        case 1: argument = UInt64(byte(p + 1))
        case 2: argument = UInt64(UInt16(bigEndian: base.loadUnaligned(fromByteOffset: p + 1, as: UInt16.self)))
        case 4: argument = UInt64(UInt32(bigEndian: base.loadUnaligned(fromByteOffset: p + 1, as: UInt32.self)))
        default: argument = UInt64(bigEndian: base.loadUnaligned(fromByteOffset: p + 1, as: UInt64.self))
        }
        return Head(major: major, info: info, argument: argument, next: p + 1 + size)
    }

    /// The length of a definite-length string whose head is `h` (at `p`), checked against what remains.
    @inline(__always)
    func length(_ h: Head, at p: Int) throws(CBORError) -> Int {
        let remain = end - h.next
        guard h.argument <= UInt64(remain) else {
            throw CBORError(.truncated, "\(Self.majorName(h.major)) needs \(h.argument) bytes, \(remain) remain", offset: p)
        }
        return Int(h.argument)
    }

    /// Whether the item at `p` is null or undefined.
    @inline(__always)
    func isNil(at p: Int) -> Bool {
        p >= 0 && p < end && (byte(p) == 0xF6 || byte(p) == 0xF7)
    }

    /// The head of the first item at `p` that is not a tag (the tags are skipped).
    @inline(__always)
    func untagged(at p: Int) throws(CBORError) -> (head: Head, offset: Int) {
        var q = p
        var h = try head(at: q)
        while h.major == 6 {
            q = h.next
            h = try head(at: q)
        }
        return (h, q)
    }

    // MARK: Well-formedness

    private struct Frame {
        /// Items still to come for a definite-length container; unused when indefinite.
        var remaining: Int
        var indefinite: Bool
        var isMap: Bool
        /// Items seen so far in an indefinite-length map (for the key/value parity check).
        var seen: Int
        var start: Int
    }

    /// Checks that the buffer holds exactly one well-formed data item no deeper than `maxDepth`,
    /// with valid UTF-8 text. Iterative, so no input can exhaust the stack here.
    func validate(maxDepth: Int) throws(CBORError) {
        var stack: [Frame] = []
        stack.reserveCapacity(Swift.min(Swift.max(maxDepth, 0), 16))
        var p = 0
        var started = false
        while true {
            while let top = stack.last, !top.indefinite, top.remaining == 0 { stack.removeLast() }
            if started && stack.isEmpty { break }
            started = true
            if let top = stack.last {
                if top.indefinite {
                    guard p < end else {
                        throw CBORError(.truncated, "indefinite-length \(top.isMap ? "map" : "array") starting at byte \(top.start) has no break (0xFF)", offset: p)
                    }
                    if byte(p) == 0xFF {
                        if top.isMap && top.seen & 1 == 1 {
                            throw CBORError(.malformed, "indefinite-length map starting at byte \(top.start) ends after a key with no value", offset: p)
                        }
                        stack.removeLast()
                        p += 1
                        continue
                    }
                    stack[stack.count - 1].seen += 1
                } else {
                    stack[stack.count - 1].remaining -= 1
                }
            }
            let h = try head(at: p)
            switch h.major {
            case 0, 1:
                if h.isIndefinite {
                    throw CBORError(.malformed, "an integer cannot have indefinite length (initial byte 0x\(Self.hex(byte(p))))", offset: p)
                }
                p = h.next
            case 2, 3:
                p = try validateString(h, at: p)
            case 4, 5:
                guard stack.count < maxDepth else {
                    throw CBORError(.limitExceeded, "nesting is deeper than maxDepth (\(maxDepth))", offset: p)
                }
                let isMap = h.major == 5
                if h.isIndefinite {
                    stack.append(Frame(remaining: 0, indefinite: true, isMap: isMap, seen: 0, start: p))
                } else {
                    let available = UInt64(end - h.next)
                    guard isMap ? h.argument <= available / 2 : h.argument <= available else {
                        throw CBORError(.truncated, "\(isMap ? "map declares \(h.argument) entries" : "array declares \(h.argument) items"), but only \(available) bytes remain", offset: p)
                    }
                    let count = Int(h.argument) * (isMap ? 2 : 1)
                    stack.append(Frame(remaining: count, indefinite: false, isMap: isMap, seen: 0, start: p))
                }
                p = h.next
            case 6:
                if h.isIndefinite {
                    throw CBORError(.malformed, "a tag cannot have indefinite length (initial byte 0xdf)", offset: p)
                }
                guard stack.count < maxDepth else {
                    throw CBORError(.limitExceeded, "nesting is deeper than maxDepth (\(maxDepth))", offset: p)
                }
                stack.append(Frame(remaining: 1, indefinite: false, isMap: false, seen: 0, start: p))
                p = h.next
            default:
                switch h.info {
                case 24 where h.argument < 32:
                    throw CBORError(.malformed, "simple value \(h.argument) must use the one-byte form", offset: p)
                case 31:
                    throw CBORError(.malformed, "unexpected break (0xFF) outside an indefinite-length array, map or string", offset: p)
                default: break
                }
                p = h.next
            }
        }
        guard p == end else {
            throw CBORError(.trailingBytes, "\(end - p) bytes follow the top-level data item", offset: p)
        }
    }

    /// Checks a byte or text string (definite or chunked) and returns the offset after it.
    private func validateString(_ h: Head, at p: Int) throws(CBORError) -> Int {
        let isText = h.major == 3
        if !h.isIndefinite {
            let count = try length(h, at: p)
            if isText { try checkUTF8(from: h.next, count: count) }
            return h.next + count
        }
        var q = h.next
        while true {
            guard q < end else {
                throw CBORError(.truncated, "indefinite-length \(Self.majorName(h.major)) starting at byte \(p) has no break (0xFF)", offset: q)
            }
            if byte(q) == 0xFF { return q + 1 }
            let chunk = try head(at: q)
            guard chunk.major == h.major, !chunk.isIndefinite else {
                throw CBORError(.malformed, "a chunk of an indefinite-length \(Self.majorName(h.major)) must be a definite-length \(Self.majorName(h.major)), found \(describe(chunk))", offset: q)
            }
            let count = try length(chunk, at: q)
            if isText { try checkUTF8(from: chunk.next, count: count) }
            q = chunk.next + count
        }
    }

    private func checkUTF8(from start: Int, count: Int) throws(CBORError) {
        if let bad = Self.firstInvalidUTF8(base, from: start, count: count) {
            throw CBORError(.invalidUTF8, "text string has an invalid UTF-8 sequence starting with 0x\(Self.hex(byte(bad)))", offset: bad)
        }
    }

    /// The offset of the first byte of an invalid UTF-8 sequence in `start ..< start + count`, or nil.
    static func firstInvalidUTF8(_ base: UnsafeRawPointer, from start: Int, count: Int) -> Int? {
        var i = start
        let end = start + count
        while i < end {
            if end - i >= 8 {
                let word = base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                if word & 0x8080_8080_8080_8080 == 0 {
                    i += 8
                    continue
                }
            }
            let b0 = base.load(fromByteOffset: i, as: UInt8.self)
            if b0 < 0x80 {
                i += 1
                continue
            }
            let trailing: Int
            var low: UInt8 = 0x80
            var high: UInt8 = 0xBF
            switch b0 {
            case 0xC2...0xDF: trailing = 1
            case 0xE0: trailing = 2; low = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: trailing = 2
            case 0xED: trailing = 2; high = 0x9F
            case 0xF0: trailing = 3; low = 0x90
            case 0xF1...0xF3: trailing = 3
            case 0xF4: trailing = 3; high = 0x8F
            default: return i
            }
            guard end - i > trailing else { return i }
            let b1 = base.load(fromByteOffset: i + 1, as: UInt8.self)
            guard b1 >= low && b1 <= high else { return i }
            var k = 2
            while k <= trailing {
                guard base.load(fromByteOffset: i + k, as: UInt8.self) & 0xC0 == 0x80 else { return i }
                k += 1
            }
            i += trailing + 1
        }
        return nil
    }

    // MARK: Skipping and reading

    /// The offset just after the data item at `p`. Recursive: use on validated input only, whose
    /// depth is bounded by ``CBORLimits/maxDepth``.
    func skip(_ p: Int) throws(CBORError) -> Int {
        let h = try head(at: p)
        switch h.major {
        case 0, 1, 7:
            return h.next
        case 2, 3:
            if !h.isIndefinite { return h.next + (try length(h, at: p)) }
            var q = h.next
            while true {
                guard q < end else { throw CBORError(.truncated, "indefinite-length string has no break (0xFF)", offset: q) }
                if byte(q) == 0xFF { return q + 1 }
                let chunk = try head(at: q)
                q = chunk.next + (try length(chunk, at: q))
            }
        case 4, 5:
            var q = h.next
            if h.isIndefinite {
                while true {
                    guard q < end else { throw CBORError(.truncated, "indefinite-length container has no break (0xFF)", offset: q) }
                    if byte(q) == 0xFF { return q + 1 }
                    q = try skip(q)
                }
            }
            var i: UInt64 = 0
            while i < h.argument {
                q = try skip(q)
                if h.major == 5 { q = try skip(q) }
                i += 1
            }
            return q
        default:
            return try skip(h.next)
        }
    }

    /// The float value of a major-type-7 head with additional information 25, 26 or 27.
    @inline(__always)
    static func floatValue(_ h: Head) -> Double? {
        guard h.major == 7 else { return nil }
        switch h.info {
        case 25: return halfToDouble(UInt16(truncatingIfNeeded: h.argument))
        case 26: return Double(Float(bitPattern: UInt32(truncatingIfNeeded: h.argument)))
        case 27: return Double(bitPattern: h.argument)
        default: return nil
        }
    }

    /// Converts IEEE 754 binary16 bits to a Double exactly (without the `Float16` type, which is
    /// missing on some platforms).
    static func halfToDouble(_ bits: UInt16) -> Double {
        let exponent = Int((bits >> 10) & 0x1F)
        let fraction = Int(bits & 0x3FF)
        let magnitude: Double
        if exponent == 0 {
            magnitude = Double(fraction) * 0x1p-24
        } else if exponent == 31 {
            magnitude = fraction == 0 ? .infinity : .nan
        } else {
            magnitude = Double(sign: .plus, exponent: exponent - 25, significand: Double(fraction + 1024))
        }
        return bits & 0x8000 != 0 ? -magnitude : magnitude
    }

    /// Calls `body` with the bytes of the byte or text string whose head is `h` (at `p`), contiguous
    /// (chunks of an indefinite-length string are joined), and returns the offset after the string.
    @inline(__always)
    func withStringBytes<R>(_ h: Head, at p: Int, _ body: (UnsafeRawBufferPointer) -> R) throws(CBORError) -> (value: R, next: Int) {
        if !h.isIndefinite {
            let count = try length(h, at: p)
            return (body(UnsafeRawBufferPointer(start: base + h.next, count: count)), h.next + count)
        }
        var joined: [UInt8] = []
        var q = h.next
        while true {
            guard q < end else { throw CBORError(.truncated, "indefinite-length \(Self.majorName(h.major)) has no break (0xFF)", offset: q) }
            if byte(q) == 0xFF { break }
            let chunk = try head(at: q)
            guard chunk.major == h.major, !chunk.isIndefinite else {
                throw CBORError(.malformed, "a chunk of an indefinite-length \(Self.majorName(h.major)) must be a definite-length \(Self.majorName(h.major))", offset: q)
            }
            let count = try length(chunk, at: q)
            joined.append(contentsOf: UnsafeRawBufferPointer(start: base + chunk.next, count: count))
            q = chunk.next + count
        }
        let value = joined.withUnsafeBytes { body($0) }
        return (value, q + 1)
    }

    /// Reads a text string whose head is `h` (at `p`).
    @inline(__always)
    func text(_ h: Head, at p: Int) throws(CBORError) -> (value: String, next: Int) {
        try withStringBytes(h, at: p) { String(decoding: $0, as: UTF8.self) }
    }

    /// Builds the ``CBORValue`` tree of the item at `p`. Recursive: use on validated input.
    func readValue(at p: Int) throws(CBORError) -> (value: CBORValue, next: Int) {
        let h = try head(at: p)
        switch h.major {
        case 0: return (.unsigned(h.argument), h.next)
        case 1: return (.negative(h.argument), h.next)
        case 2:
            let (bytes, next) = try withStringBytes(h, at: p) { [UInt8]($0) }
            return (.bytes(bytes), next)
        case 3:
            let (string, next) = try text(h, at: p)
            return (.text(string), next)
        case 4:
            var items: [CBORValue] = []
            var q = h.next
            if h.isIndefinite {
                while q < end, byte(q) != 0xFF {
                    let (item, next) = try readValue(at: q)
                    items.append(item)
                    q = next
                }
                guard q < end else { throw CBORError(.truncated, "indefinite-length array has no break (0xFF)", offset: q) }
                return (.array(items), q + 1)
            }
            items.reserveCapacity(Int(Swift.min(h.argument, UInt64(end - q))))
            var i: UInt64 = 0
            while i < h.argument {
                let (item, next) = try readValue(at: q)
                items.append(item)
                q = next
                i += 1
            }
            return (.array(items), q)
        case 5:
            var entries: [CBORMapEntry] = []
            var q = h.next
            var starts: [Int] = []
            if h.isIndefinite {
                while q < end, byte(q) != 0xFF {
                    starts.append(q)
                    let (key, afterKey) = try readValue(at: q)
                    let (value, next) = try readValue(at: afterKey)
                    entries.append(CBORMapEntry(key: key, value: value))
                    q = next
                }
                guard q < end else { throw CBORError(.truncated, "indefinite-length map has no break (0xFF)", offset: q) }
                q += 1
            } else {
                entries.reserveCapacity(Int(Swift.min(h.argument, UInt64(end - q) / 2)))
                var i: UInt64 = 0
                while i < h.argument {
                    starts.append(q)
                    let (key, afterKey) = try readValue(at: q)
                    let (value, next) = try readValue(at: afterKey)
                    entries.append(CBORMapEntry(key: key, value: value))
                    q = next
                    i += 1
                }
            }
            try Self.checkDuplicates(entries, starts: starts)
            return (.map(entries), q)
        case 6:
            let (item, next) = try readValue(at: h.next)
            return (.tagged(h.argument, item), next)
        default:
            switch h.info {
            case 20: return (.bool(false), h.next)
            case 21: return (.bool(true), h.next)
            case 22: return (.null, h.next)
            case 23: return (.undefined, h.next)
            case 25, 26, 27: return (.float(Self.floatValue(h) ?? .nan), h.next)
            case 31: throw CBORError(.malformed, "unexpected break (0xFF)", offset: p)
            default: return (.simple(UInt8(truncatingIfNeeded: h.argument)), h.next)
            }
        }
    }

    private static func checkDuplicates(_ entries: [CBORMapEntry], starts: [Int]) throws(CBORError) {
        if entries.count < 2 { return }
        if entries.count <= 16 {
            for i in 1 ..< entries.count {
                for j in 0 ..< i where entries[i].key == entries[j].key {
                    throw CBORError(.duplicateKey, "map has the key \(entries[i].key) twice", offset: starts[i])
                }
            }
            return
        }
        var seen = Set<CBORValue>(minimumCapacity: entries.count)
        for (i, entry) in entries.enumerated() where !seen.insert(entry.key).inserted {
            throw CBORError(.duplicateKey, "map has the key \(entry.key) twice", offset: starts[i])
        }
    }

    // MARK: Descriptions

    static func majorName(_ major: UInt8) -> String {
        switch major {
        case 0: "unsigned integer"
        case 1: "negative integer"
        case 2: "byte string"
        case 3: "text string"
        case 4: "array"
        case 5: "map"
        case 6: "tag"
        default: "simple value or float"
        }
    }

    /// A short description of the item with head `h`, for error messages: `text string (5 bytes)`.
    func describe(_ h: Head) -> String {
        switch h.major {
        case 0: return "unsigned integer \(h.argument)"
        case 1: return "negative integer \(Self.negativeString(h.argument))"
        case 2, 3: return h.isIndefinite ? "indefinite-length \(Self.majorName(h.major))" : "\(Self.majorName(h.major)) (\(h.argument) bytes)"
        case 4: return h.isIndefinite ? "indefinite-length array" : "array of \(h.argument) items"
        case 5: return h.isIndefinite ? "indefinite-length map" : "map of \(h.argument) entries"
        case 6: return "tag \(h.argument)"
        default:
            switch h.info {
            case 20: return "false"
            case 21: return "true"
            case 22: return "null"
            case 23: return "undefined"
            case 25, 26, 27: return "float \(Self.floatValue(h) ?? .nan)"
            case 31: return "break"
            default: return "simple value \(h.argument)"
            }
        }
    }

    /// The decimal text of the negative integer -1 - n.
    static func negativeString(_ n: UInt64) -> String {
        n == .max ? "-18446744073709551616" : "-\(n + 1)"
    }

    static func hex(_ byte: UInt8) -> String {
        (byte < 16 ? "0" : "") + String(byte, radix: 16)
    }
}

// MARK: - Writer

/// Writes CBOR into a buffer allocated to the exact size computed beforehand.
struct CBORWriter {
    private var pointer: UnsafeMutableRawPointer
    private let limit: UnsafeMutableRawPointer

    private init(start: UnsafeMutableRawPointer, count: Int) {
        pointer = start
        limit = start + count
    }

    /// Allocates `size` bytes and lets `body` fill them.
    static func serialize(size: Int, _ body: (inout CBORWriter) -> Void) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
            // Every data item is at least one byte, so the buffer is never empty.
            guard let start = buffer.baseAddress, size > 0 else { return }
            var writer = CBORWriter(start: UnsafeMutableRawPointer(start), count: size)
            body(&writer)
            // A mismatch would be a bug in the size computation, not a property of any input.
            precondition(writer.pointer == writer.limit, "CBOR size computation does not match the bytes written")
            initialized = size
        }
    }

    @inline(__always)
    private mutating func reserve(_ count: Int) {
        precondition(limit - pointer >= count, "CBOR size computation does not match the bytes written")
    }

    /// The size of a head whose argument is `argument`.
    @inline(__always)
    static func headSize(_ argument: UInt64) -> Int {
        argument < 24 ? 1 : argument <= 0xFF ? 2 : argument <= 0xFFFF ? 3 : argument <= 0xFFFF_FFFF ? 5 : 9
    }

    /// The size of a text string item.
    @inline(__always)
    static func textSize(_ s: String) -> Int {
        let count = s.utf8.count
        return headSize(UInt64(count)) + count
    }

    @inline(__always)
    mutating func byte(_ value: UInt8) {
        reserve(1)
        pointer.storeBytes(of: value, as: UInt8.self)
        pointer += 1
    }

    /// Writes a head in its shortest form.
    @inline(__always)
    mutating func head(_ major: UInt8, _ argument: UInt64) {
        let high = major << 5
        if argument < 24 {
            byte(high | UInt8(truncatingIfNeeded: argument))
        } else if argument <= 0xFF {
            reserve(2)
            pointer.storeBytes(of: high | 24, as: UInt8.self)
            pointer.storeBytes(of: UInt8(truncatingIfNeeded: argument), toByteOffset: 1, as: UInt8.self)
            pointer += 2
        } else if argument <= 0xFFFF {
            reserve(3)
            pointer.storeBytes(of: high | 25, as: UInt8.self)
            pointer.storeBytes(of: UInt16(truncatingIfNeeded: argument).bigEndian, toByteOffset: 1, as: UInt16.self)
            pointer += 3
        } else if argument <= 0xFFFF_FFFF {
            reserve(5)
            pointer.storeBytes(of: high | 26, as: UInt8.self)
            pointer.storeBytes(of: UInt32(truncatingIfNeeded: argument).bigEndian, toByteOffset: 1, as: UInt32.self)
            pointer += 5
        } else {
            reserve(9)
            pointer.storeBytes(of: high | 27, as: UInt8.self)
            pointer.storeBytes(of: argument.bigEndian, toByteOffset: 1, as: UInt64.self)
            pointer += 9
        }
    }

    @inline(__always)
    mutating func raw(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        pointer.copyMemory(from: source, byteCount: bytes.count)
        pointer += bytes.count
    }

    @inline(__always)
    mutating func text(_ s: String) {
        var s = s
        s.withUTF8 { utf8 in
            head(3, UInt64(utf8.count))
            raw(UnsafeRawBufferPointer(utf8))
        }
    }

    /// Writes a float64 (0xFB and eight big-endian bytes).
    @inline(__always)
    mutating func double(_ value: Double) {
        reserve(9)
        pointer.storeBytes(of: 0xFB, as: UInt8.self)
        pointer.storeBytes(of: value.bitPattern.bigEndian, toByteOffset: 1, as: UInt64.self)
        pointer += 9
    }
}

// MARK: - 128-bit magnitudes (decimal mantissas)

/// An unsigned 128-bit integer as two words, for `Decimal` mantissas. (`UInt128` needs macOS 15 /
/// iOS 18, which this package does not require everywhere.)
struct CBORMagnitude: Equatable {
    var high: UInt64
    var low: UInt64

    static let zero = CBORMagnitude(high: 0, low: 0)

    var isZero: Bool { high == 0 && low == 0 }

    /// `self = self * 10 + digit`; false (and unchanged) on overflow.
    mutating func multiplyBy10(adding digit: UInt64) -> Bool {
        let lowProduct = low.multipliedFullWidth(by: 10)
        let highProduct = high.multipliedFullWidth(by: 10)
        guard highProduct.high == 0 else { return false }
        let (newHigh, o1) = highProduct.low.addingReportingOverflow(lowProduct.high)
        guard !o1 else { return false }
        let (newLow, o2) = lowProduct.low.addingReportingOverflow(digit)
        let (finalHigh, o3) = newHigh.addingReportingOverflow(o2 ? 1 : 0)
        guard !o3 else { return false }
        high = finalHigh
        low = newLow
        return true
    }

    /// Divides by 10 and returns the remainder.
    mutating func divideBy10() -> UInt64 {
        let highQuotient = high / 10
        let highRemainder = high % 10
        let (lowQuotient, remainder) = (10 as UInt64).dividingFullWidth((high: highRemainder, low: low))
        high = highQuotient
        low = lowQuotient
        return remainder
    }

    /// `self + 1`, or nil on overflow.
    func plusOne() -> CBORMagnitude? {
        let (newLow, carry) = low.addingReportingOverflow(1)
        if !carry { return CBORMagnitude(high: high, low: newLow) }
        let (newHigh, overflow) = high.addingReportingOverflow(1)
        return overflow ? nil : CBORMagnitude(high: newHigh, low: newLow)
    }

    /// `self - 1`; self must not be zero.
    func minusOne() -> CBORMagnitude {
        low == 0 ? CBORMagnitude(high: high &- 1, low: .max) : CBORMagnitude(high: high, low: low - 1)
    }

    /// Big-endian bytes without leading zeros (empty for zero), as bignums carry them.
    var bigEndianBytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        for word in [high, low] {
            for shift in stride(from: 56, through: 0, by: -8) {
                let b = UInt8(truncatingIfNeeded: word >> UInt64(shift))
                if bytes.isEmpty && b == 0 { continue }
                bytes.append(b)
            }
        }
        return bytes
    }

    /// Reads big-endian bytes; nil when the value needs more than 128 bits.
    init?(bigEndian bytes: UnsafeRawBufferPointer) {
        var start = 0
        while start < bytes.count && bytes[start] == 0 { start += 1 }
        guard bytes.count - start <= 16 else { return nil }
        high = 0
        low = 0
        for i in start ..< bytes.count {
            high = (high << 8) | (low >> 56)
            low = (low << 8) | UInt64(bytes[i])
        }
    }

    init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Decimal digits.
    var decimalString: String {
        if high == 0 { return String(low) }
        var digits: [UInt8] = []
        var value = self
        while !value.isZero { digits.append(UInt8(value.divideBy10()) + 0x30) }
        return String(decoding: digits.reversed(), as: UTF8.self)
    }
}

// MARK: - Coding paths (shared by the encoder and decoder)

/// A coding path as a linked list, so that descending into a value costs no array copy.
indirect enum CBORCodingPath {
    case root
    case key(any CodingKey, CBORCodingPath)
    case index(Int, CBORCodingPath)

    func appending(_ key: any CodingKey) -> CBORCodingPath { .key(key, self) }
    func appending(index: Int) -> CBORCodingPath { .index(index, self) }

    var keys: [any CodingKey] {
        var reversed: [any CodingKey] = []
        var node = self
        while true {
            switch node {
            case .root: return reversed.reversed()
            case .key(let key, let parent): reversed.append(key); node = parent
            case .index(let i, let parent): reversed.append(CBORIndexKey(intValue: i)); node = parent
            }
        }
    }

    /// Renders a coding path for people: `items[3].count`.
    static func render(_ keys: [any CodingKey]) -> String {
        var out = ""
        for key in keys {
            if key is CBORIndexKey, let i = key.intValue {
                out += "[\(i)]"
            } else {
                if !out.isEmpty { out += "." }
                out += key.stringValue
            }
        }
        return out
    }
}

/// The coding key of an element of an unkeyed container.
struct CBORIndexKey: CodingKey {
    let intValue: Int?
    var stringValue: String { "Index \(intValue ?? 0)" }
    init(intValue: Int) { self.intValue = intValue }
    init?(stringValue: String) { return nil }
}

/// A coding key made from a string (for `super`).
struct CBORStringKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { return nil }
}
