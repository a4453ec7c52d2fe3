/// The kind of a ``BillingCycle``, as the seed's `billingCycleType` field names it.
public enum BillingCycleType: String, Codable, Hashable, Sendable, CaseIterable {
    case monthly
    case yearly
    case customDays
}
