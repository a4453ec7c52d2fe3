/// Whether a billing event is only expected or has been confirmed by the user (seed `002_…` §3.3).
///
/// Regeneration (``SubscriptionStore/save(_:regeneratingIn:now:author:)``) may replace `projected`
/// events at will and never touches `confirmed` ones.
public enum BillingEventType: String, Codable, Hashable, Sendable, CaseIterable {
    case projected
    case confirmed
}
