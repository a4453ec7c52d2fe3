/// A typed collection: keys of an ``OrderedKey`` type, values through a ``ValueCodec``, in one LMDB
/// named database, with secondary indexes, derived collections and per-bucket aggregates kept in step
/// in the same transaction. (It is not called `Collection`, so that it never shadows Swift's protocol.)
///
/// Get one from ``Store/collection(_:key:value:schemaVersion:indexes:derived:aggregates:migrate:)``. A collection
/// handle is a small value: keep it, share it between threads, and use it with any transaction of its
/// store.
///
/// ```swift
/// let records = try store.collection("dailyRecords", key: LogicalDay.self, value: DailyRecord.self)
/// try store.write { tx in try records.put(record, forKey: record.day, in: tx) }
/// let lastWeek = try store.read { tx in try records.entries((today - 6)...today, in: tx) }
/// ```
///
/// Every method that takes a transaction is valid only inside that transaction's closure. The methods
/// without one open their own transaction. A missing key gives `nil`, not an error. A stored value that
/// does not decode throws ``KVStoreError/corruptValue(collection:key:reason:underlying:)`` naming the collection
/// and the key.
public struct KVCollection<Key: OrderedKey, Value>: Sendable {
    /// The collection's name in the catalog.
    public let name: String
    /// The store the collection lives in.
    public let store: Store
    /// The LMDB database holding the entries (what `mdb_dump -s` takes, and
    /// ``Store/rawDatabase(named:create:)``).
    public var databaseName: String { Catalog.collectionDatabase(name) }
    let database: DatabaseHandle?
    let codec: any ValueCodec<Value>
    let indexes: [(definition: any IndexDefinition<Value>, database: DatabaseHandle)]
    let derivations: [Derivation<Key, Value>]
    let aggregations: [Aggregation<Key, Value>]

    /// LMDB's limit on key size, which also bounds index keys (index key + primary key): ``Store/maxKeySize``.
    public static var maxKeySize: Int { Store.maxKeySize }

    // MARK: - Reading

    /// The value at `key`, or `nil`.
    public func get(_ key: Key, in transaction: ReadTransaction) throws -> Value? {
        guard let database = try resolvedDatabase(in: transaction) else { return nil }
        let keyBytes = key.encodedKey
        guard let bytes = try transaction.get(database, keyBytes) else { return nil }
        return try decode(bytes, key: keyBytes)
    }

    /// Calls `body` with the stored bytes at `key`, straight from the memory map, without a copy; or
    /// returns `nil` if the key is missing. The buffer is valid only during `body`.
    public func withValueBytes<R>(forKey key: Key, in transaction: ReadTransaction,
                                  _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        try withValueBytes(forStoredKey: key.encodedKey, in: transaction, body)
    }

    /// ``withValueBytes(forKey:in:_:)`` for a key given in its stored form (`key.encodedKey`), which
    /// the caller has checked: a replicator reads each key it pushes by the bytes history recorded.
    package func withValueBytes<R>(forStoredKey keyBytes: [UInt8], in transaction: ReadTransaction,
                                   _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        guard let database = try resolvedDatabase(in: transaction),
              let bytes = try transaction.get(database, keyBytes) else { return nil }
        return try body(bytes)
    }

    /// Whether `key` has a value (without decoding it).
    public func contains(_ key: Key, in transaction: ReadTransaction) throws -> Bool {
        guard let database = try resolvedDatabase(in: transaction) else { return false }
        return try transaction.get(database, key.encodedKey) != nil
    }

    /// The number of entries (LMDB keeps it, so this does not scan).
    public func count(in transaction: ReadTransaction) throws -> Int {
        guard let database = try resolvedDatabase(in: transaction) else { return 0 }
        return try transaction.count(database)
    }

    /// The entry with the smallest key, or `nil` if the collection is empty.
    public func first(in transaction: ReadTransaction) throws -> (key: Key, value: Value)? {
        try entries(limit: 1, in: transaction).first
    }

