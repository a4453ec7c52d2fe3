import Foundation
import KVStore
import Testing
import TestSupport
import Workloads

/// The checklist's month aggregates (`checklistMonths`, an `Aggregation` of `dailySummaries`) and the
/// dashboard read from them: equal, to the bit, to the day-by-day dashboard on the whole dataset and
/// after every kind of write, kept in step by every process that writes, and rebuilt for a store
/// written before they existed.
@Suite struct MonthAggregateTests {
    let dir = TemporaryDirectory()

    /// The months recomputed from the stored summaries, the plain way.
    static func expectedMonths(_ checklist: ChecklistStore, in tx: ReadTransaction) throws -> [LogicalDay: ChecklistMonth] {
        var months: [LogicalDay: ChecklistMonth] = [:]
        try checklist.summaries.forEach(in: tx) { day, summary in
            months[day.firstOfMonth, default: ChecklistMonth()].add(summary, on: day)
            return true
        }
        return months
    }

    static func storedMonths(_ checklist: ChecklistStore, in tx: ReadTransaction) throws -> [LogicalDay: ChecklistMonth] {
        Dictionary(uniqueKeysWithValues: try checklist.months.entries(in: tx).map { ($0.key, $0.value) })
    }

    /// Months as stored equal months recomputed; the integrity check agrees; and the dashboard from the
    /// months equals the day-by-day one for every `today` in `days`.
    static func expectConsistent(_ checklist: ChecklistStore, todays days: [LogicalDay],
                                 sourceLocation: SourceLocation = #_sourceLocation) throws {
        try checklist.records.store.read { tx in
            #expect(try storedMonths(checklist, in: tx) == expectedMonths(checklist, in: tx), sourceLocation: sourceLocation)
            #expect(try checklist.summaries.checkMaintainedData(in: tx).isEmpty, sourceLocation: sourceLocation)
            for today in days {
                let fromMonths = try checklist.dashboard(today: today, in: tx)
                let dayByDay = try checklist.dashboardDayByDay(today: today, in: tx)
                #expect(fromMonths == dayByDay, "today \(today)", sourceLocation: sourceLocation)
            }
        }
    }

    @Test(.blockingWork) func theDashboardFromMonthsEqualsTheDayByDayOneForEveryDayOfTheDataset() throws {
        let records = ChecklistDataset.records()
        let checklist = try ChecklistStore(store: try dir.store())
        try checklist.records.store.write { tx in
            for record in records { try checklist.records.put(record, forKey: record.day, in: tx) }
        }
        let first = records.first!.day, last = records.last!.day
        // Every day from before the first record to a month past the last: periods cut months at every
        // possible day, start before any record, and end past the last one.
        let todays = Array((first - 3)...(last + 40))
        try Self.expectConsistent(checklist, todays: todays)
        try checklist.records.store.read { tx in
            #expect(try checklist.months.count(in: tx) == 13)
            let dashboard = try checklist.dashboard(today: ChecklistDataset.today, in: tx)
            #expect(dashboard[.year]?.records == 343)
            #expect(dashboard.streak == Streak(current: 2, longest: 16))
            // And against the independent reference, from full records in memory.
            DashboardTests.expectClose(dashboard, DashboardReference.dashboard(records, today: ChecklistDataset.today))
        }
    }

