import Testing
import Workloads

@Suite struct ChecklistDatasetTests {
    @Test func theDatasetIsTheSpecifiedOne() {
        let records = ChecklistDataset.records()
        #expect(records.count == 343)
        #expect(records.reduce(0) { $0 + $1.cachedInputCount } == 9288)
        #expect(records.first?.day.description == "2025-11-22")
        #expect(records.last?.day.description == "2026-11-21")
        // Day indexes with i % 17 == 5 have no record.
        let first = ChecklistDataset.firstDay.dayNumber
        let present: Set<Int> = Set(records.map { Int($0.day.dayNumber - first) })
        let missing: [Int] = (0..<365).filter { !present.contains($0) }
        let expected: [Int] = (0..<365).filter { $0 % 17 == 5 }
        #expect(missing == expected)
    }

    @Test func cacheFieldsAreComputedOnSave() {
        let record = DailyRecord(day: ChecklistDataset.today, scores: ["think.1": 4, "think.2": 2, "sustain.6": 5], memos: [:])
        #expect(record.cachedInputCount == 3)
        #expect(record.cachedCategoryAverages == ["think": 3, "sustain": 5])
        #expect(record.cachedTotalAverage == 11.0 / 3.0)
    }
}
