#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A hybrid logical clock timestamp (Kulkarni et al., 2014): 48 bits of milliseconds since 1970 and
/// 16 bits of counter, in one `UInt64` that orders as the pair does.
///
/// ``History`` stamps every transaction it records with one. The next stamp is the larger of the
/// wall-clock time and the last stamp plus one, so stamps stay close to real time but never go
/// backwards: not when the wall clock does, and not across a causal chain between machines once a
/// replicator has passed a remote stamp to ``History/observeClock(_:now:maxSkew:in:)`` (which adopts
/// no stamp further ahead of the wall clock than a bound). Replication orders concurrent writes of
/// one key by (stamp, device id).
public struct HybridTimestamp: RawRepresentable, Hashable, Comparable, Codable, Sendable, CustomStringConvertible {
    public var rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// The stamp of wall-clock time `date`, with a zero counter.
    public init(date: Date) {
        let milliseconds = max(0, date.timeIntervalSince1970 * 1000)
        rawValue = UInt64(min(milliseconds, Double(Self.maxMilliseconds))) << 16
    }

    public static let zero = HybridTimestamp(rawValue: 0)
    static let maxMilliseconds: UInt64 = (1 << 48) - 1

    /// Milliseconds since 1970.
    public var milliseconds: UInt64 { rawValue >> 16 }
    /// Orders stamps within one millisecond.
    public var counter: UInt16 { UInt16(truncatingIfNeeded: rawValue) }

    /// The stamp for an event at wall-clock time `now` that follows `last`: never equal to or below
    /// `last`. At the very end of the range it stays at the maximum rather than wrap around.
    public static func next(after last: HybridTimestamp, now: Date) -> HybridTimestamp {
        let physical = HybridTimestamp(date: now)
        if physical > last { return physical }
        return HybridTimestamp(rawValue: last.rawValue == .max ? .max : last.rawValue + 1)
    }

    public static func < (a: HybridTimestamp, b: HybridTimestamp) -> Bool { a.rawValue < b.rawValue }

    /// How far this stamp's physical part is ahead of wall-clock time `now` (zero or negative when
    /// it is not ahead).
    public func offset(from now: Date) -> Duration {
        let physical = HybridTimestamp(date: now).milliseconds
        let ahead = Int64(clamping: milliseconds) - Int64(clamping: physical)
        return .milliseconds(ahead)
    }

    /// Whether this stamp is further than `bound` ahead of wall-clock time `now`: a clock no
    /// replicator adopts, and a change no server takes.
    public func isAhead(of now: Date, by bound: Duration) -> Bool {
        offset(from: now) > bound
    }

    /// `milliseconds.counter`.
    public var description: String { "\(milliseconds).\(counter)" }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(UInt64.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