    /// The entry with the largest key, or `nil` if the collection is empty.
    public func last(in transaction: ReadTransaction) throws -> (key: Key, value: Value)? {
        try entries(reverse: true, limit: 1, in: transaction).first
    }

    /// Calls `body` for each entry in `range`, in key order (or reverse order), until it returns
    /// `false`. Nothing is collected, so this is the cheapest way to aggregate.
    public func forEach(_ range: some KeyRangeExpression<Key>, reverse: Bool = false,
                        in transaction: ReadTransaction, _ body: (Key, Value) throws -> Bool) throws {
        try scan(range.keyRange.bytes, reverse: reverse, in: transaction, body)
    }

    /// Calls `body` for every entry, in key order (or reverse order), until it returns `false`.
    public func forEach(reverse: Bool = false, in transaction: ReadTransaction,
                        _ body: (Key, Value) throws -> Bool) throws {
        try scan(.all, reverse: reverse, in: transaction, body)
    }

    /// Calls `body` with each entry's stored bytes in `range`, straight from the memory map. The
    /// buffers are valid only during each call. Return `false` to stop.
    public func forEachBytes(_ range: some KeyRangeExpression<Key>, reverse: Bool = false,
                             in transaction: ReadTransaction,
                             _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool) throws {
        guard let database = try resolvedDatabase(in: transaction) else { return }
        try transaction.scan(database, range.keyRange.bytes, reverse: reverse, body)
    }

    /// `forEachBytes` for a closed range, `a...b`.
    /// (Overloads for the common ranges skip the generic ``KeyRange``, whose type another module's
    /// call would look up at run time on every scan.)
    public func forEachBytes(_ range: ClosedRange<Key>, reverse: Bool = false, in transaction: ReadTransaction,
                             _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool) throws {
        guard let database = try resolvedDatabase(in: transaction) else { return }
        try transaction.scan(database, Self.bytes(range), reverse: reverse, body)
    }

    /// `forEachBytes` for a range from a key on, `a...`.
    public func forEachBytes(_ range: PartialRangeFrom<Key>, reverse: Bool = false, in transaction: ReadTransaction,
                             _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool) throws {
        guard let database = try resolvedDatabase(in: transaction) else { return }
        try transaction.scan(database, ByteRange(lower: range.lowerBound.encodedKey, lowerInclusive: true), reverse: reverse, body)
    }

    /// `forEach` for a closed range, `a...b`, without the generic ``KeyRange``.
    public func forEach(_ range: ClosedRange<Key>, reverse: Bool = false,
                        in transaction: ReadTransaction, _ body: (Key, Value) throws -> Bool) throws {
        try scan(Self.bytes(range), reverse: reverse, in: transaction, body)
    }

    static func bytes(_ range: ClosedRange<Key>) -> ByteRange {
        ByteRange(lower: range.lowerBound.encodedKey, lowerInclusive: true, upper: range.upperBound.encodedKey, upperInclusive: true)
    }

    /// The entries in `range`, in key order or reverse order, at most `limit` of them.
    public func entries(_ range: some KeyRangeExpression<Key>, reverse: Bool = false,
                        limit: Int? = nil, in transaction: ReadTransaction) throws -> [(key: Key, value: Value)] {
        try collect(range.keyRange.bytes, reverse: reverse, limit: limit, in: transaction)
    }

    /// Every entry, in key order or reverse order, at most `limit` of them.
    public func entries(reverse: Bool = false, limit: Int? = nil,
                        in transaction: ReadTransaction) throws -> [(key: Key, value: Value)] {
        try collect(.all, reverse: reverse, limit: limit, in: transaction)
    }

    /// The keys in `range`, without decoding values.
    public func keys(_ range: some KeyRangeExpression<Key>, reverse: Bool = false,
                     limit: Int? = nil, in transaction: ReadTransaction) throws -> [Key] {
        try keys(range.keyRange.bytes, reverse: reverse, limit: limit, in: transaction)
    }

    /// Every key, without decoding values.
    public func keys(reverse: Bool = false, limit: Int? = nil, in transaction: ReadTransaction) throws -> [Key] {
        try keys(.all, reverse: reverse, limit: limit, in: transaction)
    }

