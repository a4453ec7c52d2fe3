#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A JSON value, as the `customData` of a notification carries it (seed 003 §4: "JSON
/// serializable"), kept typed so it can be stored, compared and printed back exactly.
public indirect enum CustomDataValue: Codable, Hashable, Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([CustomDataValue])
    case object([String: CustomDataValue])

    /// The deepest nesting accepted, so that a payload can always be stored and read back.
    public static let maxDepth = 32

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let v = try? container.decode(Bool.self) { self = .bool(v) }
        else if let v = try? container.decode(Int64.self) { self = .integer(v) }
        else if let v = try? container.decode(Double.self) { self = .double(v) }
        else if let v = try? container.decode(String.self) { self = .string(v) }
        else if let v = try? container.decode([CustomDataValue].self) { self = .array(v) }
        else if let v = try? container.decode([String: CustomDataValue].self) { self = .object(v) }
        else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a JSON value")
        }
        guard depth <= Self.maxDepth else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "nested deeper than \(Self.maxDepth) levels")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let v): try container.encode(v)
        case .integer(let v): try container.encode(v)
        case .double(let v): try container.encode(v)
        case .string(let v): try container.encode(v)
        case .array(let v): try container.encode(v)
        case .object(let v): try container.encode(v)
        }
    }

    /// Foundation's `NSNull`, when the process has loaded Foundation (Workloads links only
    /// FoundationEssentials, so the type is looked up by its mangled name, once).
    private static let nsNullType: Any.Type? = _typeByName("10Foundation6NSNullC")

    private static func isNSNull(_ value: Any) -> Bool {
        guard let nsNullType else { return false }
        return type(of: value) == nsNullType
    }

    /// Converts a value of an iOS `userInfo` dictionary (strings, numbers, booleans, arrays and
    /// dictionaries with string keys); `nil` for anything else, which is not JSON.
    public init?(any value: Any, depth: Int = 0) {
        guard depth <= Self.maxDepth else { return nil }
        switch value {
        case _ where Self.isNSNull(value): self = .null
        case let v as Bool: self = .bool(v)
        case let v as Int: self = .integer(Int64(v))
        case let v as Int64: self = .integer(v)
        case let v as Double: self = v.isFinite ? .double(v) : .null
        case let v as String: self = .string(v)
        case let v as [Any]:
            var items: [CustomDataValue] = []
            for item in v {
                guard let converted = CustomDataValue(any: item, depth: depth + 1) else { return nil }
                items.append(converted)
            }
            self = .array(items)
        case let v as [String: Any]:
            var members: [String: CustomDataValue] = [:]
            for (key, item) in v {
                guard let converted = CustomDataValue(any: item, depth: depth + 1) else { return nil }
                members[key] = converted
            }
            self = .object(members)
        default: return nil
        }
    }

    var depth: Int {
        switch self {
        case .array(let items): 1 + (items.map(\.depth).max() ?? 0)
        case .object(let members): 1 + (members.values.map(\.depth).max() ?? 0)
        default: 0
        }
    }

    public subscript(key: String) -> CustomDataValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    public var stringValue: String? {
        if case .string(let v) = self { return v }
        return nil
    }

    /// The JSON kind, for error messages.
    var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .integer, .double: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// Compact JSON text, keys sorted.
    public var jsonText: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "null"
    }
}
