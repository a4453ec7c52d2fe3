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
///
/// The target's own ``Aggregation``s follow its derived entries.
public struct Derivation<Key: OrderedKey, Value>: Sendable {
    let targetName: String
    let targetDatabase: DatabaseHandle?
    /// Puts the derived entry of `value` at the key (or deletes it when `value` is `nil` or derives
    /// nothing), without touching the target's aggregations.
    let write: @Sendable (_ keyBytes: [UInt8], _ value: Value?, _ transaction: WriteTransaction) throws -> Void
    /// Computes again the target's aggregates of the bucket holding `key`.
    let refreshTargetAggregations: @Sendable (_ key: Key, _ transaction: WriteTransaction) throws -> Void
    /// The derived entry's bytes for `value`, or `nil` when it derives nothing (integrity checks).
    let encode: @Sendable (Value) throws -> [UInt8]?
    /// Computes the target's aggregates again from the whole target.
    let rebuildTargetAggregations: @Sendable (_ transaction: WriteTransaction) throws -> Void

    /// - Parameters:
    ///   - target: the derived collection, with the same key type. Return `nil` from `transform` to
    ///     have no derived entry for a value.
    public init<Target>(_ target: KVCollection<Key, Target>, transform: @escaping @Sendable (Value) throws -> Target?) {
        targetName = target.name
        targetDatabase = target.database
        let codec = target.codec
        let encodeValue: @Sendable (Value) throws -> [UInt8]? = { value in try transform(value).map { try codec.encode($0) } }
        encode = encodeValue
        write = { keyBytes, value, transaction in
            guard let database = target.database else { return }
            if let value, let derived = try encodeValue(value) {
                try transaction.put(database, keyBytes, derived)
            } else {
                try transaction.delete(database, keyBytes)
            }
        }
        refreshTargetAggregations = { key, transaction in
            for aggregation in target.aggregations { try aggregation.refresh(key, target, transaction) }
        }
        rebuildTargetAggregations = { transaction in
            for aggregation in target.aggregations { try aggregation.rebuild(target, transaction) }
        }
    }
}
