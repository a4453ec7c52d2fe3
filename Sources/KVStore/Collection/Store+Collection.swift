import CLMDB

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
                                                reason: "does not decode as \(Old.self): \(error)")
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

extension Store {
    /// Opens a collection of `Codable` values stored as CBOR, creating it (and recording it in the
    /// catalog) if needed.
    ///
    /// ```swift
    /// let trainers = try store.collection("trainers", key: UUID.self, value: Trainer.self)
    /// ```
    ///
    /// - Parameters:
    ///   - schemaVersion: the version of `Value`'s layout. Opening with a higher version than stored
    ///     runs `migrate` (in one transaction with the version bump); a lower one throws
    ///     ``KVStoreError/schemaTooNew(collection:stored:supported:)``.
    ///   - indexes: secondary indexes, maintained on every put and delete. New ones are built now;
    ///     ones no longer listed are dropped.
    ///   - derived: collections kept in step with this one.
    /// - Throws: ``KVStoreError/catalogMismatch(collection:detail:)`` if the collection exists with a
    ///   different key or value encoding; ``KVStoreError/invalidName(_:reason:)`` for a bad name;
    ///   ``KVStoreError/collectionOpenedInsideTransaction(_:)`` inside a transaction of this store.
    public func collection<Key: OrderedKey, Value: Codable>(
        _ name: String, key: Key.Type = Key.self, value: Value.Type = Value.self,
        schemaVersion: Int = 1,
        indexes: [any IndexDefinition<Value>] = [],
        derived: [Derivation<Key, Value>] = [],
        migrate: ((CollectionMigration<Key, Value>) throws -> Void)? = nil
    ) throws -> KVCollection<Key, Value> {
        try collection(name, key: key, codec: CBORCodec<Value>(), schemaVersion: schemaVersion,
                       indexes: indexes, derived: derived, migrate: migrate)
    }

    /// Opens a collection whose values go through `codec`, such as ``FixedLayoutCodec``.
    public func collection<Key: OrderedKey, Value>(
        _ name: String, key: Key.Type = Key.self, codec: some ValueCodec<Value>,
        schemaVersion: Int = 1,
        indexes: [any IndexDefinition<Value>] = [],
        derived: [Derivation<Key, Value>] = [],
        migrate: ((CollectionMigration<Key, Value>) throws -> Void)? = nil
    ) throws -> KVCollection<Key, Value> {
        if TransactionScope.innermostKind(of: environment) != nil { throw KVStoreError.collectionOpenedInsideTransaction(name) }
        try Catalog.validateName(name, what: "collection")
        for index in indexes { try Catalog.validateName(index.name, what: "index") }
        guard Set(indexes.map(\.name)).count == indexes.count else {
            throw KVStoreError.invalidName(name, reason: "two indexes of collection '\(name)' share a name")
        }
        guard schemaVersion >= 1 else {
            throw KVStoreError.invalidName(name, reason: "schema version must be at least 1, got \(schemaVersion)")
        }
        let databaseName = Catalog.collectionDatabase(name)
        var desired = CatalogEntry(
            name: name, kind: .collection, keyEncoding: Key.keyEncoding.description,
            valueEncoding: codec.encodingName, schemaVersion: schemaVersion,
            indexes: indexes.map {
                .init(name: $0.name, keyEncoding: $0.keyEncoding.description,
                      database: Catalog.indexDatabase(name, $0.name))
            },
            derived: derived.map(\.targetName), derivedFrom: nil, database: databaseName)

        let stored = try read { try Catalog.entry(named: name, kind: .collection, in: $0) }
        if let stored {
            guard stored.keyEncoding == desired.keyEncoding else {
                throw KVStoreError.catalogMismatch(
                    collection: name, detail: "keys are \(stored.keyEncoding) in the store, \(desired.keyEncoding) here")
            }
            guard stored.valueEncoding == desired.valueEncoding || migrate != nil && stored.schemaVersion < schemaVersion else {
                throw KVStoreError.catalogMismatch(
                    collection: name, detail: "values are \(stored.valueEncoding) in the store, \(desired.valueEncoding) here")
            }
            if stored.schemaVersion > schemaVersion {
                throw KVStoreError.schemaTooNew(collection: name, stored: stored.schemaVersion, supported: schemaVersion)
            }
            desired.derivedFrom = stored.derivedFrom
        }

        let database = try self.database(named: databaseName, create: true)
        var indexHandles: [(definition: any IndexDefinition<Value>, database: MDB_dbi)] = []
        for (definition, entry) in zip(indexes, desired.indexes) {
            if let handle = try self.database(named: entry.database, create: true) {
                indexHandles.append((definition, handle))
            }
        }
        let collection = KVCollection<Key, Value>(
            name: name, store: self, database: database, codec: codec,
            indexes: indexHandles, derivations: derived)

        if isReadOnly {
            if let stored, stored.schemaVersion < schemaVersion {
                throw KVStoreError.catalogMismatch(
                    collection: name,
                    detail: "stored schema version \(stored.schemaVersion) needs migrating to \(schemaVersion) by a writer")
            }
            return collection
        }
        guard stored != desired else { return collection }

        // Indexes dropped from the declaration: open their handles now (not possible inside the write).
        let dropped = (stored?.indexes ?? []).filter { old in !desired.indexes.contains { $0.name == old.name } }
        var droppedHandles: [(String, MDB_dbi)] = []
        for entry in dropped {
            if let handle = try self.database(named: entry.database, create: false) { droppedHandles.append((entry.database, handle)) }
        }
        var derivedTargets: [(String, MDB_dbi?)] = []
        for derivation in derived { derivedTargets.append((derivation.targetName, derivation.targetDatabase)) }

        try write { transaction in
            let current = try Catalog.entry(named: name, kind: .collection, in: transaction)
            if let current, current.schemaVersion < schemaVersion, let migrate {
                try migrate(CollectionMigration(fromVersion: current.schemaVersion, toVersion: schemaVersion,
                                                transaction: transaction, collection: collection))
            }
            let existingIndexes = Set((current?.indexes ?? []).map(\.name))
            for index in indexHandles where !existingIndexes.contains(index.definition.name) || current == nil {
                try rebuild(index: index, of: collection, in: transaction)
            }
            for (_, handle) in droppedHandles { try transaction.drop(handle, delete: true) }
            let existingDerived = Set(current?.derived ?? [])
            for derivation in derived where !existingDerived.contains(derivation.targetName) {
                try rebuild(derivation: derivation, of: collection, in: transaction)
            }
            for (target, _) in derivedTargets {
                if var targetEntry = try Catalog.entry(named: target, kind: .collection, in: transaction),
                   targetEntry.derivedFrom != name {
                    targetEntry.derivedFrom = name
                    try Catalog.put(targetEntry, in: transaction)
                }
            }
            try Catalog.put(desired, in: transaction)
        }
        for (databaseName, _) in droppedHandles { environment.forgetDatabase(named: databaseName) }
        return collection
    }

