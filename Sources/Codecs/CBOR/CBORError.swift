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
        return Escaping.escape(text, quoting: false, shortForms: true, style: .swift)
    }
}
