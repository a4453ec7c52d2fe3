import KVStore
import SyncKit

/// What the checklist's widgets show (seed `004_…`, §8.8), published as a ``SyncKit/WidgetFeed`` so
/// that widgets never open the store: today's cached averages, the streak, and the latest message.
///
/// ```swift
/// let checklist = try ChecklistStore(store: container.store)
/// let payload = try ChecklistWidgetFeed.build(from: checklist, today: ChecklistDataset.today)
/// let feed = try WidgetFeed<ChecklistWidgetFeed>(name: ChecklistWidgetFeed.feedName, container: container)
/// try feed.publish(payload)
/// ```
///
/// **The latest message.** The seed's widget shows the latest `RenderedMessage` (the feedback text of
/// the notification channel); this workload has no feedback engine, so the closest stored text stands
/// in: the most recent memo. That is the memo of the latest record on or before ``day`` that has one,
/// taking its categories in their fixed order (``ChecklistCategory/allCases``) and the first that has
/// a memo. `nil` if no record has a memo.
///
/// A plain value; CBOR-encoded in the feed.
public struct ChecklistWidgetFeed: Codable, Hashable, Sendable {
    /// The feed name the app publishes under: `Snapshots/feeds/checklist.feed`.
    public static let feedName = "checklist"

    /// A memo and where it comes from.
    public struct LatestMessage: Codable, Hashable, Sendable {
        public var day: LogicalDay
        public var category: ChecklistCategory
        public var text: String

        public init(day: LogicalDay, category: ChecklistCategory, text: String) {
            self.day = day
            self.category = category
            self.text = text
        }
    }

    /// The day the feed was built for ("today").
    public var day: LogicalDay
    /// Today's `cachedTotalAverage`; `nil` when there is no record for today.
    public var totalAverage: Double?
    /// Today's `cachedCategoryAverages` (category raw value → mean); empty when there is no record.
    public var categoryAverages: [String: Double]
    /// Over all records (see ``Streak``).
    public var streak: Streak
    /// The most recent memo on or before ``day``; see the type's discussion.
    public var latestMessage: LatestMessage?
    /// The store state the payload was read from (`mdb_txn_id` of its read transaction).
    public var sourceTransactionID: Int

    public init(day: LogicalDay, totalAverage: Double?, categoryAverages: [String: Double], streak: Streak,
                latestMessage: LatestMessage?, sourceTransactionID: Int) {
        self.day = day
        self.totalAverage = totalAverage
        self.categoryAverages = categoryAverages
        self.streak = streak
        self.latestMessage = latestMessage
        self.sourceTransactionID = sourceTransactionID
    }

    /// Builds the payload from what `transaction` sees: today's record, the day keys for the streak,
    /// and records from today backwards until one has a memo.
    ///
    /// Valid only inside the transaction's closure.
    ///
    /// - Throws: ``KVStore/KVStoreError/corruptValue(collection:key:reason:underlying:)`` for a record that does
    ///   not decode; ``KVStore/LMDBError`` if a read fails.
    public init(checklist: ChecklistStore, today: LogicalDay, in transaction: ReadTransaction) throws {
        let record = try checklist.records.get(today, in: transaction)
        var latest: LatestMessage?
        try checklist.records.forEach(...today, reverse: true, in: transaction) { day, record in
            for category in ChecklistCategory.allCases {
                if let memo = record.memos[category.rawValue], !memo.isEmpty {
                    latest = LatestMessage(day: day, category: category, text: memo)
                    return false
                }
            }
            return true
        }
        self.init(day: today, totalAverage: record?.cachedTotalAverage,
                  categoryAverages: record?.cachedCategoryAverages ?? [:],
                  streak: try checklist.streak(in: transaction), latestMessage: latest,
                  sourceTransactionID: transaction.transactionID)
    }

    /// Builds the payload in one read transaction of the checklist's store.
    ///
    /// - Throws: As ``init(checklist:today:in:)``.
    public static func build(from checklist: ChecklistStore, today: LogicalDay) throws -> ChecklistWidgetFeed {
        try checklist.records.store.read { transaction in
            try ChecklistWidgetFeed(checklist: checklist, today: today, in: transaction)
        }
    }
}
