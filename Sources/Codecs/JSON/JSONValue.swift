#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The package's one JSON value: objects keep their keys in the order they were given, for output
/// whose key order is part of the format (`JSONEncoder` can only keep its own order or sort the keys).
/// Exports, `kvtool`'s output, dumps and stored CBOR shown as JSON (``init(cbor:)``) are all built as
/// a `JSONValue` and written by ``JSONWriter``.
///
/// Literals build values directly; an object literal keeps the order in which it is written:
///
/// ```swift
/// let cycle: JSONValue = ["type": "monthly", "interval": 1]
/// let event: JSONValue = ["id": .string(id), "amount": .number(1200), "memo": nil]
/// try JSONWriter().render(event)   // {"id": "…", "amount": 1200, "memo": null} (laid out by JSONWriter)
/// ```
///
/// Numbers are `Decimal`, written exactly (see ``DecimalText``), or `Double` (``float(_:)``), written
/// as the shortest text that reads back as the same `Double`. Keys must be unique within an object:
/// ``JSONWriter/render(_:)`` throws ``ExportError/duplicateKey(_:path:)`` otherwise.
public enum JSONValue: Hashable, Sendable {
    case null
    case bool(Bool)
    case number(Decimal)
    /// A binary floating-point number: `1.5`, `3.0` (an integral value below 10^15 keeps its `.0`),
    /// `1e+16`. A non-finite one cannot be written: ``JSONWriter/render(_:)`` throws
    /// ``ExportError/notANumber(path:)``.
    case float(Double)
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

    /// An exact integer: `.number(Decimal(n))`.
    public static func integer(_ n: some BinaryInteger) -> JSONValue {
        if let small = Int64(exactly: n) { return .number(Decimal(small)) }
        if let large = UInt64(exactly: n) { return .number(Decimal(large)) }
        return .number(Decimal(string: String(n)) ?? .nan)
    }

    /// The value of an object's member `key`, or `nil` when there is none or this is not an object.
    /// Setting one replaces the member of that key in place or appends a new one; setting `nil`
    /// removes it. Setting a member of a value that is not an object does nothing.
    public subscript(key: String) -> JSONValue? {
        get {
            guard case .object(let members) = self else { return nil }
            return members.first { $0.key == key }?.value
        }
        set {
            guard case .object(var members) = self else { return }
            if let index = members.firstIndex(where: { $0.key == key }) {
                if let newValue { members[index].value = newValue } else { members.remove(at: index) }
            } else if let newValue {
                members.append(Member(key, newValue))
            }
            self = .object(members)
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
