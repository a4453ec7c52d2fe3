import Foundation
import KVStore
import Testing
import Workloads

private func day(_ text: String) -> LogicalDay { LogicalDay(text)! }
private func days(_ texts: String...) -> [LogicalDay] { texts.map(day) }

/// A monthly subscription first billed 2025-01-10.
private func monthly(status: SubscriptionStatus = .active, cancellationDate: LogicalDay? = nil) -> Subscription {
    Subscription(id: UUID(uuidString: "b2000000-0000-4000-8000-000000000001")!, name: "Netflix", amount: 1200,
                 currency: "JPY", status: status, category: "entertainment", firstBillingDate: day("2025-01-10"),
                 cancellationDate: cancellationDate, billingCycle: .monthly(interval: 1), memo: "",
                 createdAt: Date(timeIntervalSince1970: 0), updatedAt: Date(timeIntervalSince1970: 0))
}

@Suite struct SubscriptionBillingDatesTests {
    let year2025 = day("2025-01-01")...day("2025-12-31")

    @Test func activeBillsThroughoutTheRangeBoundsIncluded() {
        #expect(monthly().billingDates(in: day("2025-03-10")...day("2025-05-10"))
                == days("2025-03-10", "2025-04-10", "2025-05-10"))
        #expect(monthly().billingDates(in: day("2025-03-11")...day("2025-05-09")) == days("2025-04-10"))
        #expect(monthly().billingDates(in: year2025).count == 12)
    }

    @Test func pausedStillGetsProjectedDates() {
        #expect(monthly(status: .paused).billingDates(in: year2025) == monthly().billingDates(in: year2025))
        #expect(!monthly(status: .paused).billingDates(in: year2025).isEmpty)
    }

    @Test func cancelledBillsUpToAndIncludingItsCancellationDate() {
        // Cancelled on a billing day: that billing is kept (seed §5.2: rangeEnd = min(rangeEnd, cancellationDate)).
        let onBillingDay = monthly(status: .cancelled, cancellationDate: day("2025-04-10"))
        #expect(onBillingDay.billingDates(in: year2025) == days("2025-01-10", "2025-02-10", "2025-03-10", "2025-04-10"))
        // Cancelled the day before: it is not.
        let dayBefore = monthly(status: .cancelled, cancellationDate: day("2025-04-09"))
        #expect(dayBefore.billingDates(in: year2025) == days("2025-01-10", "2025-02-10", "2025-03-10"))
        // Cancelled the day after: it is.
        let dayAfter = monthly(status: .cancelled, cancellationDate: day("2025-04-11"))
        #expect(dayAfter.billingDates(in: year2025).last == day("2025-04-10"))
    }

    @Test func cancelledBeforeTheRangeOrBeforeTheFirstBillingHasNoDates() {
        let early = monthly(status: .cancelled, cancellationDate: day("2024-12-31"))
        #expect(early.billingDates(in: year2025) == [])
        let beforeRange = monthly(status: .cancelled, cancellationDate: day("2025-03-01"))
        #expect(beforeRange.billingDates(in: day("2025-06-01")...day("2025-12-31")) == [])
    }

    @Test func theRangesEndWinsWhenItComesBeforeTheCancellation() {
        let cancelled = monthly(status: .cancelled, cancellationDate: day("2025-12-31"))
        #expect(cancelled.billingDates(in: day("2025-01-01")...day("2025-02-28")) == days("2025-01-10", "2025-02-10"))
    }

    @Test func aCancellationDateIsIgnoredUnlessTheStatusIsCancelled() {
        let active = monthly(status: .active, cancellationDate: day("2025-02-01"))
        #expect(active.billingDates(in: year2025).count == 12)
        let paused = monthly(status: .paused, cancellationDate: day("2025-02-01"))
        #expect(paused.billingDates(in: year2025).count == 12)
    }

    @Test func projectedEventsCarryTheSubscriptionsAmountCurrencyAndStableIDs() {
        let now = Date(timeIntervalSince1970: 1_770_000_000)
        var subscription = monthly()
        subscription.currency = "USD"
        subscription.amount = Decimal(string: "12.99")!
        let events = subscription.projectedEvents(in: day("2025-03-01")...day("2025-05-31"), now: now)
        #expect(events.map(\.billedAt) == days("2025-03-10", "2025-04-10", "2025-05-10"))
        for event in events {
            #expect(event.subscriptionId == subscription.id)
            #expect(event.amount == Decimal(string: "12.99")!)
            #expect(event.currency == "USD")
            #expect(event.eventType == .projected)
            #expect(!event.isConfirmed)
            #expect(!event.isAmountOverridden)
            #expect(event.memo == nil)
            #expect(event.createdAt == now && event.updatedAt == now)
            #expect(event.id == BillingEvent.projectedID(subscriptionId: subscription.id, billedAt: event.billedAt))
        }
        #expect(Set(events.map(\.id)).count == 3)
        // The same inputs give the same IDs; another subscription or day gives others.
        let again = subscription.projectedEvents(in: day("2025-03-01")...day("2025-05-31"), now: .distantPast)
        #expect(again.map(\.id) == events.map(\.id))
        let other = UUID(uuidString: "b2000000-0000-4000-8000-000000000002")!
        #expect(BillingEvent.projectedID(subscriptionId: other, billedAt: day("2025-03-10")) != events[0].id)
    }

    @Test func projectedIDsAreVersion8UUIDsWithoutCollisionsOverManyInputs() {
        var seen = Set<UUID>()
        for s in 0..<50 {
            let subscription = UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", s))!
            for d in 0..<400 {
                let id = BillingEvent.projectedID(subscriptionId: subscription, billedAt: day("2025-01-01") + d)
                #expect(id.uuid.6 >> 4 == 8 && id.uuid.8 >> 6 == 0b10)
                seen.insert(id)
            }
        }
        #expect(seen.count == 50 * 400)
    }

    // MARK: - History range

    @Test func historyRangeIsPastAndFutureMonthsAroundToday() throws {
        #expect(try HistoryRange(pastMonths: 6, futureMonths: 12).days(around: day("2026-02-06"))
                == day("2025-08-06")...day("2027-02-06"))
        // Month ends clamp.
        #expect(try HistoryRange(pastMonths: 6, futureMonths: 6).days(around: day("2026-08-31"))
                == day("2026-02-28")...day("2027-02-28"))
        #expect(try HistoryRange(pastMonths: 0, futureMonths: 0).days(around: day("2026-02-06"))
                == day("2026-02-06")...day("2026-02-06"))
        #expect(HistoryRange.standard == HistoryRange(pastMonths: 6, futureMonths: 12))
    }

    @Test func historyRangeBoundsAreChecked() throws {
        let today = day("2026-02-06")
        #expect(throws: SubscriptionValidationError.invalidHistoryRange(field: "pastMonths", -1)) {
            try HistoryRange(pastMonths: -1, futureMonths: 12).days(around: today)
        }
        #expect(throws: SubscriptionValidationError.invalidHistoryRange(field: "futureMonths", 1201)) {
            try HistoryRange(pastMonths: 0, futureMonths: 1201).validate()
        }
        try HistoryRange(pastMonths: 1200, futureMonths: 1200).validate()
        #expect(throws: SubscriptionValidationError.historyRangeOutOfBounds(HistoryRange(pastMonths: 0, futureMonths: 1),
                                                                           around: day("9999-12-15"))) {
            try HistoryRange(pastMonths: 0, futureMonths: 1).days(around: day("9999-12-15"))
        }
        #expect(throws: SubscriptionValidationError.self) {
            try HistoryRange(pastMonths: 1, futureMonths: 0).days(around: day("0001-01-15"))
        }
        #expect(try HistoryRange(pastMonths: 0, futureMonths: 0).days(around: day("9999-12-31")) == day("9999-12-31")...day("9999-12-31"))
        #expect("\(SubscriptionValidationError.historyRangeOutOfBounds(HistoryRange(pastMonths: 0, futureMonths: 1), around: day("9999-12-15")))"
                == "historyRange of 0 months back and 1 ahead of 9999-12-15 reaches outside 0001-01-01...9999-12-31")
        #expect("\(SubscriptionValidationError.invalidHistoryRange(field: "pastMonths", -1))"
                == "historyRange pastMonths is -1; it must be between 0 and 1200")
    }

    // MARK: - Status rules for totals (seed §4.2)

    @Test func pausedIsLeftOutOfTotalsUnlessTheSettingSaysOtherwise() {
        #expect(SubscriptionStatus.active.isIncludedInTotals())
        #expect(!SubscriptionStatus.paused.isIncludedInTotals())
        #expect(SubscriptionStatus.paused.isIncludedInTotals(includingPaused: true))
        #expect(SubscriptionStatus.cancelled.isIncludedInTotals())
    }
}
