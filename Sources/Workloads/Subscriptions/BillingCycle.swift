import KVStore

/// How often a subscription bills (seed `002_…` §3.2 `billingCycleType`, `billingInterval`,
/// `customDaysInterval`).
///
/// ```swift
/// let cycle = BillingCycle.monthly(interval: 1)
/// let anchor = LogicalDay(year: 2025, month: 1, day: 31)!
/// (0..<4).compactMap { cycle.billingDate($0, anchor: anchor) }
/// // 2025-01-31, 2025-02-28, 2025-03-31, 2025-04-30
/// ```
///
/// **Billing dates are anchored** (seed §5.1): the n-th date is computed from the first billing date,
/// never from the previous date, so a month-end anchor comes back to the month's end after a short
/// month instead of drifting to the 28th. Monthly and yearly cycles keep the anchor's day of the
/// month, or use the month's last day when that day does not exist (a yearly 2024-02-29 gives
/// 2025-02-28, …, 2028-02-29). A custom cycle adds its number of days.
///
/// Stored (CBOR) as `{"type": "monthly", "interval": 1}` or `{"type": "customDays",
/// "customDaysInterval": 45}`, the shape the JSON export uses too.
public enum BillingCycle: Hashable, Sendable {
    /// Every `interval` months.
    case monthly(interval: Int)
    /// Every `interval` years.
    case yearly(interval: Int)
    /// Every `days` days.
    case customDays(days: Int)

    /// The largest interval accepted by validation: 1,200 months, 100 years or 36,500 days.
    public static let maximumMonths = 1_200
    public static let maximumYears = 100
    public static let maximumDays = 36_500

    /// A cycle from the seed's three fields, as a form or an import has them.
    ///
    /// ```swift
    /// try BillingCycle(type: .customDays, interval: 1, customDaysInterval: 45)   // .customDays(days: 45)
    /// try BillingCycle(type: .customDays, interval: 1, customDaysInterval: nil)  // throws
    /// ```
    ///
    /// - Parameters:
    ///   - interval: months or years for `monthly` and `yearly`; ignored for `customDays`.
    ///   - customDaysInterval: the day count for `customDays`; ignored otherwise.
    /// - Throws: ``SubscriptionValidationError/missingCustomDaysInterval`` when `type` is `customDays`
    ///   and `customDaysInterval` is `nil`. The values themselves are checked by ``validate()``.
    public init(type: BillingCycleType, interval: Int, customDaysInterval: Int?) throws(SubscriptionValidationError) {
        switch type {
        case .monthly: self = .monthly(interval: interval)
        case .yearly: self = .yearly(interval: interval)
        case .customDays:
            guard let days = customDaysInterval else { throw .missingCustomDaysInterval }
            self = .customDays(days: days)
        }
    }

    /// The seed's `billingCycleType`.
    public var type: BillingCycleType {
        switch self {
        case .monthly: .monthly
        case .yearly: .yearly
        case .customDays: .customDays
        }
    }

    /// The seed's `billingInterval`: months or years between billings; `nil` for `customDays`.
    public var interval: Int? {
        switch self {
        case .monthly(let n), .yearly(let n): n
        case .customDays: nil
        }
    }

    /// The seed's `customDaysInterval`: days between billings for `customDays`, otherwise `nil`.
    public var customDaysInterval: Int? {
        if case .customDays(let days) = self { days } else { nil }
    }

    /// Checks the interval: at least 1, and at most ``maximumMonths``, ``maximumYears`` or
    /// ``maximumDays``.
    ///
    /// - Throws: ``SubscriptionValidationError/invalidInterval(_:_:)`` or
    ///   ``SubscriptionValidationError/invalidCustomDaysInterval(_:)``.
    public func validate() throws(SubscriptionValidationError) {
        switch self {
        case .monthly(let n) where !(1...Self.maximumMonths).contains(n): throw .invalidInterval(.monthly, n)
        case .yearly(let n) where !(1...Self.maximumYears).contains(n): throw .invalidInterval(.yearly, n)
        case .customDays(let d) where !(1...Self.maximumDays).contains(d): throw .invalidCustomDaysInterval(d)
        default: return
        }
    }

    /// The `n`-th billing date (`n = 0` is `anchor` itself), or `nil` when `n` is negative, the
    /// interval is not positive, or the date would be after 9999-12-31.
    ///
    /// ```swift
    /// BillingCycle.yearly(interval: 1).billingDate(4, anchor: LogicalDay("2024-02-29")!)   // 2028-02-29
    /// ```
    public func billingDate(_ n: Int, anchor: LogicalDay) -> LogicalDay? {
        guard n >= 0 else { return nil }
        let date: LogicalDay?
        if let step = monthsPerPeriod {
            let (months, overflow) = step.multipliedReportingOverflow(by: n)
            guard !overflow else { return nil }
            date = anchor.adding(months: months)
        } else if let step = daysPerPeriod {
            let (days, overflow) = step.multipliedReportingOverflow(by: n)
            guard !overflow else { return nil }
            date = anchor.adding(days: days)
        } else {
            return nil
        }
        guard let date, date <= LogicalDay.lastSupported else { return nil }
        return date
    }

    /// Months from one billing to the next for a monthly or yearly cycle with a positive interval.
    private var monthsPerPeriod: Int? {
        switch self {
        case .monthly(let k) where k > 0: k
        case .yearly(let k) where k > 0 && k <= Int.max / 12: k * 12
        default: nil
        }
    }

    /// Days from one billing to the next for a custom cycle with a positive day count.
    private var daysPerPeriod: Int? {
        if case .customDays(let d) = self, d > 0 { d } else { nil }
    }

    /// The billing dates from `anchor` that fall in `range`, in order (seed §5.2's loop, anchored).
    /// Empty when the interval is not positive or the range is empty.
    ///
    /// ```swift
    /// BillingCycle.monthly(interval: 1).billingDates(anchor: LogicalDay("2025-01-31")!,
    ///     in: LogicalDay("2025-02-01")!...LogicalDay("2025-04-30")!)
    /// // 2025-02-28, 2025-03-31, 2025-04-30
    /// ```
    public func billingDates(anchor: LogicalDay, in range: ClosedRange<LogicalDay>) -> [LogicalDay] {
        // Skip whole periods that end before the range (without walking them one by one).
        var n: Int
        if let step = monthsPerPeriod {
            // Dates in months before the range's month minus one step are all before the range.
            n = Swift.max(0, anchor.months(to: range.lowerBound) / step - 1)
        } else if let step = daysPerPeriod {
            n = Swift.max(0, anchor.distance(to: range.lowerBound) / step)
        } else {
            return []
        }
        var dates: [LogicalDay] = []
        while let date = billingDate(n, anchor: anchor), date <= range.upperBound {
            if date >= range.lowerBound { dates.append(date) }
            n += 1
        }
        return dates
    }
}

extension BillingCycle: Codable {
    private enum CodingKeys: String, CodingKey {
        case type, interval, customDaysInterval
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let type = try container.decode(BillingCycleType.self, forKey: .type)
        let interval = try container.decodeIfPresent(Int.self, forKey: .interval) ?? 1
        let days = try container.decodeIfPresent(Int.self, forKey: .customDaysInterval)
        do {
            self = try BillingCycle(type: type, interval: interval, customDaysInterval: days)
        } catch {
            throw DecodingError.dataCorruptedError(forKey: .customDaysInterval, in: container, debugDescription: error.description)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(type, forKey: .type)
        try container.encodeIfPresent(interval, forKey: .interval)
        try container.encodeIfPresent(customDaysInterval, forKey: .customDaysInterval)
    }
}