    func keys(_ range: ByteRange, reverse: Bool, limit: Int?, in transaction: ReadTransaction) throws -> [Key] {
        guard let database = try resolvedDatabase(in: transaction) else { return [] }
        var keys: [Key] = []
        try transaction.scan(database, range, reverse: reverse) { key, _ in
            keys.append(try decodeKey(key))
            if let limit, keys.count >= limit { return false }
            return true
        }
        return keys
    }

    // MARK: - Writing

    /// Stores `value` at `key`, replacing any value there, and updates indexes and derived collections.
    ///
    /// - Throws: ``KVStoreError/invalidKey(collection:reason:)`` for a key over ``maxKeySize`` (511) bytes,
    ///   ``KVStoreError/encodingFailed(collection:reason:)``, or an ``LMDBError``.
    ///
    /// With a codec that keeps unknown fields (``CBORCodec``, by default), the map keys of the value
    /// replaced that `Value` does not declare are kept: an older build of the app does not erase a
    /// newer build's fields.
    public func put(_ value: Value, forKey key: Key, in transaction: WriteTransaction) throws {
        try put(value, forKey: key, keepingUnknownFieldsOf: nil, in: transaction)
    }

    /// `put`, keeping the unknown fields of `source` (a value another device wrote, applied by a
    /// replicator) instead of those of the stored value.
    package func put(_ value: Value, forKey key: Key, keepingUnknownFieldsOf source: [UInt8]?,
                     in transaction: WriteTransaction) throws {
        guard let database = try resolvedDatabase(in: transaction) else { throw KVStoreError.readOnly(path: store.directory) }
        let keyBytes = try checkedKey(key)
        var valueBytes = try encoded(value)
        if codec.keepsUnknownFields {
            let merged: [UInt8]?
            if let source {
                merged = source.withUnsafeBytes { codec.keepingUnknownFields(of: $0, in: valueBytes) }
            } else if let stored = try transaction.get(database, keyBytes) {
                merged = codec.keepingUnknownFields(of: stored, in: valueBytes)
            } else {
                merged = nil
            }
            if let merged { valueBytes = merged }
        }
        if !indexes.isEmpty {
            try updateIndexes(primaryKey: keyBytes, newValue: value, database: database, in: transaction)
        }
        for derivation in derivations {
            try derivation.write(keyBytes, value, transaction)
            try derivation.refreshTargetAggregations(key, transaction)
        }
        try transaction.put(database, keyBytes, valueBytes)
        for aggregation in aggregations { try aggregation.refresh(key, self, transaction) }
        transaction.record(Mutation(target: .collection(name), key: keyBytes, operation: .put))
    }

    /// `put` of a key that sorts after every key of the collection, as a log's next entry does (SyncKit's
    /// history): LMDB appends it (`MDB_APPEND`) without looking the key up, and fills the last page
    /// instead of splitting it in half. A key that does not sort last, or a collection with indexes or
    /// derived collections, takes `put`'s path; either way the result is `put`'s.
    package func append(_ value: Value, forKey key: Key, in transaction: WriteTransaction) throws {
        guard indexes.isEmpty, derivations.isEmpty, aggregations.isEmpty,
              let database = try resolvedDatabase(in: transaction) else {
            return try put(value, forKey: key, in: transaction)
        }
        let keyBytes = try checkedKey(key)
        let valueBytes = try encoded(value)
        // Appended, there is no stored value whose unknown fields to keep.
        guard try transaction.append(database, keyBytes, valueBytes) else {
            return try put(value, forKey: key, in: transaction)
        }
        transaction.record(Mutation(target: .collection(name), key: keyBytes, operation: .put))
    }

    /// `value`'s bytes, or ``KVStoreError/encodingFailed(collection:reason:)``.
    private func encoded(_ value: Value) throws -> [UInt8] {
        do {
            return try codec.encode(value)
        } catch {
            throw KVStoreError.encodingFailed(collection: name, reason: "\(error)")
        }
    }

