import KVStore

/// The checklist dashboard's periods (seed `004_…` §8.3), each ending today.
public enum DashboardPeriod: String, CaseIterable, Codable, Hashable, Sendable {
    case week, month, threeMonths, sixMonths, year

    /// The number of days the period covers, today included.
    public var days: Int {
        switch self {
        case .week: 7
        case .month: 30
        case .threeMonths: 90
        case .sixMonths: 180
        case .year: 365
        }
    }

    /// The days `[today − (days − 1), today]`.
    public func range(endingAt today: LogicalDay) -> ClosedRange<LogicalDay> {
        (today - (days - 1))...today
    }
}

/// Whether a category's average went up or down across a period.
public enum Trend: String, Codable, Hashable, Sendable {
    case rising, falling, flat
}

/// One period of the dashboard, as `DESIGN.md` ("The dashboard workload") defines it.
public struct DashboardPeriodResult: Hashable, Sendable {
    public var period: DashboardPeriod
    /// Records whose day is in the period.
    public var records: Int
    /// For each category with at least one value in the period: the mean of the records'
    /// `cachedCategoryAverages`.
    public var categoryAverages: [ChecklistCategory: Double]
    /// For every category: the mean over the later half of the period's records minus the mean over the
    /// earlier half (split at `records / 2`), `rising` above 0.1, `falling` below −0.1, `flat` otherwise
    /// or when either half has no value.
    public var trends: [ChecklistCategory: Trend]

    public init(period: DashboardPeriod, records: Int, categoryAverages: [ChecklistCategory: Double],
                trends: [ChecklistCategory: Trend]) {
        self.period = period
        self.records = records
        self.categoryAverages = categoryAverages
        self.trends = trends
    }
}

/// The whole dashboard: the periods asked for, and the streak over all records.
public struct Dashboard: Hashable, Sendable {
    public var periods: [DashboardPeriodResult]
    public var streak: Streak

    public init(periods: [DashboardPeriodResult], streak: Streak) {
        self.periods = periods
        self.streak = streak
    }

    /// The result for `period`, if it was computed.
    public subscript(_ period: DashboardPeriod) -> DashboardPeriodResult? {
        periods.first { $0.period == period }
    }
}

extension Trend {
    /// The trend of a difference of means, with the dashboard's ±0.1 threshold.
    init(difference d: Double?) {
        guard let d else { self = .flat; return }
        self = d > 0.1 ? .rising : d < -0.1 ? .falling : .flat
    }
}

/// Sums of one category over a run of records.
struct CategorySums {
    var sum = 0.0
    var count = 0
    mutating func add(_ value: Double?) { if let value { sum += value; count += 1 } }
    var mean: Double? { count == 0 ? nil : sum / Double(count) }
}

extension ChecklistStore {
    /// The dashboard for `periods`, ending `today`, read in `transaction`: one cursor scan of the
    /// compact `dailySummaries` over the longest period (each summary read from the memory map without a
    /// copy; no `DailyRecord` is decoded), and one scan of their day keys for the streak.
    ///
    /// ```swift
    /// let dashboard = try store.read { tx in try checklist.dashboard(today: today, in: tx) }
    /// dashboard[.month]?.categoryAverages[.think]
    /// ```
    ///
    /// Valid only inside the transaction's closure.
    /// - Throws: `KVStoreError.corruptValue` for a summary of the wrong size; LMDB errors.
    public func dashboard(_ periods: [DashboardPeriod] = DashboardPeriod.allCases, today: LogicalDay,
                          in transaction: ReadTransaction) throws -> Dashboard {
        let longest = periods.map(\.days).max() ?? 0
        var rows: [DailySummary] = []
        rows.reserveCapacity(longest)
        if longest > 0 {
            let codec = FixedLayoutCodec<DailySummary>()
            try summaries.forEachBytes((today - (longest - 1))...today, in: transaction) { key, value in
                do {
                    rows.append(try codec.decode(value))
                } catch {
                    throw KVStoreError.corruptValue(collection: summaries.name, key: "\(try LogicalDay.decodeKey(key))", reason: "\(error)", underlying: .init(error))
                }
                return true
            }
        }
        let results = periods.map { period in
            let first = today.dayNumber - Int32(period.days - 1)
            let start = rows.firstIndex { $0.dayNumber >= first } ?? rows.count
            return DashboardPeriodResult(period, summaries: rows[start...])
        }
        return Dashboard(periods: results, streak: try streak(in: transaction))
    }
}

extension DashboardPeriodResult {
    /// The period computed from its days' summaries, in day order (exactly the period's days: the
    /// caller selects them). Shared by every implementation the benchmarks compare, so that they differ
    /// only in how they fetch the summaries.
    public init(_ period: DashboardPeriod, summaries rows: ArraySlice<DailySummary>) {
        let half = rows.startIndex + rows.count / 2
        var averages: [ChecklistCategory: Double] = [:]
        var trends: [ChecklistCategory: Trend] = [:]
        for category in ChecklistCategory.allCases {
            var early = CategorySums(), late = CategorySums()
            for index in rows.indices {
                let value = rows[index].average(category)
                if index < half { early.add(value) } else { late.add(value) }
            }
            var all = early
            all.sum += late.sum
            all.count += late.count
            if let mean = all.mean { averages[category] = mean }
            trends[category] = Trend(difference: late.mean.flatMap { l in early.mean.map { l - $0 } })
        }
        self.init(period: period, records: rows.count, categoryAverages: averages, trends: trends)
    }
}
