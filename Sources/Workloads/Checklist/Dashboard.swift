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

extension ChecklistSummaries {
    /// The dashboard for `periods`, ending `today`, read in `transaction` from the month aggregates
    /// (`checklistMonths`): each period combines the months wholly inside it, and scans the day
    /// summaries only of the months cut by its ends or split by its halves; the streak comes from the
    /// months alone. The result is the same, to the bit, as ``dashboardDayByDay(_:today:in:)``'s (sums
    /// are exact). A store whose months have not been computed yet (a read-only process before any
    /// writer opened it with this version) is read day by day.
    ///
    /// ```swift
    /// let dashboard = try store.read { tx in try checklist.dashboard(today: today, in: tx) }
    /// dashboard[.month]?.categoryAverages[.think]
    /// ```
    ///
    /// Valid only inside the transaction's closure.
    /// - Throws: `KVStoreError.corruptValue` for a summary or month of the wrong size; LMDB errors.
    public func dashboard(_ periods: [DashboardPeriod] = DashboardPeriod.allCases, today: LogicalDay,
                          in transaction: ReadTransaction) throws -> Dashboard {
        let all = try monthAggregates(in: transaction)
        if all.isEmpty, try summaries.count(in: transaction) > 0 {
            return try dashboardDayByDay(periods, today: today, in: transaction)
        }
        var runs = RunsAccumulator()
        for month in all { runs.add(month) }
        let results = try periods.map { period in
            try DashboardPeriodResult(period, today: today, months: all) { range in
                try summaryRows(range, in: transaction)
            }
        }
        return Dashboard(periods: results, streak: runs.streak)
    }

    /// The dashboard for `periods`, ending `today`, read in `transaction` day by day: one cursor scan
    /// of the compact `dailySummaries` over the longest period (each summary read from the memory map
    /// without a copy; no `DailyRecord` is decoded), and one scan of their day keys for the streak.
    /// ``dashboard(_:today:in:)`` gives the same result from the month aggregates.
    ///
    /// Valid only inside the transaction's closure.
    /// - Throws: `KVStoreError.corruptValue` for a summary of the wrong size; LMDB errors.
    public func dashboardDayByDay(_ periods: [DashboardPeriod] = DashboardPeriod.allCases, today: LogicalDay,
                                  in transaction: ReadTransaction) throws -> Dashboard {
        let longest = periods.map(\.days).max() ?? 0
        let rows = longest > 0 ? try summaryRows((today - (longest - 1))...today, in: transaction) : []
        let results = periods.map { period in
            let first = today.dayNumber - Int32(period.days - 1)
            let start = rows.firstIndex { $0.dayNumber >= first } ?? rows.count
            return DashboardPeriodResult(period, summaries: rows[start...])
        }
        return Dashboard(periods: results, streak: try streakDayByDay(in: transaction))
    }

    /// Every stored month, in order, each checked to be one that a write could give (another process,
    /// perhaps a buggy one, may have written them raw): a bad one throws rather than sizing a scan.
    func monthAggregates(in transaction: ReadTransaction) throws -> [ChecklistMonth] {
        var all: [ChecklistMonth] = []
        all.reserveCapacity(16)
        let codec = FixedLayoutCodec<ChecklistMonth>()
        try months.forEachBytes(LogicalDay(dayNumber: .min)..., in: transaction) { key, value in
            let month = try decodeFixed(codec, value, key: key, in: months)
            guard month.records > 0, month.firstDay <= month.lastDay, Int(month.lastDay) - Int(month.firstDay) < 31,
                  Int(month.records) <= Int(month.lastDay) - Int(month.firstDay) + 1 else {
                throw KVStoreError.corruptValue(collection: months.name, key: Self.render(key),
                                                reason: "the month's days (\(month.records) from \(month.firstDay) to \(month.lastDay)) are not a month's")
            }
            all.append(month)
            return true
        }
        return all
    }

    /// The summaries of the days in `range`, in day order.
    func summaryRows(_ range: ClosedRange<LogicalDay>, in transaction: ReadTransaction) throws -> [DailySummary] {
        var rows: [DailySummary] = []
        rows.reserveCapacity(min(range.count, 366))
        let codec = FixedLayoutCodec<DailySummary>()
        try summaries.forEachBytes(range, in: transaction) { key, value in
            rows.append(try decodeFixed(codec, value, key: key, in: summaries))
            return true
        }
        return rows
    }

