import KVStore

/// The dashboard computed the plain way, from full records in memory, straight from `DESIGN.md`'s
/// definitions: the independent computation tests and benchmarks check ``ChecklistStore/dashboard(_:today:in:)``
/// against.
public enum DashboardReference {
    public static func dashboard(_ records: [DailyRecord], periods: [DashboardPeriod] = DashboardPeriod.allCases,
                                 today: LogicalDay) -> Dashboard {
        Dashboard(periods: periods.map { period(records, $0, today: today) }, streak: Streak(days: records.map(\.day)))
    }

    public static func period(_ records: [DailyRecord], _ period: DashboardPeriod, today: LogicalDay) -> DashboardPeriodResult {
        let range = period.range(endingAt: today)
        let inPeriod = records.filter { range.contains($0.day) }.sorted { $0.day < $1.day }
        let half = inPeriod.count / 2
        func mean(_ values: [Double]) -> Double? { values.isEmpty ? nil : values.reduce(0, +) / Double(values.count) }
        var averages: [ChecklistCategory: Double] = [:]
        var trends: [ChecklistCategory: Trend] = [:]
        for category in ChecklistCategory.allCases {
            let values = { (slice: ArraySlice<DailyRecord>) in slice.compactMap { $0.cachedCategoryAverages[category.rawValue] } }
            averages[category] = mean(values(inPeriod[...]))
            if let early = mean(values(inPeriod[..<half])), let late = mean(values(inPeriod[half...])) {
                let d = late - early
                trends[category] = d > 0.1 ? .rising : d < -0.1 ? .falling : .flat
            } else {
                trends[category] = .flat
            }
        }
        return DashboardPeriodResult(period: period, records: inPeriod.count, categoryAverages: averages, trends: trends)
    }
}
