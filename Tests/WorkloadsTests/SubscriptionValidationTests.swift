import Foundation
import KVStore
import Testing
import Workloads

private func day(_ text: String) -> LogicalDay { LogicalDay(text)! }

private let valid = Subscription(
    id: UUID(uuidString: "c3000000-0000-4000-8000-000000000001")!, name: "Netflix", amount: 1200, currency: "JPY",
    status: .active, category: "entertainment", firstBillingDate: day("2025-01-10"),
    billingCycle: .monthly(interval: 1), memo: "", createdAt: Date(timeIntervalSince1970: 0),
    updatedAt: Date(timeIntervalSince1970: 0))

private func with(_ change: (inout Subscription) -> Void) -> Subscription {
    var s = valid
    change(&s)
    return s
}

private let event = BillingEvent(
    id: UUID(uuidString: "c3000000-0000-4000-8000-0000000000e1")!, subscriptionId: valid.id,
    billedAt: day("2025-02-10"), amount: 1200, currency: "JPY", createdAt: Date(timeIntervalSince1970: 0),
    updatedAt: Date(timeIntervalSince1970: 0))

@Suite struct SubscriptionValidationTests {
    @Test func theBaseSubscriptionIsValid() throws {
        try valid.validate()
        #expect(valid.validationErrors() == [])
    }

    // MARK: - name

    @Test func nameMustNotBeEmptyOrBlank() {
        #expect(with { $0.name = "" }.validationErrors() == [.emptyName])
        #expect(with { $0.name = " \t\n" }.validationErrors() == [.emptyName])
        #expect(with { $0.name = "a" }.validationErrors() == [])
    }

    @Test func nameHasAtMost100Characters() {
        #expect(with { $0.name = String(repeating: "a", count: 100) }.validationErrors() == [])
        #expect(with { $0.name = String(repeating: "a", count: 101) }.validationErrors() == [.nameTooLong(length: 101)])
        // Characters as people count them: a family emoji is one character of several scalars.
        #expect(with { $0.name = String(repeating: "👨‍👩‍👧", count: 100) }.validationErrors() == [])
        #expect(with { $0.name = String(repeating: "音", count: 101) }.validationErrors() == [.nameTooLong(length: 101)])
    }

    // MARK: - amount

    @Test func amountIsBetween0And1000000() {
        #expect(with { $0.amount = 0 }.validationErrors() == [])
        #expect(with { $0.amount = 1_000_000 }.validationErrors() == [])
        #expect(with { $0.amount = Decimal(string: "0.01")! }.validationErrors() == [])
        let belowZero = Decimal(string: "-0.01")!
        #expect(with { $0.amount = belowZero }.validationErrors() == [.negativeAmount(field: "amount", belowZero)])
        let overLimit = Decimal(string: "1000000.01")!
        #expect(with { $0.amount = overLimit }.validationErrors() == [.amountTooLarge(overLimit)])
        #expect(with { $0.amount = .nan }.validationErrors() == [.amountNotANumber(field: "amount")])
    }

    // MARK: - currency

    @Test func currencyIsThreeCapitalLetters() {
        #expect(with { $0.currency = "USD" }.validationErrors() == [])
        for bad in ["", "JP", "JPYY", "jpy", "J1Y", "ＪＰＹ"] {
            #expect(with { $0.currency = bad }.validationErrors() == [.invalidCurrency(field: "currency", bad)], "\(bad)")
        }
    }

    // MARK: - dates and status

    @Test func cancelledNeedsACancellationDate() {
        #expect(with { $0.status = .cancelled }.validationErrors() == [.missingCancellationDate])
        #expect(with { $0.status = .cancelled; $0.cancellationDate = day("2025-06-01") }.validationErrors() == [])
        #expect(with { $0.status = .paused }.validationErrors() == [])
    }

    @Test func daysAreWithinTheYears0001To9999() {
        #expect(with { $0.firstBillingDate = day("0001-01-01") }.validationErrors() == [])
        #expect(with { $0.firstBillingDate = day("9999-12-31") }.validationErrors() == [])
        let before = day("0000-12-31")
        #expect(with { $0.firstBillingDate = before }.validationErrors() == [.dayOutOfRange(field: "firstBillingDate", before)])
        let after = LogicalDay.init(dayNumber: day("9999-12-31").dayNumber + 1)
        #expect(with { $0.firstBillingDate = after }.validationErrors() == [.dayOutOfRange(field: "firstBillingDate", after)])
        #expect(with { $0.cancellationDate = after }.validationErrors() == [.dayOutOfRange(field: "cancellationDate", after)])
    }

    // MARK: - billing cycle

    @Test func monthlyIntervalIsBetween1And1200() {
        #expect(with { $0.billingCycle = .monthly(interval: 1) }.validationErrors() == [])
        #expect(with { $0.billingCycle = .monthly(interval: 1200) }.validationErrors() == [])
        #expect(with { $0.billingCycle = .monthly(interval: 0) }.validationErrors() == [.invalidInterval(.monthly, 0)])
        #expect(with { $0.billingCycle = .monthly(interval: 1201) }.validationErrors() == [.invalidInterval(.monthly, 1201)])
    }

