import KVStore
import Testing
import TestSupport
import Workloads

/// The examples of doc comments, pasted as they are, so that they keep compiling and doing what
/// they say.
@Suite struct DocumentationExampleTests {
    let dir = TemporaryDirectory()

    /// The example of ``KVCollection`` (Sources/KVStore/Collection/KVCollection.swift).
    @Test func theKVCollectionExampleCompilesAndReadsTheWeek() throws {
        let store = try dir.store()
        let today = ChecklistDataset.today
        let record = DailyRecord(day: today - 1, scores: ["perceive": 3], memos: [:])

        // The example, as it is in the doc comment:
        let records = try store.collection("dailyRecords", key: LogicalDay.self, value: DailyRecord.self)
        try store.write { tx in try records.put(record, forKey: record.day, in: tx) }
        let lastWeek = try store.read { tx in try records.entries((today - 6)...today, in: tx) }

        #expect(lastWeek.map(\.key) == [today - 1])
    }
}
