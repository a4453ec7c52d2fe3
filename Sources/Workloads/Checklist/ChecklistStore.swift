import KVStore

/// The checklist's collections in a store: records by day, their summaries derived in the same
/// transaction, and the summaries' month aggregates, also maintained in that transaction.
public struct ChecklistStore: Sendable {
    public let records: KVCollection<LogicalDay, DailyRecord>
    public let summaries: KVCollection<LogicalDay, DailySummary>
    /// One ``ChecklistMonth`` per month with a record, keyed by the month's first day.
    public let months: KVCollection<LogicalDay, ChecklistMonth>

    /// The records' collection name.
    public static let recordsName = "dailyRecords"

    public init(store: Store) throws {
        months = try store.collection("checklistMonths", key: LogicalDay.self, codec: FixedLayoutCodec<ChecklistMonth>())
        summaries = try store.collection(
            "dailySummaries", key: LogicalDay.self, codec: FixedLayoutCodec<DailySummary>(),
            aggregates: [Aggregation(months, bucket: { $0.firstOfMonth }, keys: { $0.daysOfMonth }, empty: ChecklistMonth()) { month, day, summary in
                month.add(summary, on: day)
            }])
        records = try store.collection(Self.recordsName, key: LogicalDay.self, value: DailyRecord.self,
                                       derived: [Derivation(summaries) { DailySummary($0) }])
    }
}
