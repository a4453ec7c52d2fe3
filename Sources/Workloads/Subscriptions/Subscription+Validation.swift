#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

extension Subscription {
    /// The longest name accepted, in characters (grapheme clusters, as people count them).
    public static let maximumNameLength = 100
    /// The largest amount accepted.
    public static let maximumAmount: Decimal = 1_000_000

    /// Every rule of seed §7 this subscription breaks, in field order; empty when it is valid.
    ///
    /// ```swift
    /// var s = subscription
    /// s.name = ""
    /// s.amount = -1
    /// s.validationErrors()   // [.emptyName, .negativeAmount(field: "amount", -1)]
    /// ```
    ///
    /// The rules: `name` is not empty (nor only whitespace) and has at most 100 characters; `amount`
    /// is a number in 0...1,000,000; `currency` is three capital letters; `firstBillingDate` (and
    /// `cancellationDate`, when set) is in the years 0001-9999; a `cancelled` subscription has a
    /// `cancellationDate`; the billing cycle's interval is positive (see ``BillingCycle/validate()``).
    public func validationErrors() -> [SubscriptionValidationError] {
        var errors: [SubscriptionValidationError] = []
        if name.unicodeScalars.allSatisfy(\.properties.isWhitespace) {
            errors.append(.emptyName)
        } else if name.count > Self.maximumNameLength {
            errors.append(.nameTooLong(length: name.count))
        }
        if amount.isNaN {
            errors.append(.amountNotANumber(field: "amount"))
        } else if amount < 0 {
            errors.append(.negativeAmount(field: "amount", amount))
        } else if amount > Self.maximumAmount {
            errors.append(.amountTooLarge(amount))
        }
        if !Self.isCurrencyCode(currency) { errors.append(.invalidCurrency(field: "currency", currency)) }
        if !Self.supportedDays.contains(firstBillingDate) {
            errors.append(.dayOutOfRange(field: "firstBillingDate", firstBillingDate))
        }
        if let cancellationDate, !Self.supportedDays.contains(cancellationDate) {
            errors.append(.dayOutOfRange(field: "cancellationDate", cancellationDate))
        }
        if status == .cancelled && cancellationDate == nil { errors.append(.missingCancellationDate) }
        do { try billingCycle.validate() } catch { errors.append(error) }
        return errors
    }

    /// Throws the first rule this subscription breaks (see ``validationErrors()``).
    ///
    /// - Throws: ``SubscriptionValidationError``.
    public func validate() throws(SubscriptionValidationError) {
        if let error = validationErrors().first { throw error }
    }

    /// The days accepted for dates: 0001-01-01...9999-12-31.
    static let supportedDays = LogicalDay(year: 1, month: 1, day: 1)!...LogicalDay.lastSupported

    static func isCurrencyCode(_ code: String) -> Bool {
        code.utf8.count == 3 && code.utf8.allSatisfy { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }
    }
}