    /// Deletes the value at `key` with its index entries and derived values. Returns whether it existed.
    @discardableResult
    public func delete(_ key: Key, in transaction: WriteTransaction) throws -> Bool {
        guard let database = try resolvedDatabase(in: transaction) else { throw KVStoreError.readOnly(path: store.directory) }
        let keyBytes = try checkedKey(key)
        if !indexes.isEmpty {
            try updateIndexes(primaryKey: keyBytes, newValue: nil, database: database, in: transaction)
        }
        for derivation in derivations {
            try derivation.write(keyBytes, nil, transaction)
            try derivation.refreshTargetAggregations(key, transaction)
        }
        let existed = try transaction.delete(database, keyBytes)
        if existed {
            for aggregation in aggregations { try aggregation.refresh(key, self, transaction) }
            transaction.record(Mutation(target: .collection(name), key: keyBytes, operation: .delete))
        }
        return existed
    }

    /// Deletes every entry, with indexes and derived values.
    public func removeAll(in transaction: WriteTransaction) throws {
        guard let database = try resolvedDatabase(in: transaction) else { throw KVStoreError.readOnly(path: store.directory) }
        for key in try keys(.all, reverse: false, limit: nil, in: transaction) {
            transaction.record(Mutation(target: .collection(name), key: key.encodedKey, operation: .delete))
        }
        for index in indexes { try transaction.drop(index.database, delete: false) }
        for derivation in derivations {
            if let target = derivation.targetDatabase { try transaction.drop(target, delete: false) }
            try derivation.rebuildTargetAggregations(transaction)
        }
        for aggregation in aggregations {
            if let target = aggregation.targetDatabase { try transaction.drop(target, delete: false) }
        }
        try transaction.drop(database, delete: false)
    }

    // MARK: - Internals

    /// The collection's database as `transaction` sees it: `nil` if it does not exist there (a
    /// read-only process that opened the collection before any process created it).
    func resolvedDatabase(in transaction: ReadTransaction) throws -> DatabaseHandle? {
        transaction.readTracker?.note(.collection(name))
        if let database { return database }
        return try store.environment.database(named: Catalog.collectionDatabase(name), in: transaction.pointer)
    }

    func checkedKey(_ key: Key) throws -> [UInt8] {
        let bytes = key.encodedKey
        guard !bytes.isEmpty else {
            throw KVStoreError.invalidKey(collection: name, reason: "the key encodes to zero bytes; LMDB keys cannot be empty")
        }
        guard bytes.count <= Self.maxKeySize else {
            throw KVStoreError.invalidKey(collection: name, reason: "the key is \(bytes.count) bytes; LMDB's limit is \(Self.maxKeySize)")
        }
        return bytes
    }

    /// `bytes` decoded as a stored value of this collection (replication applies other machines'
    /// values through the typed collection, so that its indexes follow).
    package func decodeStoredValue(_ bytes: [UInt8], key: [UInt8]) throws -> Value {
        try bytes.withUnsafeBytes { try decode($0, key: key) }
    }

    /// `value` as this collection stores it.
    package func encodeValueForStorage(_ value: Value) throws -> [UInt8] {
        try codec.encode(value)
    }

    /// `bytes` (a value as this collection stores it) with what `source` holds that `Value` does not
    /// know, when the codec keeps unknown fields.
    package func keepingUnknownFields(of source: [UInt8], in bytes: [UInt8]) -> [UInt8] {
        guard codec.keepsUnknownFields else { return bytes }
        return source.withUnsafeBytes { codec.keepingUnknownFields(of: $0, in: bytes) } ?? bytes
    }

    func decode(_ bytes: UnsafeRawBufferPointer, key: [UInt8]) throws -> Value {
        try key.withUnsafeBytes { try decode(bytes, keyBytes: $0) }
    }

