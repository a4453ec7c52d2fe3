import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport

/// The README example's observation lines (KVStoreTests' `ReadmeExampleTests` keeps the rest, without
/// SyncKit): word for word but for the root and for ending the loop, which the README leaves endless.
/// Part of the serialized ``ValueObservationTests``, which count observation threads.
extension ValueObservationTests {
    struct DailyRecord: Codable {
        var day: LogicalDay
        var scores: [String: Int]
    }

    @Test func theReadmeObservationRuns() async throws {
        let root = dir.path
        let container = try SharedContainer(groupIdentifier: "group.com.example.checklist", root: root)
        let records = try container.store.collection("dailyRecords", key: LogicalDay.self, value: DailyRecord.self)
        let today = LogicalDay(year: 2026, month: 11, day: 21)!
        container.store.addObserver(CommitNotifier(notifier: ChangeNotifier(container: container)))  // wakes observers

        var options = SharedContainer.Options()
        options.readOnly = true
        let widget = try SharedContainer(groupIdentifier: "group.com.example.checklist", root: root, options: options)
        let days = try widget.store.collection("dailyRecords", key: LogicalDay.self, value: DailyRecord.self)

        // The widget follows the app: this week's count now, then after each commit (of any process) that
        // changes it.
        let thisWeek = ValueObservation.tracking { tx in try days.entries((today - 6)...today, in: tx).count }.removeDuplicates()
        var counts: [Int] = []
        for try await count in thisWeek.values(in: widget) {
            counts.append(count)
            if count == 2 { break }
            try await container.store.write(author: "app") { tx in
                try records.put(DailyRecord(day: today - count, scores: [:]), forKey: today - count, in: tx)
            }
        }
        #expect(counts == [0, 1, 2])
    }
}