    @Test(.blockingWork) func overwritesDeletesAndOutOfOrderWritesKeepTheMonthsExact() throws {
        let records = ChecklistDataset.records()
        let checklist = try ChecklistStore(store: try dir.store())
        var rng = SplitMix64(seed: 42)
        // Records in a shuffled order, a batch per transaction, with overwrites and deletes mixed in.
        var order = records.shuffled(using: &rng)
        var removed: [DailyRecord] = []
        while !order.isEmpty {
            let batch = order.prefix(25)
            order.removeFirst(batch.count)
            try checklist.records.store.write { tx in
                for record in batch {
                    try checklist.records.put(record, forKey: record.day, in: tx)
                    switch Int(rng.next() % 10) {
                    case 0:
                        // Overwritten with other scores (a category dropped, another changed).
                        var scores = record.scores.filter { !$0.key.hasPrefix("perceive.") }
                        scores["think.1"] = 1 + Int(rng.next() % 5)
                        try checklist.records.put(DailyRecord(day: record.day, scores: scores, memos: record.memos), forKey: record.day, in: tx)
                    case 1:
                        try checklist.records.delete(record.day, in: tx)
                        removed.append(record)
                    default: break
                    }
                }
            }
            try Self.expectConsistent(checklist, todays: [ChecklistDataset.today, ChecklistDataset.today - 100])
        }
        #expect(!removed.isEmpty)
        // Deleting every record of a month removes its aggregate.
        let month = ChecklistDataset.today.firstOfMonth - 40
        try checklist.records.store.write { tx in
            for day in month.daysOfMonth { try checklist.records.delete(day, in: tx) }
        }
        #expect(try checklist.records.store.read { tx in try checklist.months.get(month.firstOfMonth, in: tx) } == nil)
        try Self.expectConsistent(checklist, todays: Array(stride(from: ChecklistDataset.today - 400, through: ChecklistDataset.today, by: 7)))
        // removeAll empties the months too.
        try checklist.records.store.write { tx in try checklist.records.removeAll(in: tx) }
        #expect(try checklist.records.store.read { tx in try checklist.months.count(in: tx) } == 0)
    }

    @Test(.blockingWork) func aStoreWrittenBeforeMonthsExistedGetsThemWhenAWriterOpensIt() throws {
        let directory: String
        do {
            let store = try dir.store()
            // The collections as an earlier version declared them: summaries without aggregates.
            let summaries = try store.collection("dailySummaries", key: LogicalDay.self, codec: FixedLayoutCodec<DailySummary>())
            let records = try store.collection(ChecklistStore.recordsName, key: LogicalDay.self, value: DailyRecord.self,
                                               derived: [Derivation(summaries) { DailySummary($0) }])
            let dataset = ChecklistDataset.records()
            try store.write { tx in for record in dataset { try records.put(record, forKey: record.day, in: tx) } }
            directory = store.directory
        }

        // A read-only process of the new version, before any writer upgraded the store: no months, so
        // the dashboard is read day by day, and gives the same result.
        do {
            var readOnly = Store.Options()
            readOnly.readOnly = true
            let reader = try Store(directory: directory, options: readOnly)
            let oldChecklist = try ChecklistStore(store: reader)
            try reader.read { tx in
                #expect(try oldChecklist.months.count(in: tx) == 0)
                let dashboard = try oldChecklist.dashboard(today: ChecklistDataset.today, in: tx)
                #expect(try dashboard == oldChecklist.dashboardDayByDay(today: ChecklistDataset.today, in: tx))
                #expect(dashboard[.year]?.records == 343)
            }
        }

        // The first writer of the new version computes them, and the catalog says what they are.
        let checklist = try ChecklistStore(store: try Store(directory: directory))
        try Self.expectConsistent(checklist, todays: [ChecklistDataset.today])
        let entry = try checklist.records.store.catalogEntry(forCollection: "checklistMonths")
        #expect(entry?.derivedFrom == "dailySummaries")
        #expect(entry?.bucketed == true)
        #expect(try checklist.records.store.catalogEntry(forCollection: "dailySummaries")?.derived == ["checklistMonths"])
        #expect(try checklist.records.store.checkIntegrity().problems.isEmpty)
    }