    private func rebuild<Key, Value>(index: (definition: any IndexDefinition<Value>, database: MDB_dbi),
                                     of collection: KVCollection<Key, Value>, in transaction: WriteTransaction) throws {
        try transaction.drop(index.database, delete: false)
        guard let database = try collection.resolvedDatabase(in: transaction) else { return }
        try transaction.scan(database, .all, reverse: false) { key, value in
            let decoded = try collection.decode(value, key: Array(key))
            if let prefix = index.definition.indexPrefix(for: decoded) {
                try transaction.put(index.database, prefix + Array(key), [])
            }
            return true
        }
    }

    private func rebuild<Key, Value>(derivation: Derivation<Key, Value>, of collection: KVCollection<Key, Value>,
                                     in transaction: WriteTransaction) throws {
        guard let target = derivation.targetDatabase, let database = try collection.resolvedDatabase(in: transaction) else { return }
        try transaction.drop(target, delete: false)
        try transaction.scan(database, .all, reverse: false) { key, value in
            let decoded = try collection.decode(value, key: Array(key))
            if let derived = try derivation.encode(decoded) { try transaction.put(target, Array(key), derived) }
            return true
        }
    }
}

extension Store {
    /// The collection `name` as raw bytes, whatever its Swift types: keys as ``ByteKey`` (the stored
    /// bytes), values as stored. For tools that work from the catalog alone, such as `kvtool`.
    ///
    /// Writes through it maintain no index or derived collection; check
    /// ``CatalogEntry/hasMaintainedData`` before writing.
    ///
    /// - Throws: ``KVStoreError/collectionNotFound(_:)`` if the catalog has no such collection.
    public func untypedCollection(named name: String) throws -> (entry: CatalogEntry, collection: KVCollection<ByteKey, [UInt8]>) {
        guard let entry = try catalogEntry(forCollection: name) else { throw KVStoreError.collectionNotFound(name) }
        let database = try self.database(named: entry.database, create: false)
        let collection = KVCollection<ByteKey, [UInt8]>(
            name: name, store: self, database: database, codec: RawBytesCodec(), indexes: [], derivations: [])
        return (entry, collection)
    }
}
