#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension JSONValue {
    /// The JSON of an `Encodable` value, so that a typed answer (a `Codable` struct) is written by the
    /// same ``JSONWriter`` as everything else.
    ///
    /// Members come in the order the type encodes them (a synthesized `Encodable` follows the
    /// declaration). A `nil` optional is written as `null`, not left out as `JSONEncoder` leaves it:
    /// an answer's shape does not depend on its values. Integers and `Decimal`s are exact numbers, `Double`s
    /// and `Float`s ``float(_:)``, a `Date` an ISO 8601 string in UTC to the second
    /// (`2026-11-21T09:00:00Z`, as `JSONEncoder`'s `.iso8601` writes it), and a `JSONValue` inside the
    /// value is taken as it is. Other types encode as their `Encodable` conformance says.
    ///
    /// ```swift
    /// struct Answer: Encodable { var transaction: Int; var deleted: Bool }
    /// try JSONValue(encoding: Answer(transaction: 7, deleted: true))   // ["transaction": 7, "deleted": true]
    /// ```
    package init(encoding value: some Encodable) throws {
        let slot = Slot()
        try slot.encode(value, codingPath: [])
        self = slot.resolved()
    }
}

/// Where one encoded value goes: filled by the containers the value asks for, resolved at the end.
private final class Slot {
    enum Content {
        /// Nothing encoded yet (a value that encodes nothing becomes `{}`, as with `JSONEncoder`).
        case empty
        case value(JSONValue)
        case object([(key: String, slot: Slot)])
        case array([Slot])
    }

    var content = Content.empty

    func resolved() -> JSONValue {
        switch content {
        case .empty: [:]
        case .value(let value): value
        case .object(let members): .object(members.map { JSONValue.Member($0.key, $0.slot.resolved()) })
        case .array(let elements): .array(elements.map { $0.resolved() })
        }
    }

    func encode<T: Encodable>(_ value: T, codingPath: [any CodingKey]) throws {
        switch value {
        case let json as JSONValue: content = .value(json)
        case let decimal as Decimal: content = .value(.number(decimal))
        case let date as Date: content = .value(.string(Date.ISO8601FormatStyle().format(date)))
        default: try value.encode(to: SlotEncoder(slot: self, codingPath: codingPath))
        }
    }

    /// A new member `key` (an object is made of what was here if it was not one). A key encoded twice
    /// keeps its place and takes the later value.
    func member(_ key: String) -> Slot {
        var members: [(key: String, slot: Slot)] = []
        if case .object(let existing) = content { members = existing }
        content = .empty  // (so that the array below is not shared, and grows in place)
        let slot = Slot()
        if let index = members.firstIndex(where: { $0.key == key }) {
            members[index].slot = slot
        } else {
            members.append((key, slot))
        }
        content = .object(members)
        return slot
    }

    /// A new last element (an array is made of what was here if it was not one).
    func element() -> Slot {
        var elements: [Slot] = []
        if case .array(let existing) = content { elements = existing }
        content = .empty  // (so that the array below is not shared, and grows in place)
        let slot = Slot()
        elements.append(slot)
        content = .array(elements)
        return slot
    }

    var count: Int {
        if case .array(let elements) = content { return elements.count }
        return 0
    }
}

private struct IndexKey: CodingKey {
    var stringValue: String { "\(intValue ?? 0)" }
    var intValue: Int?
    init(_ index: Int) { intValue = index }
    init?(stringValue: String) { nil }
    init?(intValue: Int) { self.intValue = intValue }
}