    @Test(.blockingWork) func monthsWrittenByTwoProcessesAtOnceStayExact() throws {
        let group = "group.com.example.months"
        // Two processes write alternate days of the same months, one transaction per record, at once.
        let start = Int(ChecklistDataset.today.dayNumber) - 120
        let even = try BackgroundProcess.helper(["checklist-write", dir.path, group, String(start), "2", "60", "1"])
        let odd = try BackgroundProcess.helper(["checklist-write", dir.path, group, String(start + 1), "2", "60", "2"])
        for process in [even, odd] {
            let result = process.wait(timeout: 120)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.lines.last == "ok 60")
        }
        let container = try dir.container(group)
        let checklist = try ChecklistStore(store: container.store)
        #expect(try container.store.read { tx in try checklist.records.count(in: tx) } == 120)
        let today = LogicalDay(dayNumber: Int32(start + 119))
        try Self.expectConsistent(checklist, todays: Array((today - 10)...today))
        // 120 consecutive days with a record: one run across four or five months.
        let streak = try container.store.read { tx in try checklist.dashboard(today: today, in: tx).streak }
        #expect(streak == Streak(current: 120, longest: 120))
    }

    @Test(.blockingWork) func aCorruptMonthWrittenByAnotherProcessIsAnErrorNotATrap() throws {
        let checklist = try ChecklistStore(store: try dir.store())
        let records = ChecklistDataset.records()
        try checklist.records.store.write { tx in
            for record in records { try checklist.records.put(record, forKey: record.day, in: tx) }
        }
        let store = checklist.records.store
        let raw = try #require(try store.rawDatabase(named: checklist.months.databaseName))
        let key = ChecklistDataset.today.firstOfMonth.encodedKey
        // A month whose last day comes before its first (a range would trap), then one spanning years
        // (a scan would be sized by it), then one of the wrong size.
        var month = ChecklistMonth()
        month.records = 3
        month.firstDay = ChecklistDataset.today.dayNumber
        month.lastDay = ChecklistDataset.today.dayNumber - 5
        var wide = month
        wide.lastDay = ChecklistDataset.today.dayNumber + 5_000
        for bytes in [withUnsafeBytes(of: month) { Array($0) }, withUnsafeBytes(of: wide) { Array($0) }, [1, 2, 3]] {
            try store.write { tx in try tx.rawPut(raw, key, bytes) }
            let error = #expect(throws: KVStoreError.self) {
                try store.read { tx in try checklist.dashboard(today: ChecklistDataset.today, in: tx) }
            }
            #expect("\(error.map { "\($0)" } ?? "")".contains("checklistMonths"))
            // The integrity check names the stale aggregate.
            let problems = try store.read { tx in try checklist.summaries.checkMaintainedData(in: tx) }
            #expect(problems.contains { $0.kind == .derivedEntryMismatch && $0.location == "checklistMonths" })
        }
    }

    @Test(.blockingWork) func monthBucketsOfDays() throws {
        let day = LogicalDay("2024-02-17")!
        #expect(day.firstOfMonth == LogicalDay("2024-02-01")!)
        #expect(day.daysOfMonth == LogicalDay("2024-02-01")!...LogicalDay("2024-02-29")!)
        #expect(LogicalDay("2023-02-28")!.daysOfMonth.count == 28)
        #expect(LogicalDay("2026-12-31")!.daysOfMonth == LogicalDay("2026-12-01")!...LogicalDay("2026-12-31")!)
        #expect(LogicalDay("1969-12-31")!.firstOfMonth == LogicalDay("1969-12-01")!)
        // At the ends of Int32 the month is cut, without trapping.
        for extreme in [LogicalDay(dayNumber: .min), LogicalDay(dayNumber: .max)] {
            #expect(extreme.daysOfMonth.contains(extreme))
            #expect(extreme.daysOfMonth.contains(extreme.firstOfMonth))
        }
    }

    @Test(.blockingWork) func exactSumsDoNotDependOnGrouping() {
        var rng = SplitMix64(seed: 7)
        let values = (0..<1_000).map { _ in 1 + Double(rng.next() % 1_000_000) / 250_000 }
        var whole = ExactSum()
        for v in values { whole.add(v) }
        var grouped = ExactSum()
        for chunk in stride(from: 0, to: values.count, by: 31) {
            var part = ExactSum()
            for v in values[chunk..<min(chunk + 31, values.count)] { part.add(v) }
            grouped.add(part)
        }
        #expect(whole == grouped)
        #expect(abs(whole.value - values.reduce(0, +)) < 1e-9)
        // Garbage from a corrupt summary is clamped, not a trap.
        var garbage = ExactSum()
        for v in [Double.infinity, -.infinity, .nan, 1e300, -1e300, .greatestFiniteMagnitude] { garbage.add(v) }
        #expect(garbage.value.isFinite)
    }
}
