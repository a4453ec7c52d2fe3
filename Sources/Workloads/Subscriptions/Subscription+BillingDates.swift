#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

extension Subscription {
    /// The days in `range` on which this subscription bills, following seed §5.2 and §4.2:
    /// the cycle's dates anchored on ``firstBillingDate`` (see ``BillingCycle``), and for a
    /// `cancelled` subscription none after its ``cancellationDate`` (a billing on that very day is
    /// kept, as in the seed's `rangeEnd = min(rangeEnd, cancellationDate)` with `date <= rangeEnd`).
    /// `active` and `paused` subscriptions bill throughout; a `cancellationDate` on a subscription
    /// that is not `cancelled` is ignored.
    ///
    /// ```swift
    /// netflix.billingDates(in: LogicalDay("2025-02-01")!...LogicalDay("2025-04-30")!)
    /// // 2025-02-28, 2025-03-31, 2025-04-30 for a monthly subscription first billed 2025-01-31
    /// ```
    ///
    /// Empty when the range is empty or the cycle is invalid (``validate()`` reports that).
    public func billingDates(in range: ClosedRange<LogicalDay>) -> [LogicalDay] {
        var end = range.upperBound
        if status == .cancelled, let cancellationDate { end = Swift.min(end, cancellationDate) }
        guard range.lowerBound <= end else { return [] }
        return billingCycle.billingDates(anchor: firstBillingDate, in: range.lowerBound...end)
    }

    /// The projected events for ``billingDates(in:)``: each with its deterministic ID
    /// (``BillingEvent/projectedID(subscriptionId:billedAt:)``), this subscription's amount and
    /// currency, and `now` as its creation and update time.
    ///
    /// ```swift
    /// let events = netflix.projectedEvents(in: range, now: Date())
    /// ```
    public func projectedEvents(in range: ClosedRange<LogicalDay>, now: Date) -> [BillingEvent] {
        billingDates(in: range).map { day in
            BillingEvent(id: BillingEvent.projectedID(subscriptionId: id, billedAt: day), subscriptionId: id,
                         billedAt: day, amount: amount, currency: currency, eventType: .projected,
                         isAmountOverridden: false, memo: nil, createdAt: now, updatedAt: now)
        }
    }
}
