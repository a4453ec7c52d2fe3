import KVStore
import Testing
import TestSupport
import Workloads

@Suite struct DashboardTests {
    let dir = TemporaryDirectory()

    /// Compares two dashboards: equal counts, trends and streaks, averages within rounding.
    static func expectClose(_ a: Dashboard, _ b: Dashboard) {
        #expect(a.streak == b.streak)
        #expect(a.periods.map(\.period) == b.periods.map(\.period))
        for (x, y) in zip(a.periods, b.periods) {
            #expect(x.records == y.records, "\(x.period)")
            #expect(x.trends == y.trends, "\(x.period)")
            #expect(Set(x.categoryAverages.keys) == Set(y.categoryAverages.keys), "\(x.period)")
            for (category, value) in x.categoryAverages {
                #expect(abs(value - (y.categoryAverages[category] ?? .nan)) < 1e-12, "\(x.period) \(category)")
            }
        }
    }

    @Test func theStoreComputesWhatTheDefinitionsSay() throws {
        let records = ChecklistDataset.records()
        let checklist = try ChecklistStore(store: try dir.store())
        try checklist.records.store.write { tx in
            for record in records { try checklist.records.put(record, forKey: record.day, in: tx) }
        }
        let today = ChecklistDataset.today
        let stored = try checklist.records.store.read { tx in try checklist.dashboard(today: today, in: tx) }
        let reference = DashboardReference.dashboard(records, today: today)
        Self.expectClose(stored, reference)

        // Record counts from the dataset's rule alone: day index i has no record when i % 17 == 5.
        for period in DashboardPeriod.allCases {
            let expected = ((365 - period.days)..<365).filter { $0 % 17 != 5 }.count
            #expect(stored[period]?.records == expected, "\(period)")
        }
        #expect(stored[.year]?.records == 343)
        #expect(stored.streak == Streak(current: 2, longest: 16))
        // Every category has values in every period of this dataset.
        #expect(stored.periods.allSatisfy { $0.categoryAverages.count == 5 })

        // A period asked for alone gives the same answer; an empty store gives empty periods.
        let month = try checklist.records.store.read { tx in try checklist.dashboard([.month], today: today, in: tx) }
        #expect(month.periods == [stored[.month]!])
        let empty = try ChecklistStore(store: try dir.store("empty"))
        let nothing = try empty.records.store.read { tx in try empty.dashboard(today: today, in: tx) }
        #expect(nothing.periods.allSatisfy { $0.records == 0 && $0.categoryAverages.isEmpty && $0.trends.values.allSatisfy { $0 == .flat } })
        #expect(nothing.streak == Streak(current: 0, longest: 0))
    }

    @Test func trendsFollowTheSplitAtHalfTheRecords() throws {
        // Five days: the first two average 2, the last three 4 for `think`; nothing for the others.
        let today = LogicalDay(year: 2026, month: 1, day: 10)!
        let records = (0..<5).map { i in
            DailyRecord(day: today - (4 - i), scores: ["think.1": i < 2 ? 2 : 4], memos: [:])
        }
        let checklist = try ChecklistStore(store: try dir.store())
        try checklist.records.store.write { tx in for r in records { try checklist.records.put(r, forKey: r.day, in: tx) } }
        let week = try checklist.records.store.read { tx in try checklist.dashboard([.week], today: today, in: tx) }[.week]!
        #expect(week.records == 5)
        #expect(week.trends[.think] == .rising)
        #expect(week.trends[.perceive] == .flat)
        #expect(week.categoryAverages == [.think: 16.0 / 5.0])
        Self.expectClose(Dashboard(periods: [week], streak: Streak(current: 5, longest: 5)),
                         DashboardReference.dashboard(records, periods: [.week], today: today))
    }
}