    private func decodeFixed<V>(_ codec: FixedLayoutCodec<V>, _ value: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer,
                                in collection: KVCollection<LogicalDay, V>) throws -> V {
        do {
            return try codec.decode(value)
        } catch {
            throw KVStoreError.corruptValue(collection: collection.name, key: Self.render(key), reason: "\(error)", underlying: .init(error))
        }
    }

    /// A stored key as a day, or as hex if it is not one.
    private static func render(_ key: UnsafeRawBufferPointer) -> String {
        if let day = try? LogicalDay.decodeKey(key) { return "\(day)" }
        return "0x" + Hex.encode(key)
    }
}

extension DashboardPeriodResult {
    /// The period ending `today` computed from the month aggregates: months wholly inside the period
    /// are added whole, and `rows` reads the day summaries of a month cut by the period's first day or
    /// by `today`, or split by the period's halves.
    init(_ period: DashboardPeriod, today: LogicalDay, months: [ChecklistMonth],
         rows: (ClosedRange<LogicalDay>) throws -> [DailySummary]) throws {
        let first = Int(today.dayNumber) - (period.days - 1)
        let last = Int(today.dayNumber)
        // The months that overlap the period are [lo, hi). Only the first and the last of them can be
        // cut by its ends (the months are disjoint and in order): their days in the period are read
        // from the summaries; the ones between are taken whole.
        var lo = months.startIndex
        while lo < months.endIndex && Int(months[lo].lastDay) < first { lo += 1 }
        var hi = lo
        while hi < months.endIndex && Int(months[hi].firstDay) <= last { hi += 1 }
        func isWhole(_ month: ChecklistMonth) -> Bool { Int(month.firstDay) >= first && Int(month.lastDay) <= last }
        func daysInPeriod(_ month: ChecklistMonth) throws -> [DailySummary] {
            try rows(LogicalDay(dayNumber: Int32(max(first, Int(month.firstDay))))...LogicalDay(dayNumber: Int32(min(last, Int(month.lastDay)))))
        }
        var head: [DailySummary] = [], tail: [DailySummary] = []
        var wholeStart = lo, wholeEnd = hi
        if lo < hi && !isWhole(months[lo]) {
            head = try daysInPeriod(months[lo])
            wholeStart = lo + 1
        }
        if wholeStart < hi && !isWhole(months[hi - 1]) {
            tail = try daysInPeriod(months[hi - 1])
            wholeEnd = hi - 1
        }
        var total = head.count + tail.count
        for month in months[wholeStart..<wholeEnd] { total += Int(month.records) }

        let half = total / 2
        var early = CategoryTotals(), late = CategoryTotals()
        var index = 0
        func addDays(_ days: [DailySummary]) {
            for day in days {
                if index < half { early.add(day) } else { late.add(day) }
                index += 1
            }
        }
        addDays(head)
        for month in months[wholeStart..<wholeEnd] {
            let count = Int(month.records)
            if index + count <= half || index >= half {
                if index < half { early.add(month) } else { late.add(month) }
                index += count
            } else {
                // The month the halves split: its days, one by one.
                addDays(try rows(LogicalDay(dayNumber: month.firstDay)...LogicalDay(dayNumber: month.lastDay)))
            }
        }
        addDays(tail)
        self.init(period, records: total, early: early, late: late)
    }

    /// The result from the sums of the period's earlier and later halves: what both ways of computing
    /// a period end with.
    init(_ period: DashboardPeriod, records: Int, early: CategoryTotals, late: CategoryTotals) {
        var averages: [ChecklistCategory: Double] = [:]
        var trends: [ChecklistCategory: Trend] = [:]
        averages.reserveCapacity(ChecklistCategory.allCases.count)
        trends.reserveCapacity(ChecklistCategory.allCases.count)
        for category in ChecklistCategory.allCases {
            var all = early[category]
            all.add(late[category])
            if let mean = all.mean { averages[category] = mean }
            trends[category] = Trend(difference: late[category].mean.flatMap { l in early[category].mean.map { l - $0 } })
        }
        self.init(period: period, records: records, categoryAverages: averages, trends: trends)
    }
}

extension DashboardPeriodResult {
    /// The period computed from its days' summaries, in day order (exactly the period's days: the
    /// caller selects them). Shared by every implementation the benchmarks compare, so that they differ
    /// only in how they fetch the summaries.
    public init(_ period: DashboardPeriod, summaries rows: ArraySlice<DailySummary>) {
        let half = rows.startIndex + rows.count / 2
        var early = CategoryTotals(), late = CategoryTotals()
        for index in rows.indices {
            if index < half { early.add(rows[index]) } else { late.add(rows[index]) }
        }
        self.init(period, records: rows.count, early: early, late: late)
    }
}
