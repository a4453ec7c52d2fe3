#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A JSON value whose objects keep their keys in the order they were given, for exports whose key
/// order is part of the format (`JSONEncoder` can only keep its own order or sort the keys).
///
/// Literals build values directly; an object literal keeps the order in which it is written:
///
/// ```swift
/// let cycle: JSONValue = ["type": "monthly", "interval": 1]
/// let event: JSONValue = ["id": .string(id), "amount": .number(1200), "memo": nil]
/// try JSONWriter().render(event)   // {"id": "…", "amount": 1200, "memo": null} (laid out by JSONWriter)
/// ```
///
/// Numbers are `Decimal`, written exactly (see ``DecimalText``). Keys must be unique within an object:
/// ``JSONWriter/render(_:)`` throws ``ExportError/duplicateKey(_:path:)`` otherwise.
public enum JSONValue: Hashable, Sendable {
    case null
    case bool(Bool)
    case number(Decimal)
    case string(String)
    case array([JSONValue])
    /// Members in the order they are written.
    case object([Member])

    /// One key and its value in a ``JSONValue/object(_:)``.
    public struct Member: Hashable, Sendable {
        public var key: String
        public var value: JSONValue

        public init(_ key: String, _ value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    /// Whether the value is neither an array nor an object.
    public var isScalar: Bool {
        switch self {
        case .array, .object: false
        default: true
        }
    }

    /// `.string(text)`, or `.null` when `text` is `nil`.
    public static func string(orNull text: String?) -> JSONValue {
        text.map { .string($0) } ?? .null
    }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .number(Decimal(value)) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// An object with the members in the order written.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(elements.map { Member($0.0, $0.1) })
    }
}
