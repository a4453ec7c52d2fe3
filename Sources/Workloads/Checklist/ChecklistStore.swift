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
        let derived = try ChecklistSummaries(store: store)
        months = derived.months
        summaries = derived.summaries
        records = try store.collection(Self.recordsName, key: LogicalDay.self, value: DailyRecord.self,
                                       derived: [Derivation(summaries) { DailySummary($0) }])
    }

    /// The summaries and their month aggregates: what the dashboard and the streak read.
    public var derived: ChecklistSummaries { ChecklistSummaries(summaries: summaries, months: months) }
}

/// The checklist's derived collections alone: the day summaries and their month aggregates, which
/// are all that ``ChecklistStore/dashboard(_:today:in:)`` and ``ChecklistStore/streak(in:)`` read.
/// A process that only shows the dashboard (the widget) opens these two and not the records: the
/// records' collection has `Codable` values and a derivation, whose types the Swift runtime would
/// otherwise instantiate at the open (issue 39: 0.5M instructions of the widget's start).
///
/// ```swift
/// let derived = try ChecklistSummaries(store: container.store)
/// let year = try container.store.read { tx in try derived.dashboard([.year], today: today, in: tx) }
/// ```
public struct ChecklistSummaries: Sendable {
    public let summaries: KVCollection<LogicalDay, DailySummary>
    /// One ``ChecklistMonth`` per month with a record, keyed by the month's first day.
    public let months: KVCollection<LogicalDay, ChecklistMonth>

    /// Opens `checklistMonths` and `dailySummaries` (with the months as the summaries' aggregate), as
    /// ``ChecklistStore/init(store:)`` does.
    public init(store: Store) throws {
        months = try store.collection("checklistMonths", key: LogicalDay.self, codec: FixedLayoutCodec<ChecklistMonth>())
        summaries = try store.collection(
            "dailySummaries", key: LogicalDay.self, codec: FixedLayoutCodec<DailySummary>(),
            aggregates: [Aggregation(months, bucket: { $0.firstOfMonth }, keys: { $0.daysOfMonth }, empty: ChecklistMonth()) { month, day, summary in
                month.add(summary, on: day)
            }])
    }

    init(summaries: KVCollection<LogicalDay, DailySummary>, months: KVCollection<LogicalDay, ChecklistMonth>) {
        self.summaries = summaries
        self.months = months
    }
}

extension ChecklistStore {
    /// See ``ChecklistSummaries/dashboard(_:today:in:)``.
    public func dashboard(_ periods: [DashboardPeriod] = DashboardPeriod.allCases, today: LogicalDay,
                          in transaction: ReadTransaction) throws -> Dashboard {
        try derived.dashboard(periods, today: today, in: transaction)
    }

    /// See ``ChecklistSummaries/dashboardDayByDay(_:today:in:)``.
    public func dashboardDayByDay(_ periods: [DashboardPeriod] = DashboardPeriod.allCases, today: LogicalDay,
                                  in transaction: ReadTransaction) throws -> Dashboard {
        try derived.dashboardDayByDay(periods, today: today, in: transaction)
    }

    /// See ``ChecklistSummaries/streak(in:)``.
    public func streak(in transaction: ReadTransaction) throws -> Streak {
        try derived.streak(in: transaction)
    }

    /// See ``ChecklistSummaries/streakDayByDay(in:)``.
    public func streakDayByDay(in transaction: ReadTransaction) throws -> Streak {
        try derived.streakDayByDay(in: transaction)
    }
}
