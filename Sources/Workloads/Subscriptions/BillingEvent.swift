#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

/// One billing of a subscription, projected or confirmed (seed `002_…` §3.3).
///
/// ```swift
/// let events = try store.read { tx in try subscriptions.events(of: netflix.id, in: tx) }
/// events.first?.billedAt     // 2025-01-31
/// events.first?.eventType    // .projected
/// ```
///
/// `billedAt` is the day of the billing in the user's local calendar (a ``LogicalDay``). Projected
/// events carry the subscription's amount; a confirmed one keeps the amount it was confirmed with,
/// and `isAmountOverridden` says whether the user changed it for that billing only.
public struct BillingEvent: Codable, Hashable, Sendable, Identifiable {
    public var id: UUID
    /// The subscription's ``Subscription/id`` (the seed's relationship).
    public var subscriptionId: UUID
    public var billedAt: LogicalDay
    /// 0 or more.
    public var amount: Decimal
    public var currency: String
    public var eventType: BillingEventType
    /// Whether the amount was set for this billing only.
    public var isAmountOverridden: Bool
    public var memo: String?
    public var createdAt: Date
    public var updatedAt: Date

    public init(id: UUID, subscriptionId: UUID, billedAt: LogicalDay, amount: Decimal, currency: String,
                eventType: BillingEventType = .projected, isAmountOverridden: Bool = false, memo: String? = nil,
                createdAt: Date, updatedAt: Date) {
        self.id = id
        self.subscriptionId = subscriptionId
        self.billedAt = billedAt
        self.amount = amount
        self.currency = currency
        self.eventType = eventType
        self.isAmountOverridden = isAmountOverridden
        self.memo = memo
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// The seed's alternative `isConfirmed` flag: `eventType == .confirmed`.
    public var isConfirmed: Bool { eventType == .confirmed }

    /// The ID of the projected event of `subscriptionId` on `billedAt`: the same inputs always give
    /// the same ID, so regenerating a schedule updates events in place instead of replacing them,
    /// and sample data and exports are reproducible.
    ///
    /// ```swift
    /// BillingEvent.projectedID(subscriptionId: id, billedAt: day) == BillingEvent.projectedID(subscriptionId: id, billedAt: day)  // true
    /// ```
    ///
    /// It is a version 8 UUID (RFC 9562, "custom") whose 122 free bits are a SplitMix64-style hash
    /// of the subscription's 16 bytes and the day number. Not cryptographic; distinct inputs collide
    /// with negligible probability.
    public static func projectedID(subscriptionId: UUID, billedAt: LogicalDay) -> UUID {
        let u = subscriptionId.uuid
        let high = [u.0, u.1, u.2, u.3, u.4, u.5, u.6, u.7].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let low = [u.8, u.9, u.10, u.11, u.12, u.13, u.14, u.15].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let day = UInt64(UInt32(bitPattern: billedAt.dayNumber))
        func mix(_ x: UInt64) -> UInt64 {
            var z = x &+ 0x9E37_79B9_7F4A_7C15
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        let a = mix(mix(mix(high) ^ low) ^ day)
        let b = mix(a ^ mix(low ^ mix(day ^ 0x5EED_B111_0000_0002)) ^ high)
        var bytes = withUnsafeBytes(of: a.bigEndian, Array.init) + withUnsafeBytes(of: b.bigEndian, Array.init)
        bytes[6] = bytes[6] & 0x0F | 0x80   // version 8
        bytes[8] = bytes[8] & 0x3F | 0x80   // variant 10
        return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                           bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }
}
