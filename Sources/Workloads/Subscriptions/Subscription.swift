#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

/// A subscription the user pays for (seed `002_…` §3.2).
///
/// ```swift
/// let netflix = Subscription(
///     id: UUID(), name: "Netflix", amount: 1490, currency: "JPY", status: .active,
///     category: "entertainment", firstBillingDate: LogicalDay(year: 2025, month: 1, day: 31)!,
///     billingCycle: .monthly(interval: 1), createdAt: now, updatedAt: now)
/// try netflix.validate()
/// let dates = netflix.billingDates(in: range)   // the projected billing days in `range`
/// ```
///
/// Calendar days (`firstBillingDate`, `cancellationDate`) are ``LogicalDay``s: a day in the user's
/// local calendar, with no time or zone. `createdAt` and `updatedAt` are instants. Money is `Decimal`,
/// in `currency`. Nothing is checked on construction: call ``validate()``;
/// ``SubscriptionStore/save(_:regeneratingIn:now:author:)`` does.
public struct Subscription: Codable, Hashable, Sendable, Identifiable {
    public var id: UUID
    /// Required, 1...100 characters; not unique.
    public var name: String
    /// The amount of one billing, 0...1,000,000.
    public var amount: Decimal
    /// An ISO 4217 code such as `"JPY"`.
    public var currency: String
    public var status: SubscriptionStatus
    public var category: String?
    /// The first billing date, the anchor of every later one (not the start of a free trial).
    public var firstBillingDate: LogicalDay
    /// Required when ``status`` is `cancelled`: no projected billing after this day.
    public var cancellationDate: LogicalDay?
    public var billingCycle: BillingCycle
    public var memo: String?
    public var createdAt: Date
    public var updatedAt: Date

    public init(id: UUID, name: String, amount: Decimal, currency: String = "JPY",
                status: SubscriptionStatus = .active, category: String? = nil,
                firstBillingDate: LogicalDay, cancellationDate: LogicalDay? = nil,
                billingCycle: BillingCycle, memo: String? = nil, createdAt: Date, updatedAt: Date) {
        self.id = id
        self.name = name
        self.amount = amount
        self.currency = currency
        self.status = status
        self.category = category
        self.firstBillingDate = firstBillingDate
        self.cancellationDate = cancellationDate
        self.billingCycle = billingCycle
        self.memo = memo
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}
