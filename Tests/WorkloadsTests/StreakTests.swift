import Foundation
import Testing
import TestSupport
import KVStore
import Workloads

/// The streak of DESIGN.md, against an independent walk over the calendar.
@Suite struct StreakTests {
    let dir = TemporaryDirectory()

    /// Independent: walks every calendar day from the first to the last record and counts runs of
    /// days that have a record (no sorting, no accumulator).
    static func expectedStreak(_ records: [DailyRecord]) -> (current: Int, longest: Int) {
        let present = Set(records.map(\.day.dayNumber))
        guard let first = present.min(), let last = present.max() else { return (0, 0) }
        var longest = 0, run = 0
        for day in first...last {
            run = present.contains(day) ? run + 1 : 0
            longest = max(longest, run)
        }
        return (run, longest)  // the run that ends at `last`, the most recent record
    }

    @Test func theOneYearDatasetHasCurrentTwoAndLongestSixteen() throws {
        let records = ChecklistDataset.records()
        let expected = Self.expectedStreak(records)
        // Gaps are at day indexes i % 17 == 5; the last is i = 362, so the final run is 363…364, and
        // the runs between gaps are 16 days long.
        #expect(expected == (2, 16))
        #expect(Streak(days: records.map(\.day)) == Streak(current: 2, longest: 16))
        #expect(Streak(days: records.map(\.day).shuffled()) == Streak(current: 2, longest: 16))

        let store = try dir.store()
        let checklist = try ChecklistStore(store: store)
        try store.write { tx in for r in records { try checklist.records.put(r, forKey: r.day, in: tx) } }
        #expect(try store.read { try checklist.streak(in: $0) } == Streak(current: 2, longest: 16))
    }

    @Test func prefixesOfTheDatasetAgreeWithTheIndependentWalk() {
        for days in [0, 1, 5, 6, 7, 22, 23, 40, 100, 200, 365] {
            let records = ChecklistDataset.records(days: days)
            let expected = Self.expectedStreak(records)
            let streak = Streak(days: records.map(\.day))
            #expect(streak.current == expected.current && streak.longest == expected.longest, "days \(days)")
        }
    }

    @Test func edgeCases() {
        let d = ChecklistDataset.firstDay
        #expect(Streak(days: [LogicalDay]()) == Streak(current: 0, longest: 0))
        #expect(Streak(days: [d]) == Streak(current: 1, longest: 1))
        #expect(Streak(days: [d, d, d + 1]) == Streak(current: 2, longest: 2))  // duplicates count once
        #expect(Streak(days: [d + 5, d, d + 1, d + 2]) == Streak(current: 1, longest: 3))  // any order
        // `current` ends at the most recent record, even when that is long ago.
        #expect(Streak(days: [d, d + 1, d + 3, d + 4, d + 5]) == Streak(current: 3, longest: 3))
        #expect(Streak(days: [d - 1, d]) == Streak(current: 2, longest: 2))  // across day 0 of the epoch
        #expect(Streak(days: [LogicalDay(dayNumber: -1), LogicalDay(dayNumber: 0)]) == Streak(current: 2, longest: 2))
    }
}
