internal import CLMDB

/// A secondary index of a collection, maintained in the same transaction as every put and delete.
///
/// ```swift
/// // BillingEvent by (subscriptionId, billedAt)
/// let bySubscription = Index<BillingEvent, Pair<UUID, Date>>("bySubscription") {
///     Pair($0.subscriptionId, $0.billedAt)
/// }
/// let events = try store.collection("billingEvents", key: UUID.self, value: BillingEvent.self,
///                                   indexes: [bySubscription])
/// let march = try store.read { tx in
///     try events.entries(in: bySubscription, prefix: subscriptionID, in: tx)
/// }
/// ```
///
/// Index keys need not be unique: each index entry is the index key followed by the primary key, so
/// equal index keys come back in primary-key order. Return `nil` from the key function to leave a
/// value out of the index. An index added to an existing collection is built when the collection is
/// opened; one that is no longer declared is dropped.
public struct Index<Value, IndexKey: OrderedKey>: IndexDefinition, Sendable {
    public let name: String
    let key: @Sendable (Value) -> IndexKey?

    public init(_ name: String, key: @escaping @Sendable (Value) -> IndexKey?) {
        self.name = name
        self.key = key
    }

    public var keyEncoding: KeyEncoding { IndexKey.keyEncoding }

    public func indexPrefix(for value: Value) -> [UInt8]? {
        guard let k = key(value) else { return nil }
        var bytes: [UInt8] = []
        k.encodeKey(into: &bytes, terminal: false)
        return bytes
    }

    public func indexKeyLength(in entry: UnsafeRawBufferPointer) -> Int? {
        var reader = KeyReader(entry)
        guard (try? IndexKey.decodeKey(from: &reader, terminal: false)) != nil else { return nil }
        return reader.offset
    }
}

/// The type-erased face of an ``Index``, so one collection can have indexes with different key types.
public protocol IndexDefinition<Value>: Sendable {
    associatedtype Value
    var name: String { get }
    var keyEncoding: KeyEncoding { get }
    /// The encoded index key (non-terminal form), or `nil` to leave the value out.
    func indexPrefix(for value: Value) -> [UInt8]?
    /// How many leading bytes of a stored index entry are the index key (the rest is the primary key).
    func indexKeyLength(in entry: UnsafeRawBufferPointer) -> Int?
}

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
    let targetDatabase: MDB_dbi?
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
