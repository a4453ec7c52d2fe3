/// Per-bucket aggregates of a collection, kept in step in the same transaction as every put and
/// delete: like CouchDB's reduce views or TimescaleDB's continuous aggregates, but exact and never stale.
///
/// Each source key falls in one bucket (a month of days, say), and each bucket covers a closed range
/// of source keys. When an entry changes, its bucket's aggregate is computed again from the entries in
/// that range, in key order, inside the writing transaction; a bucket left without entries has no
/// aggregate. Readers then combine a dozen buckets instead of scanning hundreds of entries.
///
/// ```swift
/// let months = try store.collection("summaryMonths", key: LogicalDay.self, codec: FixedLayoutCodec<MonthTotals>())
/// let summaries = try store.collection(
///     "dailySummaries", key: LogicalDay.self, codec: FixedLayoutCodec<DailySummary>(),
///     aggregates: [Aggregation(months, bucket: { $0.firstOfMonth }, keys: { $0.daysOfMonth }, empty: MonthTotals()) { totals, day, summary in
///         totals.add(summary, on: day)
///     }])
/// ```
///
/// A bucket's range must contain every key the bucket function maps to it, and buckets must follow
/// the source's key order (a later key never falls in an earlier bucket); a bucket that does not
/// contain its key throws ``KVStoreError/invalidKey(collection:reason:)`` and the write is rolled back.
/// Aggregate a compact collection (a ``Derivation`` target with a ``FixedLayoutCodec``, say): every
/// write reads its bucket's entries again. The catalog marks the target `bucketed`, derived from the
/// source, so tools refuse to write it and ``Store/checkIntegrity(maxProblems:progress:)`` knows its
/// keys are buckets.
public struct Aggregation<Key: OrderedKey, Value>: Sendable {
    let targetName: String
    let targetDatabase: DatabaseHandle?
    /// Computes again the aggregate of the bucket holding the key, from `source` as the transaction sees it.
    let refresh: @Sendable (_ key: Key, _ source: KVCollection<Key, Value>, _ transaction: WriteTransaction) throws -> Void
    /// Computes every aggregate again from the whole of `source`.
    let rebuild: @Sendable (_ source: KVCollection<Key, Value>, _ transaction: WriteTransaction) throws -> Void
    /// A bucket key's bytes as text, for messages.
    let renderKey: @Sendable ([UInt8]) -> String
    /// What the target should hold, computed from the whole of `source`: bucket keys and aggregates, as bytes.
    let expected: @Sendable (_ source: KVCollection<Key, Value>, _ transaction: ReadTransaction) throws -> [(key: [UInt8], value: [UInt8])]

    /// - Parameters:
    ///   - target: the collection of aggregates, keyed by bucket.
    ///   - bucket: the bucket a source key falls in.
    ///   - keys: the source keys a bucket covers.
    ///   - empty: the aggregate of no entry.
    ///   - add: adds one entry to its bucket's aggregate; entries come in key order.
    public init<Bucket: OrderedKey, Aggregate>(
        _ target: KVCollection<Bucket, Aggregate>,
        bucket: @escaping @Sendable (Key) -> Bucket,
        keys: @escaping @Sendable (Bucket) -> ClosedRange<Key>,
        empty: Aggregate,
        add: @escaping @Sendable (inout Aggregate, Key, Value) -> Void
    ) where Aggregate: Sendable {
        targetName = target.name
        targetDatabase = target.database
        renderKey = { target.renderKey($0) }
        let targetName = target.name
        /// The bucket of `key` and the keys it covers; throws if the declaration breaks its own rule.
        @Sendable func bucketAndRange(of key: Key) throws -> (Bucket, ClosedRange<Key>) {
            let b = bucket(key)
            let range = keys(b)
            guard range.contains(key) else {
                throw KVStoreError.invalidKey(collection: targetName, reason: "the bucket \(b) of key \(key) does not cover it (\(range))")
            }
            return (b, range)
        }
        /// An aggregate as the target stores it.
        @Sendable func encoded(_ aggregate: Aggregate) throws -> [UInt8] {
            do {
                return try target.codec.encode(aggregate)
            } catch {
                throw KVStoreError.encodingFailed(collection: targetName, reason: "\(error)")
            }
        }
        /// Stores the aggregate of `bucket`, or deletes it when no entry fell in it.
        @Sendable func store(_ aggregate: Aggregate?, bucket: Bucket, in transaction: WriteTransaction) throws {
            guard let database = target.database else { throw KVStoreError.readOnly(path: target.store.directory) }
            let bucketKey = try target.checkedKey(bucket)
            if let aggregate {
                try transaction.put(database, bucketKey, try encoded(aggregate))
            } else {
                try transaction.delete(database, bucketKey)
            }
        }
        refresh = { key, source, transaction in
            let (b, range) = try bucketAndRange(of: key)
            var aggregate: Aggregate?
            try source.forEach(range, in: transaction) { key, value in
                add(&aggregate[default: empty], key, value)
                return true
            }
            try store(aggregate, bucket: b, in: transaction)
        }
        /// Every bucket's aggregate computed from the whole of `source`, in bucket order, as key and value bytes.
        @Sendable func computeAll(_ source: KVCollection<Key, Value>, in transaction: ReadTransaction,
                                  _ emit: ([UInt8], [UInt8]) throws -> Void) throws {
            var current: (bucket: Bucket, range: ClosedRange<Key>, aggregate: Aggregate)?
            var previous: Bucket?
            func flush() throws {
                guard let open = current else { return }
                try emit(try target.checkedKey(open.bucket), try encoded(open.aggregate))
            }
            try source.forEach(in: transaction) { key, value in
                if let open = current, !open.range.contains(key) {
                    try flush()
                    current = nil
                }
                if current == nil {
                    let (b, range) = try bucketAndRange(of: key)
                    if let previous, !(previous < b) {
                        throw KVStoreError.invalidKey(collection: targetName, reason: "the bucket \(b) of key \(key) does not follow the bucket \(previous) of an earlier key")
                    }
                    previous = b
                    current = (b, range, empty)
                }
                add(&current!.aggregate, key, value)
                return true
            }
            try flush()
        }
        rebuild = { source, transaction in
            guard let database = target.database else { throw KVStoreError.readOnly(path: target.store.directory) }
            try transaction.drop(database, delete: false)
            try computeAll(source, in: transaction) { key, value in try transaction.put(database, key, value) }
        }
        expected = { source, transaction in
            var all: [(key: [UInt8], value: [UInt8])] = []
            try computeAll(source, in: transaction) { all.append(($0, $1)) }
            return all
        }
    }
}

extension Optional {
    /// The wrapped value, or `empty` stored first: `aggregate[default: empty]` folds into a fresh one.
    fileprivate subscript(default empty: Wrapped) -> Wrapped {
        get { self ?? empty }
        set { self = newValue }
    }
}
