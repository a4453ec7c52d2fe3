#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The encoding of a collection's keys, as recorded in the catalog.
///
/// Tools such as `kvtool` use it to render and parse keys without the Swift type: `int64`, `int32`,
/// `uint64`, `uint32`, `string`, `uuid`, `day`, `date`, `bytes` and `tuple(a,b,…)`.
public indirect enum KeyEncoding: Hashable, Sendable, CustomStringConvertible {
    case int64, int32, uint64, uint32, string, uuid, day, date, bytes
    case tuple([KeyEncoding])

    /// The encodings without parts, with their names: the one list ``description`` prints from and
    /// ``init(_:)`` parses from (in this order: no name is a prefix of a later one).
    public static let scalars: [(encoding: KeyEncoding, name: String)] = [
        (.int64, "int64"), (.int32, "int32"), (.uint64, "uint64"), (.uint32, "uint32"), (.string, "string"),
        (.uuid, "uuid"), (.day, "day"), (.date, "date"), (.bytes, "bytes"),
    ]

    public var description: String {
        switch self {
        case .tuple(let parts):
            return "tuple(" + parts.map(\.description).joined(separator: ",") + ")"
        // A new case fails to compile here: add it to `scalars` too.
        case .int64, .int32, .uint64, .uint32, .string, .uuid, .day, .date, .bytes:
            for scalar in Self.scalars where scalar.encoding == self { return scalar.name }
            return "unlisted"
        }
    }

    /// The deepest nesting of tuples that ``init(_:)`` accepts: `tuple(tuple(int64,string),day)` is
    /// 2 levels. Catalog entries are read from the store, so a hostile or corrupt one must not be able
    /// to recurse without bound.
    public static let maxNesting = 16

    /// Parses a ``description`` back, or returns `nil` (also for tuples nested deeper than
    /// ``maxNesting``).
    public init?(_ text: String) {
        var parser = Substring(text)
        guard let encoding = Self.parse(&parser, depth: 0), parser.isEmpty else { return nil }
        self = encoding
    }

    private static func parse(_ text: inout Substring, depth: Int) -> KeyEncoding? {
        for scalar in scalars where text.hasPrefix(scalar.name) {
            text = text.dropFirst(scalar.name.count)
            return scalar.encoding
        }
        guard depth < maxNesting, text.hasPrefix("tuple(") else { return nil }
        text = text.dropFirst(6)
        var parts: [KeyEncoding] = []
        while true {
            guard let part = parse(&text, depth: depth + 1) else { return nil }
            parts.append(part)
            if text.hasPrefix(",") { text = text.dropFirst(); continue }
            if text.hasPrefix(")") { text = text.dropFirst(); break }
            return nil
        }
        return parts.count >= 2 ? .tuple(parts) : nil
    }

    // MARK: - Rendering stored keys

    /// Decodes stored key bytes into a JSON-compatible value: a number, a string, or (for tuples) an
    /// array of those. Days render as `"YYYY-MM-DD"`, dates as ISO 8601, bytes as hex.
    public func render(_ bytes: [UInt8]) throws(KeyDecodingError) -> KeyValue {
        let result: Result<KeyValue, KeyDecodingError> = bytes.withUnsafeBytes { buffer in
            var reader = KeyReader(buffer)
            do throws(KeyDecodingError) {
                let value = try render(&reader, terminal: true)
                guard reader.isAtEnd else { throw KeyDecodingError("\(reader.remaining) unexpected trailing bytes") }
                return .success(value)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Decodes the key at the start of `bytes` in its non-terminal form, as an index entry begins
    /// with its index key, and says how many bytes it took (the primary key follows).
    public func renderPrefix(_ bytes: [UInt8]) throws(KeyDecodingError) -> (value: KeyValue, length: Int) {
        let result: Result<(KeyValue, Int), KeyDecodingError> = bytes.withUnsafeBytes { buffer in
            var reader = KeyReader(buffer)
            do throws(KeyDecodingError) {
                let value = try render(&reader, terminal: false)
                return .success((value, reader.offset))
            } catch {
                return .failure(error)
            }
        }
        let (value, length) = try result.get()
        return (value, length)
    }

    private func render(_ reader: inout KeyReader, terminal: Bool) throws(KeyDecodingError) -> KeyValue {
        switch self {
        case .int64: .integer(Int64(try Int64.decodeKey(from: &reader, terminal: terminal)))
        case .int32: .integer(Int64(try Int32.decodeKey(from: &reader, terminal: terminal)))
        case .uint64: .unsigned(try UInt64.decodeKey(from: &reader, terminal: terminal))
        case .uint32: .unsigned(UInt64(try UInt32.decodeKey(from: &reader, terminal: terminal)))
        case .string: .text(try String.decodeKey(from: &reader, terminal: terminal))
        case .uuid: .text(try UUID.decodeKey(from: &reader, terminal: terminal).uuidString)
        case .day: .text(try LogicalDay.decodeKey(from: &reader, terminal: terminal).description)
        case .date: .text(Self.dateKeyText(try Date.decodeKey(from: &reader, terminal: terminal)))
        case .bytes: .text(try ByteKey.decodeKey(from: &reader, terminal: terminal).description)
        case .tuple(let parts):
            .array(try parts.enumerated().map { (i, part) throws(KeyDecodingError) -> KeyValue in
                try part.render(&reader, terminal: terminal && i == parts.count - 1)
            })
        }
    }

    // MARK: - Parsing keys typed by people

    /// Encodes a key given as text: a plain value for scalar encodings (`42`, `2026-11-21`, a UUID,
    /// an ISO 8601 date or seconds since 1970, hex for bytes), and a JSON array for tuples
    /// (`["6F9619FF-8B86-D011-B42D-00C04FC964FF", "2026-01-31T00:00:00Z"]`).
    package func parse(_ text: String) throws(KeyDecodingError) -> [UInt8] {
        var bytes: [UInt8] = []
        if case .tuple(let parts) = self {
            guard case .array(let array)? = try? JSONDecoder().decode(TupleKeyText.self, from: Data(text.utf8)) else {
                throw KeyDecodingError("a \(self) key is a JSON array of \(parts.count) values")
            }
            try Self.appendTuple(parts, array, to: &bytes, terminal: true)
            return bytes
        }
        try append(text, to: &bytes, terminal: true)
        return bytes
    }

    /// Appends the components of a tuple given as a JSON array; a nested tuple is a nested array, as
    /// ``render(_:)`` writes it.
    private static func appendTuple(_ parts: [KeyEncoding], _ array: [TupleKeyText], to bytes: inout [UInt8],
                                    terminal: Bool) throws(KeyDecodingError) {
        guard array.count == parts.count else {
            throw KeyDecodingError("a \(KeyEncoding.tuple(parts)) key has \(parts.count) components, got \(array.count)")
        }
        for (i, (part, element)) in zip(parts, array).enumerated() {
            let last = terminal && i == parts.count - 1
            if case .tuple(let inner) = part {
                guard case .array(let nested) = element else {
                    throw KeyDecodingError("component \(i + 1) of the key must be a JSON array of \(inner.count) values")
                }
                try appendTuple(inner, nested, to: &bytes, terminal: last)
                continue
            }
            guard case .scalar(let string) = element else {
                throw KeyDecodingError("component \(i + 1) of the key must be a string or a number")
            }
            try part.append(string, to: &bytes, terminal: last)
        }
    }

    private func append(_ text: String, to bytes: inout [UInt8], terminal: Bool) throws(KeyDecodingError) {
        func fail(_ what: String) -> KeyDecodingError { KeyDecodingError("\(KVStoreError.quote(text)) is not \(what)") }
        switch self {
        case .int64:
            guard let v = Int64(text) else { throw fail("a 64-bit integer") }
            v.encodeKey(into: &bytes, terminal: terminal)
        case .int32:
            guard let v = Int32(text) else { throw fail("a 32-bit integer") }
            v.encodeKey(into: &bytes, terminal: terminal)
        case .uint64:
            guard let v = UInt64(text) else { throw fail("an unsigned 64-bit integer") }
            v.encodeKey(into: &bytes, terminal: terminal)
        case .uint32:
            guard let v = UInt32(text) else { throw fail("an unsigned 32-bit integer") }
            v.encodeKey(into: &bytes, terminal: terminal)
        case .string:
            text.encodeKey(into: &bytes, terminal: terminal)
        case .uuid:
            guard let v = UUID(uuidString: text) else { throw fail("a UUID") }
            v.encodeKey(into: &bytes, terminal: terminal)
        case .day:
            guard let v = LogicalDay(text) else { throw fail("a day (YYYY-MM-DD)") }
            v.encodeKey(into: &bytes, terminal: terminal)
        case .date:
            if let exact = Self.exactDateKey(text) {
                // What dateKeyText writes, read back to the same bits (see KeyEncoding+DateText).
                bytes.append(contentsOf: exact)
            } else if let seconds = Double(text) {
                Date(timeIntervalSince1970: seconds).encodeKey(into: &bytes, terminal: terminal)
            } else if let v = Self.parseISO8601(text) {
                v.encodeKey(into: &bytes, terminal: terminal)
            } else {
                throw fail("a date (ISO 8601 or seconds since 1970)")
            }
        case .bytes:
            guard let v = Hex.decode(text.utf8) else { throw fail("hex bytes") }
            ByteKey(v).encodeKey(into: &bytes, terminal: terminal)
        case .tuple:
            // Tuples are parsed from JSON arrays by appendTuple, nested ones included.
            throw KeyDecodingError("a nested tuple key is a JSON array")
        }
    }

    /// 0001-01-01T00:00:00Z and 10000-01-01T00:00:00Z in milliseconds since 1970: the dates that
    /// ISO 8601 text with a four-digit year can name.
    static let iso8601Milliseconds: Range<Double> = -62_135_596_800_000 ..< 253_402_300_800_000

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ`, rounded to the millisecond, for dates from year 1 to 9999; outside
    /// that (and for the infinite and NaN values that eight arbitrary key bytes can hold) the seconds
    /// since 1970 as a number, which ``parse(_:)`` reads back, instead of a formatter's made-up date.
    ///
    /// Written here rather than with `Date.ISO8601FormatStyle`, which rounds the fraction without
    /// carrying: it writes 23:59:59.9996 as `23:59:59.1000`, which reads back as 59.1 seconds.
    static func iso8601(_ date: Date) -> String {
        let seconds = date.timeIntervalSince1970
        let rounded = (seconds * 1000).rounded()
        guard iso8601Milliseconds.contains(rounded) else { return "\(seconds)" }
        let milliseconds = Int64(rounded)
        let dayMilliseconds: Int64 = 86_400_000
        let days = milliseconds >= 0 ? milliseconds / dayMilliseconds : -((-milliseconds + dayMilliseconds - 1) / dayMilliseconds)
        let inDay = Int(milliseconds - days * dayMilliseconds)
        let (year, month, day) = LogicalDay.civilFromDays(Int(days))
        func pad(_ value: Int, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + "T" + pad(inDay / 3_600_000, 2) + ":"
            + pad(inDay / 60_000 % 60, 2) + ":" + pad(inDay / 1000 % 60, 2) + "." + pad(inDay % 1000, 3) + "Z"
    }

    package static func parseISO8601(_ text: String) -> Date? {
        // What iso8601(_:) writes is RFC 3339, read here in the proleptic Gregorian calendar as it was
        // written (and as LogicalDay counts days): Foundation's parser switches to the Julian calendar
        // before 1582-10-15, which moved the year 20 by two days. Foundation's parser stays for the
        // other ISO 8601 forms people type.
        var utf8 = text
        if let seconds = utf8.withUTF8({ CBORReader.parseRFC3339(UnsafeRawBufferPointer($0)) }) {
            return Date(timeIntervalSince1970: seconds)
        }
        if let d = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return d }
        return try? Date.ISO8601FormatStyle().parse(text)
    }

}

/// A decoded key, ready to print or to serialise as JSON.
public indirect enum KeyValue: Hashable, Sendable, CustomStringConvertible {
    case integer(Int64)
    case unsigned(UInt64)
    case text(String)
    case array([KeyValue])

    /// The key as JSON: integers as numbers, text as strings, tuples as arrays.
    public var json: JSONValue {
        switch self {
        case .integer(let v): .integer(v)
        case .unsigned(let v): .integer(v)
        case .text(let v): .string(v)
        case .array(let v): .array(v.map(\.json))
        }
    }

    /// Plain text for scalars; a JSON array for tuples.
    public var description: String {
        switch self {
        case .integer(let v): "\(v)"
        case .unsigned(let v): "\(v)"
        case .text(let v): v
        case .array(let parts):
            "[" + parts.map { part in
                if case .text(let s) = part { return JSONText.quoted(s) }
                return part.description
            }.joined(separator: ", ") + "]"
        }
    }
}

/// A component of a tuple key typed as JSON: a string or a number (kept as the text it was written
/// as, as far as JSON allows), a nested array for a nested tuple, or anything else (`true`, `null`,
/// an object), which no component accepts.
private enum TupleKeyText: Decodable {
    case scalar(String)
    case array([TupleKeyText])
    case other

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() || (try? container.decode(Bool.self)) != nil { self = .other }
        else if let s = try? container.decode(String.self) { self = .scalar(s) }
        else if let n = try? container.decode(Int64.self) { self = .scalar(String(n)) }
        else if let n = try? container.decode(UInt64.self) { self = .scalar(String(n)) }
        else if let d = try? container.decode(Double.self) { self = .scalar(d.description) }
        else if let array = try? container.decode([TupleKeyText].self) { self = .array(array) }
        else { self = .other }
    }
}
