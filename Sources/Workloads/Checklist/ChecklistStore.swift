import KVStore

/// The checklist's collections in a store: records by day, and their summaries derived in the same
/// transaction.
public struct ChecklistStore: Sendable {
    public let records: KVCollection<LogicalDay, DailyRecord>
    public let summaries: KVCollection<LogicalDay, DailySummary>

    /// The records' collection name.
    public static let recordsName = "dailyRecords"

    public init(store: Store) throws {
        summaries = try store.collection("dailySummaries", key: LogicalDay.self, codec: FixedLayoutCodec<DailySummary>())
        records = try store.collection(Self.recordsName, key: LogicalDay.self, value: DailyRecord.self,
                                       derived: [Derivation(summaries) { DailySummary($0) }])
    }
}