private struct SlotEncoder: Encoder {
    let slot: Slot
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if case .object = slot.content {} else { slot.content = .object([]) }
        return KeyedEncodingContainer(KeyedSlotContainer<Key>(slot: slot, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if case .array = slot.content {} else { slot.content = .array([]) }
        return UnkeyedSlotContainer(slot: slot, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleSlotContainer(slot: slot, codingPath: codingPath)
    }
}

private struct SingleSlotContainer: SingleValueEncodingContainer {
    let slot: Slot
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws { slot.content = .value(.null) }
    mutating func encode(_ value: Bool) throws { slot.content = .value(.bool(value)) }
    mutating func encode(_ value: String) throws { slot.content = .value(.string(value)) }
    mutating func encode(_ value: Double) throws { slot.content = .value(.float(value)) }
    mutating func encode(_ value: Float) throws { slot.content = .value(.float(Double(value))) }
    mutating func encode(_ value: Int) throws { slot.content = .value(.integer(value)) }
    mutating func encode(_ value: Int8) throws { slot.content = .value(.integer(value)) }
    mutating func encode(_ value: Int16) throws { slot.content = .value(.integer(value)) }
    mutating func encode(_ value: Int32) throws { slot.content = .value(.integer(value)) }
    mutating func encode(_ value: Int64) throws { slot.content = .value(.integer(value)) }
    mutating func encode(_ value: UInt) throws { slot.content = .value(.integer(value)) }
    mutating func encode(_ value: UInt8) throws { slot.content = .value(.integer(value)) }
    mutating func encode(_ value: UInt16) throws { slot.content = .value(.integer(value)) }
    mutating func encode(_ value: UInt32) throws { slot.content = .value(.integer(value)) }
    mutating func encode(_ value: UInt64) throws { slot.content = .value(.integer(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws { try slot.encode(value, codingPath: codingPath) }
}

private struct KeyedSlotContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let slot: Slot
    let codingPath: [any CodingKey]

    private func single(_ key: Key) -> SingleSlotContainer {
        SingleSlotContainer(slot: slot.member(key.stringValue), codingPath: codingPath + [key])
    }

    mutating func encodeNil(forKey key: Key) throws { var c = single(key); try c.encodeNil() }
    mutating func encode(_ value: Bool, forKey key: Key) throws { var c = single(key); try c.encode(value) }
    mutating func encode(_ value: String, forKey key: Key) throws { var c = single(key); try c.encode(value) }
    mutating func encode(_ value: Double, forKey key: Key) throws { var c = single(key); try c.encode(value) }
    mutating func encode(_ value: Float, forKey key: Key) throws { var c = single(key); try c.encode(value) }
    mutating func encode(_ value: Int, forKey key: Key) throws { var c = single(key); try c.encode(value) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { var c = single(key); try c.encode(value) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { var c = single(key); try c.encode(value) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { var c = single(key); try c.encode(value) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { var c = single(key); try c.encode(value) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { var c = single(key); try c.encode(value) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { var c = single(key); try c.encode(value) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { var c = single(key); try c.encode(value) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { var c = single(key); try c.encode(value) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { var c = single(key); try c.encode(value) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try slot.member(key.stringValue).encode(value, codingPath: codingPath + [key])
    }

    // A nil optional is null, not left out.
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { try encode(value, forKey: key) }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { try encode(value, forKey: key) }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { try encode(value, forKey: key) }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws { try encode(value, forKey: key) }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { try encode(value, forKey: key) }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws { try encode(value, forKey: key) }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws { try encode(value, forKey: key) }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws { try encode(value, forKey: key) }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { try encode(value, forKey: key) }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws { try encode(value, forKey: key) }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws { try encode(value, forKey: key) }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws { try encode(value, forKey: key) }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws { try encode(value, forKey: key) }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws { try encode(value, forKey: key) }
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws { try encode(value, forKey: key) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        SlotEncoder(slot: slot.member(key.stringValue), codingPath: codingPath + [key]).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        SlotEncoder(slot: slot.member(key.stringValue), codingPath: codingPath + [key]).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        SlotEncoder(slot: slot.member("super"), codingPath: codingPath)
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        SlotEncoder(slot: slot.member(key.stringValue), codingPath: codingPath + [key])
    }
}

private struct UnkeyedSlotContainer: UnkeyedEncodingContainer {
    let slot: Slot
    let codingPath: [any CodingKey]
    var count: Int { slot.count }

    private func next() -> (Slot, [any CodingKey]) {
        let path = codingPath + [IndexKey(slot.count)]
        return (slot.element(), path)
    }

    private func single() -> SingleSlotContainer {
        let (element, path) = next()
        return SingleSlotContainer(slot: element, codingPath: path)
    }

    mutating func encodeNil() throws { var c = single(); try c.encodeNil() }
    mutating func encode(_ value: Bool) throws { var c = single(); try c.encode(value) }
    mutating func encode(_ value: String) throws { var c = single(); try c.encode(value) }
    mutating func encode(_ value: Double) throws { var c = single(); try c.encode(value) }
    mutating func encode(_ value: Float) throws { var c = single(); try c.encode(value) }
    mutating func encode(_ value: Int) throws { var c = single(); try c.encode(value) }
    mutating func encode(_ value: Int8) throws { var c = single(); try c.encode(value) }
    mutating func encode(_ value: Int16) throws { var c = single(); try c.encode(value) }
    mutating func encode(_ value: Int32) throws { var c = single(); try c.encode(value) }
    mutating func encode(_ value: Int64) throws { var c = single(); try c.encode(value) }
    mutating func encode(_ value: UInt) throws { var c = single(); try c.encode(value) }
    mutating func encode(_ value: UInt8) throws { var c = single(); try c.encode(value) }
    mutating func encode(_ value: UInt16) throws { var c = single(); try c.encode(value) }
    mutating func encode(_ value: UInt32) throws { var c = single(); try c.encode(value) }
    mutating func encode(_ value: UInt64) throws { var c = single(); try c.encode(value) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        let (element, path) = next()
        try element.encode(value, codingPath: path)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let (element, path) = next()
        return SlotEncoder(slot: element, codingPath: path).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let (element, path) = next()
        return SlotEncoder(slot: element, codingPath: path).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        let (element, path) = next()
        return SlotEncoder(slot: element, codingPath: path)
    }
}

extension JSONValue: Encodable {
    /// Encodes the value through any encoder's containers: objects keyed by their members' keys in
    /// order, numbers as `Decimal`, floats as `Double`.
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let b):
            var container = encoder.singleValueContainer()
            try container.encode(b)
        case .number(let n):
            var container = encoder.singleValueContainer()
            try container.encode(n)
        case .float(let d):
            var container = encoder.singleValueContainer()
            try container.encode(d)
        case .string(let s):
            var container = encoder.singleValueContainer()
            try container.encode(s)
        case .array(let elements):
            var container = encoder.unkeyedContainer()
            for element in elements { try container.encode(element) }
        case .object(let members):
            var container = encoder.container(keyedBy: MemberKey.self)
            for member in members { try container.encode(member.value, forKey: MemberKey(stringValue: member.key)) }
        }
    }

    private struct MemberKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}
