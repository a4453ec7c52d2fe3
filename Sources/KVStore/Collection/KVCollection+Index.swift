extension KVCollection {
    /// The entries whose index key is in `range`, in index-key order (then primary-key order), or
    /// reverse order, at most `limit` of them.
    ///
    /// - Throws: ``KVStoreError/invalidName(_:reason:)`` if the index was not declared when the
    ///   collection was opened.
    public func entries<IndexKey>(in index: SecondaryIndex<Value, IndexKey>,
                                  _ range: some KeyRangeExpression<IndexKey>,
                                  reverse: Bool = false, limit: Int? = nil,
                                  in transaction: ReadTransaction) throws -> [(key: Key, value: Value)] {
        try indexEntries(index, range.keyRange.indexBytes, reverse: reverse, limit: limit, in: transaction)
    }

    /// The entries whose index key equals `indexKey`, in primary-key order.
    public func entries<IndexKey>(in index: SecondaryIndex<Value, IndexKey>, equalTo indexKey: IndexKey,
                                  limit: Int? = nil, in transaction: ReadTransaction) throws -> [(key: Key, value: Value)] {
        try entries(in: index, indexKey...indexKey, limit: limit, in: transaction)
    }

    /// Every entry, in index-key order (then primary-key order), or reverse order.
    public func entries<IndexKey>(in index: SecondaryIndex<Value, IndexKey>, reverse: Bool = false, limit: Int? = nil,
                                  in transaction: ReadTransaction) throws -> [(key: Key, value: Value)] {
        try indexEntries(index, .all, reverse: reverse, limit: limit, in: transaction)
    }

    /// The entries whose two-part index key starts with `first`: for example one subscription's
    /// billing events in date order.
    public func entries<First, Second>(in index: SecondaryIndex<Value, Pair<First, Second>>, prefix first: First,
                                       reverse: Bool = false, limit: Int? = nil,
                                       in transaction: ReadTransaction) throws -> [(key: Key, value: Value)] {
        var prefix: [UInt8] = []
        first.encodeKey(into: &prefix, terminal: false)
        return try indexEntries(index, .prefix(prefix), reverse: reverse, limit: limit, in: transaction)
    }

    private func indexEntries<IndexKey>(_ index: SecondaryIndex<Value, IndexKey>, _ range: ByteRange, reverse: Bool,
                                        limit: Int?, in transaction: ReadTransaction) throws -> [(key: Key, value: Value)] {
        guard let database = try resolvedDatabase(in: transaction) else { return [] }
        guard let indexDatabase = indexes.first(where: { $0.definition.name == index.name })?.database else {
            throw KVStoreError.invalidName(index.name, reason: "collection '\(name)' has no index of that name")
        }
        var result: [(key: Key, value: Value)] = []
        if let limit, limit <= 0 { return result }
        try transaction.scan(indexDatabase, range, reverse: reverse) { entry, _ in
            var reader = KeyReader(entry)
            do {
                _ = try IndexKey.decodeKey(from: &reader, terminal: false)
            } catch {
                throw KVStoreError.corruptValue(collection: "\(name) index \(index.name)", key: "0x" + Hex.encode(entry), reason: "\(error)", underlying: .init(error))
            }
            let primaryKey = Array(entry[reader.offset...])
            guard let bytes = try transaction.get(database, primaryKey) else {
                throw KVStoreError.corruptValue(
                    collection: "\(name) index \(index.name)", key: renderKey(primaryKey),
                    reason: "the index points at a key that has no value")
            }
            result.append((try decodeKey(UnsafeRawBufferPointer(rebasing: entry[reader.offset...])),
                           try decode(bytes, key: primaryKey)))
            if let limit, result.count >= limit { return false }
            return true
        }
        return result
    }
}

extension KVCollection {
    /// The entries whose two-part key starts with `first`, in key order.
    public func entries<First, Second>(prefix first: First, reverse: Bool = false, limit: Int? = nil,
                                       in transaction: ReadTransaction) throws -> [(key: Key, value: Value)]
    where Key == Pair<First, Second> {
        var prefix: [UInt8] = []
        first.encodeKey(into: &prefix, terminal: false)
        return try collect(.prefix(prefix), reverse: reverse, limit: limit, in: transaction)
    }

    /// The entries whose three-part key starts with `first`, in key order.
    public func entries<First, Second, Third>(prefix first: First, reverse: Bool = false, limit: Int? = nil,
                                              in transaction: ReadTransaction) throws -> [(key: Key, value: Value)]
    where Key == Triple<First, Second, Third> {
        var prefix: [UInt8] = []
        first.encodeKey(into: &prefix, terminal: false)
        return try collect(.prefix(prefix), reverse: reverse, limit: limit, in: transaction)
    }

    /// The entries whose string key starts with `prefix`, in key order.
    public func entries(prefix: String, reverse: Bool = false, limit: Int? = nil,
                        in transaction: ReadTransaction) throws -> [(key: Key, value: Value)] where Key == String {
        try collect(.prefix(prefix.encodedKey), reverse: reverse, limit: limit, in: transaction)
    }
}

extension KVCollection {
    // MARK: - Without a transaction: each call runs its own.

    /// The value at `key`, or `nil`, read in a transaction of its own.
    public func get(_ key: Key) throws -> Value? {
        try store.read { try get(key, in: $0) }
    }

    /// Stores `value` at `key` in a write transaction of its own.
    public func put(_ value: Value, forKey key: Key, author: String? = nil) throws {
        try store.write(author: author) { try put(value, forKey: key, in: $0) }
    }

    /// Deletes `key` in a write transaction of its own; returns whether it existed.
    @discardableResult
    public func delete(_ key: Key, author: String? = nil) throws -> Bool {
        try store.write(author: author) { try delete(key, in: $0) }
    }

    /// Whether `key` has a value, read in a transaction of its own.
    public func contains(_ key: Key) throws -> Bool {
        try store.read { try contains(key, in: $0) }
    }

    /// The number of entries, read in a transaction of its own.
    public func count() throws -> Int {
        try store.read { try count(in: $0) }
    }

    /// The entries in `range`, read in one transaction of their own.
    public func entries(_ range: some KeyRangeExpression<Key>, reverse: Bool = false,
                        limit: Int? = nil) throws -> [(key: Key, value: Value)] {
        try store.read { try entries(range, reverse: reverse, limit: limit, in: $0) }
    }

    /// Every entry, read in one transaction of its own.
    public func entries(reverse: Bool = false, limit: Int? = nil) throws -> [(key: Key, value: Value)] {
        try store.read { try entries(reverse: reverse, limit: limit, in: $0) }
    }
}
