/// A position in a store's change history: the sequence number of the last history entry a consumer
/// has seen. Tokens increase by one per recorded mutation, across every process, and are never reused,
/// not even after a purge.
///
/// ```swift
/// let token = try history.currentToken()
/// // … later, in any process:
/// switch try history.changes(since: token) { … }
/// ```
public struct ChangeToken: RawRepresentable, Hashable, Comparable, Codable, Sendable, CustomStringConvertible {
    /// The sequence number. `0` is the position before the first entry ever recorded.
    public var rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// The position before any history was recorded.
    public static let zero = ChangeToken(rawValue: 0)

    public static func < (a: ChangeToken, b: ChangeToken) -> Bool { a.rawValue < b.rawValue }

    public var description: String { String(rawValue) }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(UInt64.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
