import KVStore

/// How far back and ahead projected billing events are kept: the past N months to the future M
/// months around today (seed `002_…` §2.2 and §5.2, `settings.historyRange` in the JSON export).
///
/// ```swift
/// let range = try HistoryRange(pastMonths: 6, futureMonths: 12)
///     .days(around: LogicalDay(year: 2026, month: 2, day: 6)!)
/// // 2025-08-06...2027-02-06
/// ```
public struct HistoryRange: Codable, Hashable, Sendable {
    /// The largest bound accepted: 100 years.
    public static let maximumMonths = 1_200
    /// The seed's example: six months back, twelve ahead.
    public static let standard = HistoryRange(pastMonths: 6, futureMonths: 12)

    public var pastMonths: Int
    public var futureMonths: Int

    public init(pastMonths: Int, futureMonths: Int) {
        self.pastMonths = pastMonths
        self.futureMonths = futureMonths
    }

    /// Checks both bounds are in 0...``maximumMonths``.
    ///
    /// - Throws: ``SubscriptionValidationError/invalidHistoryRange(field:_:)``.
    public func validate() throws(SubscriptionValidationError) {
        guard (0...Self.maximumMonths).contains(pastMonths) else { throw .invalidHistoryRange(field: "pastMonths", pastMonths) }
        guard (0...Self.maximumMonths).contains(futureMonths) else { throw .invalidHistoryRange(field: "futureMonths", futureMonths) }
    }

    /// The days from `today` minus ``pastMonths`` months to `today` plus ``futureMonths`` months, both
    /// included. A day that does not exist in the target month becomes that month's last day
    /// (2026-08-31 minus 6 months is 2026-02-28).
    ///
    /// - Throws: ``SubscriptionValidationError/invalidHistoryRange(field:_:)`` for a bound out of
    ///   range, or ``SubscriptionValidationError/historyRangeOutOfBounds(_:around:)`` when the range
    ///   would leave the years 0001-9999.
    public func days(around today: LogicalDay) throws(SubscriptionValidationError) -> ClosedRange<LogicalDay> {
        try validate()
        guard let start = today.adding(months: -pastMonths), let end = today.adding(months: futureMonths),
              Subscription.supportedDays.contains(start), Subscription.supportedDays.contains(end) else {
            throw .historyRangeOutOfBounds(self, around: today)
        }
        return start...end
    }
}
