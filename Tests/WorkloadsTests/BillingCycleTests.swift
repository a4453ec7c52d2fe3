import Foundation
import KVStore
import Testing
import Workloads

private func day(_ text: String) -> LogicalDay { LogicalDay(text)! }
private func days(_ texts: String...) -> [LogicalDay] { texts.map(day) }

@Suite struct BillingCycleTests {
    // MARK: - Month-end clamp, anchored on the first billing date

    @Test func monthlyOnThe31stClampsToEachMonthsEndWithoutDrifting() {
        let cycle = BillingCycle.monthly(interval: 1)
        let dates = (0..<13).map { cycle.billingDate($0, anchor: day("2025-01-31"))!.description }
        #expect(dates == [
            "2025-01-31", "2025-02-28", "2025-03-31", "2025-04-30", "2025-05-31", "2025-06-30", "2025-07-31",
            "2025-08-31", "2025-09-30", "2025-10-31", "2025-11-30", "2025-12-31", "2026-01-31",
        ])
    }

    @Test func monthlyOnThe31stInALeapYearGivesFebruary29() {
        let cycle = BillingCycle.monthly(interval: 1)
        #expect(cycle.billingDate(1, anchor: day("2024-01-31")) == day("2024-02-29"))
        #expect(cycle.billingDate(2, anchor: day("2024-01-31")) == day("2024-03-31"))
    }

    @Test func monthlyOnThe30thAnd29th() {
        let cycle = BillingCycle.monthly(interval: 1)
        #expect(cycle.billingDate(1, anchor: day("2025-01-30")) == day("2025-02-28"))
        #expect(cycle.billingDate(2, anchor: day("2025-01-30")) == day("2025-03-30"))
        #expect(cycle.billingDate(1, anchor: day("2025-01-29")) == day("2025-02-28"))
        #expect(cycle.billingDate(13, anchor: day("2025-01-29")) == day("2026-02-28"))
        #expect(cycle.billingDate(37, anchor: day("2025-01-29")) == day("2028-02-29"))
    }

    @Test func monthlyWithAnIntervalStepsThatManyMonthsFromTheAnchor() {
        let every2 = BillingCycle.monthly(interval: 2)
        #expect((0..<4).map { every2.billingDate($0, anchor: day("2025-08-31"))! }
                == days("2025-08-31", "2025-10-31", "2025-12-31", "2026-02-28"))
        let quarterly = BillingCycle.monthly(interval: 3)
        #expect((0..<5).map { quarterly.billingDate($0, anchor: day("2025-11-30"))! }
                == days("2025-11-30", "2026-02-28", "2026-05-30", "2026-08-30", "2026-11-30"))
    }

    @Test func yearlyOnFebruary29UsesFebruary28InOtherYears() {
        let cycle = BillingCycle.yearly(interval: 1)
        #expect((0..<6).map { cycle.billingDate($0, anchor: day("2024-02-29"))! }
                == days("2024-02-29", "2025-02-28", "2026-02-28", "2027-02-28", "2028-02-29", "2029-02-28"))
        // 2100 is not a leap year, 2400 is.
        #expect(cycle.billingDate(76, anchor: day("2024-02-29")) == day("2100-02-28"))
        #expect(cycle.billingDate(376, anchor: day("2024-02-29")) == day("2400-02-29"))
        let every4 = BillingCycle.yearly(interval: 4)
        #expect(every4.billingDate(1, anchor: day("2024-02-29")) == day("2028-02-29"))
    }

    @Test func customDaysAddsDays() {
        let cycle = BillingCycle.customDays(days: 45)
        #expect((0..<4).map { cycle.billingDate($0, anchor: day("2025-10-01"))! }
                == days("2025-10-01", "2025-11-15", "2025-12-30", "2026-02-13"))
        #expect(BillingCycle.customDays(days: 1).billingDate(366, anchor: day("2024-01-01")) == day("2025-01-01"))
    }

    @Test func noDateForANegativeIndexAnInvalidIntervalOrPastYear9999() {
        #expect(BillingCycle.monthly(interval: 1).billingDate(-1, anchor: day("2025-01-31")) == nil)
        #expect(BillingCycle.monthly(interval: 0).billingDate(1, anchor: day("2025-01-31")) == nil)
        #expect(BillingCycle.yearly(interval: -1).billingDate(1, anchor: day("2025-01-31")) == nil)
        #expect(BillingCycle.customDays(days: 0).billingDate(1, anchor: day("2025-01-31")) == nil)
        #expect(BillingCycle.monthly(interval: 1).billingDate(1, anchor: day("9999-12-31")) == nil)
        #expect(BillingCycle.customDays(days: 1).billingDate(1, anchor: day("9999-12-31")) == nil)
        #expect(BillingCycle.monthly(interval: 1).billingDate(0, anchor: day("9999-12-31")) == day("9999-12-31"))
        #expect(BillingCycle.yearly(interval: Int.max).billingDate(1, anchor: day("2025-01-01")) == nil)
        #expect(BillingCycle.customDays(days: Int.max).billingDate(2, anchor: day("2025-01-01")) == nil)
    }

    // MARK: - Dates in a range

    @Test func rangeBoundsAreInclusive() {
        let cycle = BillingCycle.monthly(interval: 1)
        #expect(cycle.billingDates(anchor: day("2025-01-31"), in: day("2025-02-28")...day("2025-04-30"))
                == days("2025-02-28", "2025-03-31", "2025-04-30"))
        #expect(cycle.billingDates(anchor: day("2025-01-31"), in: day("2025-03-01")...day("2025-04-29"))
                == days("2025-03-31"))
        #expect(cycle.billingDates(anchor: day("2025-01-31"), in: day("2025-03-01")...day("2025-03-30")) == [])
    }

    @Test func aRangeBeforeTheAnchorStartsAtTheAnchor() {
        let cycle = BillingCycle.monthly(interval: 1)
        #expect(cycle.billingDates(anchor: day("2025-01-31"), in: day("2024-06-01")...day("2025-03-01"))
                == days("2025-01-31", "2025-02-28"))
        #expect(cycle.billingDates(anchor: day("2025-01-31"), in: day("2024-06-01")...day("2025-01-30")) == [])
    }

    @Test func invalidCyclesGiveNoDates() {
        let range = day("2025-01-01")...day("2026-01-01")
        #expect(BillingCycle.monthly(interval: 0).billingDates(anchor: day("2025-01-01"), in: range) == [])
        #expect(BillingCycle.customDays(days: -3).billingDates(anchor: day("2025-01-01"), in: range) == [])
    }

    /// The fast skip to the range's start gives exactly what walking every date from the anchor gives.
    @Test(arguments: [
        BillingCycle.monthly(interval: 1), .monthly(interval: 2), .monthly(interval: 5), .yearly(interval: 1),
        .yearly(interval: 3), .customDays(days: 1), .customDays(days: 7), .customDays(days: 45),
    ])
    func rangesMatchAWalkFromTheAnchor(cycle: BillingCycle) {
        var rng = SplitMix64(seed: 7)
        for _ in 0..<200 {
            let anchor = day("2020-01-01") + Int(rng.next() % 1500)
            let start = day("2019-06-01") + Int(rng.next() % 2500)
            let end = start + Int(rng.next() % 800)
            var walked: [LogicalDay] = []
            var n = 0
            while let date = cycle.billingDate(n, anchor: anchor), date <= end {
                if date >= start { walked.append(date) }
                n += 1
            }
            #expect(cycle.billingDates(anchor: anchor, in: start...end) == walked, "anchor \(anchor), range \(start)...\(end)")
        }
    }

    // MARK: - The seed's fields and storage

    @Test func theSeedsThreeFields() throws {
        #expect(try BillingCycle(type: .monthly, interval: 2, customDaysInterval: nil) == .monthly(interval: 2))
        #expect(try BillingCycle(type: .yearly, interval: 1, customDaysInterval: 9) == .yearly(interval: 1))
        #expect(try BillingCycle(type: .customDays, interval: 1, customDaysInterval: 45) == .customDays(days: 45))
        #expect(throws: SubscriptionValidationError.missingCustomDaysInterval) {
            try BillingCycle(type: .customDays, interval: 1, customDaysInterval: nil)
        }
        #expect(BillingCycle.monthly(interval: 2).type == .monthly)
        #expect(BillingCycle.monthly(interval: 2).interval == 2)
        #expect(BillingCycle.monthly(interval: 2).customDaysInterval == nil)
        #expect(BillingCycle.customDays(days: 45).type == .customDays)
        #expect(BillingCycle.customDays(days: 45).interval == nil)
        #expect(BillingCycle.customDays(days: 45).customDaysInterval == 45)
    }

    @Test func storedAsTypeAndIntervalInCBOR() throws {
        for cycle in [BillingCycle.monthly(interval: 1), .yearly(interval: 2), .customDays(days: 45)] {
            let bytes = try CBOREncoder().encode(cycle)
            #expect(try CBORDecoder().decode(BillingCycle.self, from: bytes) == cycle)
        }
        let monthly = try CBORValue.decode(try CBOREncoder().encode(BillingCycle.monthly(interval: 1)))
        #expect(monthly == .map([CBORMapEntry(key: .text("type"), value: .text("monthly")),
                                 CBORMapEntry(key: .text("interval"), value: .unsigned(1))]))
        let custom = try CBORValue.decode(try CBOREncoder().encode(BillingCycle.customDays(days: 45)))
        #expect(custom == .map([CBORMapEntry(key: .text("type"), value: .text("customDays")),
                                CBORMapEntry(key: .text("customDaysInterval"), value: .unsigned(45))]))
    }

    @Test func aStoredCustomCycleWithoutItsDayCountFailsToDecodeWithAClearMessage() throws {
        let bytes = try CBOREncoder().encode(["type": "customDays"])
        do {
            _ = try CBORDecoder().decode(BillingCycle.self, from: bytes)
            Issue.record("decoded a customDays cycle without customDaysInterval")
        } catch {
            #expect("\(error)".contains("customDaysInterval is required when billingCycleType is customDays"))
        }
    }
}
