/// Where a subscription is in its life (seed `002_…` §4.1): `active ⇄ paused`, either `→ cancelled`.
///
/// ```swift
/// SubscriptionStatus.paused.isIncludedInTotals()                    // false
/// SubscriptionStatus.paused.isIncludedInTotals(includingPaused: true) // true
/// ```
///
/// Projected billing events (seed §4.2): `active` and `paused` subscriptions get them; a `cancelled`
/// one gets none after its `cancellationDate`.
public enum SubscriptionStatus: String, Codable, Hashable, Sendable, CaseIterable {
    case active
    case paused
    case cancelled

    /// Whether a subscription in this status counts in totals: `active` always; `paused` only when
    /// the user's setting says so (seed §4.2, excluded by default); `cancelled` for the events it had
    /// up to its cancellation, which is why this asks about the status alone and says `true`.
    public func isIncludedInTotals(includingPaused: Bool = false) -> Bool {
        switch self {
        case .active, .cancelled: true
        case .paused: includingPaused
        }
    }
}
