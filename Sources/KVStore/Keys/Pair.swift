/// A two-part key, ordered by `first` and then by `second`: Swift tuples cannot conform to protocols,
/// so composite keys use `Pair` and ``Triple``.
///
/// ```swift
/// // BillingEvent by (subscriptionId, billedAt): one subscription's events are a prefix scan.
/// let key = Pair(subscriptionID, billedAt)
/// ```
public struct Pair<First: OrderedKey, Second: OrderedKey>: OrderedKey, Hashable, CustomStringConvertible
where First: Hashable, Second: Hashable {
    public var first: First
    public var second: Second

    public init(_ first: First, _ second: Second) {
        self.first = first
        self.second = second
    }

    public static func < (lhs: Pair, rhs: Pair) -> Bool {
        (lhs.first, lhs.second) < (rhs.first, rhs.second)
    }

    public static var keyEncoding: KeyEncoding { .tuple([First.keyEncoding, Second.keyEncoding]) }

    public func encodeKey(into bytes: inout [UInt8], terminal: Bool) {
        first.encodeKey(into: &bytes, terminal: false)
        second.encodeKey(into: &bytes, terminal: terminal)
    }

    public static func decodeKey(from reader: inout KeyReader, terminal: Bool) throws(KeyDecodingError) -> Pair {
        let first = try First.decodeKey(from: &reader, terminal: false)
        return Pair(first, try Second.decodeKey(from: &reader, terminal: terminal))
    }

    public var description: String { "(\(first), \(second))" }
}

/// A three-part key, ordered by `first`, then `second`, then `third`.
public struct Triple<First: OrderedKey, Second: OrderedKey, Third: OrderedKey>: OrderedKey, Hashable, CustomStringConvertible
where First: Hashable, Second: Hashable, Third: Hashable {
    public var first: First
    public var second: Second
    public var third: Third

    public init(_ first: First, _ second: Second, _ third: Third) {
        self.first = first
        self.second = second
        self.third = third
    }

    public static func < (lhs: Triple, rhs: Triple) -> Bool {
        (lhs.first, lhs.second, lhs.third) < (rhs.first, rhs.second, rhs.third)
    }

    public static var keyEncoding: KeyEncoding {
        .tuple([First.keyEncoding, Second.keyEncoding, Third.keyEncoding])
    }

    public func encodeKey(into bytes: inout [UInt8], terminal: Bool) {
        first.encodeKey(into: &bytes, terminal: false)
        second.encodeKey(into: &bytes, terminal: false)
        third.encodeKey(into: &bytes, terminal: terminal)
    }

    public static func decodeKey(from reader: inout KeyReader, terminal: Bool) throws(KeyDecodingError) -> Triple {
        let first = try First.decodeKey(from: &reader, terminal: false)
        let second = try Second.decodeKey(from: &reader, terminal: false)
        return Triple(first, second, try Third.decodeKey(from: &reader, terminal: terminal))
    }

    public var description: String { "(\(first), \(second), \(third))" }
}
