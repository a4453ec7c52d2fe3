/// The encoding of a collection's values, as recorded in the catalog (``CatalogEntry/valueEncoding``):
/// what ``KeyEncoding`` is to keys.
///
/// Parsed once from the catalog's text (``init(_:)``), so that every place that renders, checks or
/// writes values switches over these cases, and a new codec of the library is a compile error in each
/// switch that must handle it. Stored and encoded as its ``description``: `cbor`, `bytes`, `fixed(N)`.
public enum ValueEncoding: Hashable, Sendable, CustomStringConvertible, Codable {
    /// CBOR of a `Codable` value (``CBORCodec``).
    case cbor
    /// The bytes as given (``RawBytesCodec``).
    case bytes
    /// The memory of a trivial struct of `size` bytes (``FixedLayoutCodec``): `fixed(N)`, N ≥ 1.
    case fixed(size: Int)
    /// Any other name: another codec's ``ValueCodec/encodingName``, or text no codec writes (a
    /// malformed `fixed(…)` among them). Tools show such values as bytes; ``CatalogEntry/problem``
    /// says which names a catalog may hold.
    case other(String)

    /// Parses a catalog's value encoding; a name that is not `cbor`, `bytes` or `fixed(N)` with N a
    /// canonical decimal from 1 is ``other(_:)``.
    public init(_ name: String) {
        switch name {
        case "cbor": self = .cbor
        case "bytes": self = .bytes
        default:
            if name.hasPrefix("fixed("), name.hasSuffix(")"), name.utf8.count <= 26 {
                let digits = name.dropFirst(6).dropLast()
                if !digits.isEmpty, digits.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
                   let size = Int(digits), size >= 1, "fixed(\(size))" == name {
                    self = .fixed(size: size)
                    return
                }
            }
            self = .other(name)
        }
    }

    public var description: String {
        switch self {
        case .cbor: "cbor"
        case .bytes: "bytes"
        case .fixed(let size): "fixed(\(size))"
        case .other(let name): name
        }
    }

    /// The layout's size for ``fixed(size:)``; otherwise `nil`.
    public var fixedSize: Int? {
        if case .fixed(let size) = self { size } else { nil }
    }

    public init(from decoder: any Decoder) throws {
        self.init(try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
