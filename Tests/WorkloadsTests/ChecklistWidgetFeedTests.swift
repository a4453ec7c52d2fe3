import Foundation
import Testing
import TestSupport
import KVStore
import SyncKit
import Workloads

/// The checklist widget's feed payload, against values computed independently from the dataset.
@Suite struct ChecklistWidgetFeedTests {
    let dir = TemporaryDirectory()

    func seeded(_ records: [DailyRecord]) throws -> (SharedContainer, ChecklistStore) {
        let container = try dir.container("group.com.shibu.checklist")
        let checklist = try ChecklistStore(store: container.store)
        try container.store.write { tx in for r in records { try checklist.records.put(r, forKey: r.day, in: tx) } }
        return (container, checklist)
    }

    @Test func thePayloadOfTheOneYearDataset() throws {
        let records = ChecklistDataset.records()
        let (container, checklist) = try seeded(records)
        let payload = try ChecklistWidgetFeed.build(from: checklist, today: ChecklistDataset.today)

        // Independent: today's averages straight from the raw scores.
        let today = try #require(records.first { $0.day == ChecklistDataset.today })
        let scores = today.scores
        #expect(payload.day == ChecklistDataset.today)
        #expect(payload.totalAverage == Double(scores.values.reduce(0, +)) / Double(scores.count))
        var expectedCategories: [String: Double] = [:]
        for category in ChecklistCategory.allCases {
            let values = (1...6).compactMap { scores["\(category.rawValue).\($0)"] }
            if !values.isEmpty { expectedCategories[category.rawValue] = Double(values.reduce(0, +)) / Double(values.count) }
        }
        #expect(payload.categoryAverages == expectedCategories)
        #expect(payload.streak == Streak(current: 2, longest: 16))
        #expect(payload.sourceTransactionID == (try container.store.environmentInfo().lastTransactionID))

        // The latest message: the newest record with a memo, categories in their fixed order.
        let newest = try #require(records.sorted { $0.day > $1.day }.first { !$0.memos.isEmpty })
        let category = try #require(ChecklistCategory.allCases.first { newest.memos[$0.rawValue] != nil })
        #expect(payload.latestMessage == ChecklistWidgetFeed.LatestMessage(day: newest.day, category: category, text: newest.memos[category.rawValue]!))
        #expect(payload.latestMessage?.text.hasPrefix(ChecklistDataset.memoSentence) == true)

        // It survives publication unchanged.
        let feed = try WidgetFeed<ChecklistWidgetFeed>(name: ChecklistWidgetFeed.feedName, container: container)
        try feed.publish(payload)
        #expect(try feed.read().payload == payload)
    }

    @Test func noRecordTodayAndNoMemos() throws {
        // A day without a record (day index 362 is a gap), and records without memos.
        let gap = ChecklistDataset.firstDay + 362
        let plain = ChecklistDataset.records(days: 365).map { DailyRecord(day: $0.day, scores: $0.scores, memos: [:]) }
        let (_, checklist) = try seeded(plain)
        let payload = try ChecklistWidgetFeed.build(from: checklist, today: gap)
        #expect(payload.totalAverage == nil && payload.categoryAverages.isEmpty)
        #expect(payload.latestMessage == nil)
        #expect(payload.streak == Streak(current: 2, longest: 16))  // over all records

        // With memos, the latest one on or before `today` is chosen (not a later one).
        let (_, full) = try seeded(ChecklistDataset.records())
        let earlier = try ChecklistWidgetFeed.build(from: full, today: gap)
        let expected = try #require(ChecklistDataset.records().filter { $0.day <= gap && !$0.memos.isEmpty }.last)
        #expect(earlier.latestMessage?.day == expected.day)
    }
}