    /// `bytes` decoded; the key (valid during the call) is only read to name it in an error, so a scan
    /// copies nothing per entry.
    func decode(_ bytes: UnsafeRawBufferPointer, keyBytes key: UnsafeRawBufferPointer) throws -> Value {
        // Before anything copies or parses the bytes: a value another process stored raw may be
        // hundreds of megabytes, and touching the map costs nothing, copying it does.
        if let limit = codec.maxEncodedSize, bytes.count > limit {
            throw KVStoreError.corruptValue(collection: name, key: renderKey(Array(key)),
                                            reason: "the stored value is \(bytes.count) bytes, over the \(limit)-byte limit of a value")
        }
        do {
            return try codec.decode(bytes)
        } catch {
            throw KVStoreError.corruptValue(collection: name, key: renderKey(Array(key)), reason: "\(error)", underlying: .init(error))
        }
    }

    func decodeKey(_ bytes: UnsafeRawBufferPointer) throws -> Key {
        do {
            return try Key.decodeKey(bytes)
        } catch {
            throw KVStoreError.invalidKey(collection: name, reason: "stored key 0x\(Hex.encode(bytes)) does not decode: \(error)")
        }
    }

    func renderKey(_ bytes: [UInt8]) -> String {
        if let key = try? Key.decodeKey(bytes) { return "\(key)" }
        return "0x" + Hex.encode(bytes)
    }

    func scan(_ range: ByteRange, reverse: Bool, in transaction: ReadTransaction,
              _ body: (Key, Value) throws -> Bool) throws {
        guard let database = try resolvedDatabase(in: transaction) else { return }
        try transaction.scan(database, range, reverse: reverse) { key, value in
            let decodedKey = try decodeKey(key)
            return try body(decodedKey, try decode(value, keyBytes: key))
        }
    }

    func collect(_ range: ByteRange, reverse: Bool, limit: Int?, in transaction: ReadTransaction) throws -> [(key: Key, value: Value)] {
        var result: [(key: Key, value: Value)] = []
        if let limit, limit <= 0 { return result }
        try scan(range, reverse: reverse, in: transaction) { key, value in
            result.append((key, value))
            if let limit, result.count >= limit { return false }
            return true
        }
        return result
    }

    /// Replaces the index entries of `primaryKey`: those of the stored value (if any) with those of
    /// `newValue` (if any).
    private func updateIndexes(primaryKey: [UInt8], newValue: Value?, database: DatabaseHandle,
                               in transaction: WriteTransaction) throws {
        var oldValue: Value?
        var oldIsCorrupt = false
        if let stored = try transaction.get(database, primaryKey) {
            do { oldValue = try codec.decode(stored) } catch { oldIsCorrupt = true }
        }
        for index in indexes {
            let oldPrefix = oldValue.flatMap { index.definition.indexPrefix(for: $0) }
            let newPrefix = newValue.flatMap { index.definition.indexPrefix(for: $0) }
            if oldIsCorrupt {
                // The old index key is unknown: remove any entry that points at this primary key.
                try removeIndexEntries(pointingAt: primaryKey, index: index, in: transaction)
            } else if oldPrefix == newPrefix {
                continue
            } else if let oldPrefix {
                try transaction.delete(index.database, oldPrefix + primaryKey)
            }
            if let newPrefix {
                let entry = newPrefix + primaryKey
                guard entry.count <= Self.maxKeySize else {
                    throw KVStoreError.invalidKey(
                        collection: name,
                        reason: "the entry of index '\(index.definition.name)' is \(entry.count) bytes; LMDB's limit is \(Self.maxKeySize)")
                }
                try transaction.put(index.database, entry, [])
            }
        }
    }

    private func removeIndexEntries(pointingAt primaryKey: [UInt8],
                                    index: (definition: any IndexDefinition<Value>, database: DatabaseHandle),
                                    in transaction: WriteTransaction) throws {
        var stale: [[UInt8]] = []
        try transaction.scan(index.database, .all, reverse: false) { key, _ in
            if let length = index.definition.indexKeyLength(in: key),
               compareBytes(UnsafeRawBufferPointer(rebasing: key[length...]), primaryKey) == 0 {
                stale.append(Array(key))
            }
            return true
        }
        for key in stale { try transaction.delete(index.database, key) }
    }
}
