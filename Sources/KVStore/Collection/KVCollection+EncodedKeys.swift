extension KVCollection {
    /// The stored keys after `lower` (from the first when `nil`) through `upper` (to the last when
    /// `nil`), in key order, `limit` at most, as stored, without decoding them or reading values: for a
    /// replicator that pages a collection against the server's state (a page's range of keys at a time,
    /// so that a resync never holds every key).
    package func encodedKeys(after lower: [UInt8]?, through upper: [UInt8]?, limit: Int,
                             in transaction: ReadTransaction) throws -> [[UInt8]] {
        guard limit > 0, let database = try resolvedDatabase(in: transaction) else { return [] }
        var keys: [[UInt8]] = []
        try transaction.scan(database, ByteRange(lower: lower, lowerInclusive: false, upper: upper, upperInclusive: true),
                             reverse: false) { key, _ in
            keys.append(Array(key))
            return keys.count < limit
        }
        return keys
    }
}
