import KVStore

extension BillingEvent {
    /// Every rule of seed §7 this event breaks: `amount` is a number, 0 or more; `currency` is three
    /// capital letters; `billedAt` is in the years 0001-9999. Empty when it is valid.
    ///
    /// ```swift
    /// var e = event
    /// e.amount = -1
    /// e.validationErrors()   // [.negativeAmount(field: "billing event amount", -1)]
    /// ```
    public func validationErrors() -> [SubscriptionValidationError] {
        var errors: [SubscriptionValidationError] = []
        if amount.isNaN {
            errors.append(.amountNotANumber(field: "billing event amount"))
        } else if amount < 0 {
            errors.append(.negativeAmount(field: "billing event amount", amount))
        }
        if !Subscription.isCurrencyCode(currency) {
            errors.append(.invalidCurrency(field: "billing event currency", currency))
        }
        if !Subscription.supportedDays.contains(billedAt) { errors.append(.dayOutOfRange(field: "billedAt", billedAt)) }
        return errors
    }

    /// Throws the first rule this event breaks (see ``validationErrors()``).
    ///
    /// - Throws: ``SubscriptionValidationError``.
    public func validate() throws(SubscriptionValidationError) {
        if let error = validationErrors().first { throw error }
    }
}