    @Test func yearlyIntervalIsBetween1And100() {
        #expect(with { $0.billingCycle = .yearly(interval: 1) }.validationErrors() == [])
        #expect(with { $0.billingCycle = .yearly(interval: 100) }.validationErrors() == [])
        #expect(with { $0.billingCycle = .yearly(interval: 0) }.validationErrors() == [.invalidInterval(.yearly, 0)])
        #expect(with { $0.billingCycle = .yearly(interval: 101) }.validationErrors() == [.invalidInterval(.yearly, 101)])
    }

    @Test func customDaysNeedsAPositiveDayCount() {
        #expect(with { $0.billingCycle = .customDays(days: 1) }.validationErrors() == [])
        #expect(with { $0.billingCycle = .customDays(days: 36_500) }.validationErrors() == [])
        #expect(with { $0.billingCycle = .customDays(days: 0) }.validationErrors() == [.invalidCustomDaysInterval(0)])
        #expect(with { $0.billingCycle = .customDays(days: -7) }.validationErrors() == [.invalidCustomDaysInterval(-7)])
        #expect(with { $0.billingCycle = .customDays(days: 36_501) }.validationErrors() == [.invalidCustomDaysInterval(36_501)])
        #expect(throws: SubscriptionValidationError.missingCustomDaysInterval) {
            try BillingCycle(type: .customDays, interval: 1, customDaysInterval: nil)
        }
    }

    // MARK: - reporting

    @Test func everyBrokenRuleIsReportedInFieldOrderAndValidateThrowsTheFirst() {
        let bad = with {
            $0.name = ""
            $0.amount = -5
            $0.currency = "yen"
            $0.status = .cancelled
            $0.billingCycle = .customDays(days: 0)
        }
        #expect(bad.validationErrors() == [
            .emptyName, .negativeAmount(field: "amount", -5), .invalidCurrency(field: "currency", "yen"),
            .missingCancellationDate, .invalidCustomDaysInterval(0),
        ])
        #expect(throws: SubscriptionValidationError.emptyName) { try bad.validate() }
    }

    @Test func descriptionsAreOneLineNamingTheFieldAndTheRule() {
        let expected: [(SubscriptionValidationError, String)] = [
            (.emptyName, "name must not be empty"),
            (.nameTooLong(length: 101), "name is 101 characters; it must be at most 100"),
            (.amountNotANumber(field: "amount"), "amount is not a number (NaN); it must be 0 or more"),
            (.negativeAmount(field: "amount", -1), "amount is -1; it must be 0 or more"),
            (.amountTooLarge(1_000_001), "amount is 1000001; it must be at most 1000000"),
            (.invalidCurrency(field: "currency", "jp\ny"),
             "currency \"jp\\u{a}y\" is not an ISO 4217 code of three capital letters, such as JPY"),
            (.missingCancellationDate, "cancellationDate is required when status is cancelled"),
            (.dayOutOfRange(field: "firstBillingDate", day("0000-12-31")),
             "firstBillingDate 0000-12-31 is outside 0001-01-01...9999-12-31"),
            (.invalidInterval(.monthly, 0), "billingInterval of a monthly cycle is 0; it must be between 1 and 1200"),
            (.invalidInterval(.yearly, 101), "billingInterval of a yearly cycle is 101; it must be between 1 and 100"),
            (.missingCustomDaysInterval, "customDaysInterval is required when billingCycleType is customDays"),
            (.invalidCustomDaysInterval(0),
             "customDaysInterval is 0; it must be a positive number of days, at most 36500"),
            (.negativeAmount(field: "billing event amount", -1), "billing event amount is -1; it must be 0 or more"),
        ]
        for (error, text) in expected {
            #expect(error.description == text)
            #expect(!error.description.contains("\n"))
        }
    }

    // MARK: - billing events

    @Test func eventAmountIsZeroOrMoreWithNoUpperLimit() throws {
        try event.validate()
        var e = event
        e.amount = 0
        #expect(e.validationErrors() == [])
        e.amount = 2_000_000
        #expect(e.validationErrors() == [])
        e.amount = Decimal(string: "-0.01")!
        #expect(e.validationErrors() == [.negativeAmount(field: "billing event amount", Decimal(string: "-0.01")!)])
        e.amount = .nan
        #expect(e.validationErrors() == [.amountNotANumber(field: "billing event amount")])
    }

    @Test func eventCurrencyAndDayAreChecked() {
        var e = event
        e.currency = "usd"
        #expect(e.validationErrors() == [.invalidCurrency(field: "billing event currency", "usd")])
        e = event
        e.billedAt = day("0000-06-01")
        #expect(e.validationErrors() == [.dayOutOfRange(field: "billedAt", day("0000-06-01"))])
    }
}
