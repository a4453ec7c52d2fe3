#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

/// A subscription, billing event or setting that breaks a rule of seed `002_…` §7.
///
/// Each ``description`` is one line naming the field and the rule, ready to show as it is:
///
/// ```swift
/// do { try subscription.validate() }
/// catch { print(error) }   // name is 101 characters; it must be at most 100
/// ```
public enum SubscriptionValidationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// `name` is empty or only whitespace.
    case emptyName
    /// `name` has more than ``Subscription/maximumNameLength`` characters.
    case nameTooLong(length: Int)
    /// An amount is NaN. `field` is `amount` or `billing event amount`.
    case amountNotANumber(field: String)
    /// An amount is below 0.
    case negativeAmount(field: String, Decimal)
    /// A subscription's amount is over ``Subscription/maximumAmount``.
    case amountTooLarge(Decimal)
    /// `currency` is not three capital letters A-Z.
    case invalidCurrency(field: String, String)
    /// `status` is `cancelled` and `cancellationDate` is `nil`.
    case missingCancellationDate
    /// A day is outside 0001-01-01...9999-12-31. `field` is `firstBillingDate`, `cancellationDate` or
    /// `billedAt`.
    case dayOutOfRange(field: String, LogicalDay)
    /// A monthly or yearly interval is not in 1...``BillingCycle/maximumMonths`` (or
    /// ``BillingCycle/maximumYears``).
    case invalidInterval(BillingCycleType, Int)
    /// `billingCycleType` is `customDays` and `customDaysInterval` is missing.
    case missingCustomDaysInterval
    /// `customDaysInterval` is not in 1...``BillingCycle/maximumDays``.
    case invalidCustomDaysInterval(Int)
    /// A history range bound is not in 0...``HistoryRange/maximumMonths``. `field` is `pastMonths` or
    /// `futureMonths`.
    case invalidHistoryRange(field: String, Int)
    /// The history range around a day would reach before 0001-01-01 or after 9999-12-31.
    case historyRangeOutOfBounds(HistoryRange, around: LogicalDay)

    public var description: String {
        switch self {
        case .emptyName:
            "name must not be empty"
        case .nameTooLong(let length):
            "name is \(length) characters; it must be at most \(Subscription.maximumNameLength)"
        case .amountNotANumber(let field):
            "\(field) is not a number (NaN); it must be 0 or more"
        case .negativeAmount(let field, let amount):
            "\(field) is \(amount); it must be 0 or more"
        case .amountTooLarge(let amount):
            "amount is \(amount); it must be at most \(Subscription.maximumAmount)"
        case .invalidCurrency(let field, let code):
            "\(field) \(KVStoreError.quote(code)) is not an ISO 4217 code of three capital letters, such as JPY"
        case .missingCancellationDate:
            "cancellationDate is required when status is cancelled"
        case .dayOutOfRange(let field, let day):
            "\(field) \(day) is outside 0001-01-01...9999-12-31"
        case .invalidInterval(let type, let interval):
            "billingInterval of a \(type.rawValue) cycle is \(interval); it must be between 1 and "
                + "\(type == .yearly ? BillingCycle.maximumYears : BillingCycle.maximumMonths)"
        case .missingCustomDaysInterval:
            "customDaysInterval is required when billingCycleType is customDays"
        case .invalidCustomDaysInterval(let days):
            "customDaysInterval is \(days); it must be a positive number of days, at most \(BillingCycle.maximumDays)"
        case .invalidHistoryRange(let field, let months):
            "historyRange \(field) is \(months); it must be between 0 and \(HistoryRange.maximumMonths)"
        case .historyRangeOutOfBounds(let range, let today):
            "historyRange of \(range.pastMonths) months back and \(range.futureMonths) ahead of \(today) "
                + "reaches outside 0001-01-01...9999-12-31"
        }
    }
}
