/// A collection kept in step with a source collection: each put of a source value puts
/// `transform(value)` at the same key in the target, in the same transaction, and each delete deletes
/// it. Use it for compact summaries that hot paths scan instead of full records.
///
/// ```swift
/// let summaries = try store.collection("dailySummaries", key: LogicalDay.self,
///                                      codec: FixedLayoutCodec<DailySummary>())
/// let records = try store.collection("dailyRecords", key: LogicalDay.self, value: DailyRecord.self,
///                                    derived: [Derivation(summaries) { DailySummary($0) }])
/// ```
public struct Derivation<Key: OrderedKey, Value>: Sendable {
    let targetName: String
    let targetDatabase: DatabaseHandle?
    let encode: @Sendable (Value) throws -> [UInt8]?

    /// - Parameters:
    ///   - target: the derived collection, with the same key type. Return `nil` from `transform` to
    ///     have no derived entry for a value.
    public init<Target>(_ target: KVCollection<Key, Target>, transform: @escaping @Sendable (Value) throws -> Target?) {
        targetName = target.name
        targetDatabase = target.database
        let codec = target.codec
        encode = { value in try transform(value).map { try codec.encode($0) } }
    }
}
