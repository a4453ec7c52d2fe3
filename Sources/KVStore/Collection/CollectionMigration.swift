/// What a migration hook gets when a collection is opened with a newer schema version than the one
/// stored. It runs inside the write transaction that records the new version, so a failed migration
/// leaves the collection exactly as it was.
public struct CollectionMigration<Key: OrderedKey, Value> {
    /// The stored schema version.
    public let fromVersion: Int
    /// The version being opened.
    public let toVersion: Int
    /// The transaction the migration runs in.
    public let transaction: WriteTransaction
    /// The collection, with its new codec and indexes.
    public let collection: KVCollection<Key, Value>

    /// Re-encodes every value: decodes each stored value as `Old` (CBOR), transforms it, and stores the
    /// result with the collection's codec (or deletes the entry if `transform` returns `nil`). Indexes
    /// and derived collections are rebuilt.
    public func rewriteValues<Old: Decodable>(from old: Old.Type, _ transform: (Key, Old) throws -> Value?) throws {
        guard let database = try collection.resolvedDatabase(in: transaction) else { return }
        var rewritten: [(Key, Value?)] = []
        try transaction.scan(database, .all, reverse: false) { keyBytes, valueBytes in
            let key = try collection.decodeKey(keyBytes)
            let oldValue: Old
            do {
                oldValue = try CBORDecoder().decode(Old.self, from: valueBytes)
            } catch {
                throw KVStoreError.corruptValue(collection: collection.name, key: "\(key)",
                                                reason: "does not decode as \(Old.self): \(error)", underlying: .init(error))
            }
            rewritten.append((key, try transform(key, oldValue)))
            return true
        }
        for index in collection.indexes { try transaction.drop(index.database, delete: false) }
        try transaction.drop(database, delete: false)
        for (key, value) in rewritten {
            if let value {
                try collection.put(value, forKey: key, in: transaction)
            } else {
                for derivation in collection.derivations {
                    if let target = derivation.targetDatabase { try transaction.delete(target, key.encodedKey) }
                }
            }
        }
    }
}
