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
    ///     ``KVStoreError/schemaTooNew(collection:stored:supported:)``. A ``CollectionMigrator`` (the
    ///     `migrator:` form) derives the version from a list of migrations instead.
    ///   - indexes: secondary indexes, maintained on every put and delete. New ones are built now;
    ///     ones no longer listed are dropped.
    ///   - derived: collections kept in step with this one.
    ///   - aggregates: per-bucket aggregates of this collection, kept in step with it (see
    ///     ``Aggregation``). New ones are computed now from the whole collection.
    /// - Throws: ``KVStoreError/catalogMismatch(collection:detail:)`` if the collection exists with a
    ///   different key or value encoding; ``KVStoreError/invalidName(_:reason:)`` for a bad name;
    ///   ``KVStoreError/collectionOpenedInsideTransaction(_:)`` inside a transaction of this store.
    public func collection<Key: OrderedKey, Value: Codable>(
        _ name: String, key: Key.Type = Key.self, value: Value.Type = Value.self,
        schemaVersion: Int = 1,
        indexes: [any IndexDefinition<Value>] = [],
        derived: [Derivation<Key, Value>] = [],
        aggregates: [Aggregation<Key, Value>] = [],
        migrate: ((CollectionMigration<Key, Value>) throws -> Void)? = nil
    ) throws -> KVCollection<Key, Value> {
        try collection(name, key: key, codec: CBORCodec<Value>(), schemaVersion: schemaVersion,
                       indexes: indexes, derived: derived, aggregates: aggregates, migrate: migrate)
    }

    /// Opens a collection whose values go through `codec`, such as ``FixedLayoutCodec``.
    public func collection<Key: OrderedKey, Value>(
        _ name: String, key: Key.Type = Key.self, codec: some ValueCodec<Value>,
        schemaVersion: Int = 1,
        indexes: [any IndexDefinition<Value>] = [],
        derived: [Derivation<Key, Value>] = [],
        aggregates: [Aggregation<Key, Value>] = [],
        migrate: ((CollectionMigration<Key, Value>) throws -> Void)? = nil
    ) throws -> KVCollection<Key, Value> {
        try openCollection(name, codec: codec, schemaVersion: schemaVersion, indexes: indexes, derived: derived,
                           aggregates: aggregates, migration: migrate.map { .closure($0) })
    }

    /// Opens a collection of `Codable` values stored as CBOR, whose schema version is derived from
    /// `migrator`'s list: the migrations appended since the collection was last opened run, in order,
    /// each once (see ``CollectionMigrator``). The other parameters are those of
    /// ``collection(_:key:value:schemaVersion:indexes:derived:aggregates:migrate:)``.
    ///
    /// - Throws: what that form throws; ``KVStoreError/catalogMismatch(collection:detail:)`` when the
    ///   list reorders, renames or removes an applied migration; ``KVStoreError/invalidName(_:reason:)``
    ///   for an empty or repeated identifier.
    public func collection<Key: OrderedKey, Value: Codable>(
        _ name: String, key: Key.Type = Key.self, value: Value.Type = Value.self,
        migrator: CollectionMigrator<Key, Value>,
        indexes: [any IndexDefinition<Value>] = [],
        derived: [Derivation<Key, Value>] = [],
        aggregates: [Aggregation<Key, Value>] = []
    ) throws -> KVCollection<Key, Value> {
        try openCollection(name, codec: CBORCodec<Value>(), schemaVersion: migrator.schemaVersion, indexes: indexes,
                           derived: derived, aggregates: aggregates, migration: .list(migrator))
    }

    /// Opens a collection whose values go through `codec`, with its migrations as a list (see
    /// ``collection(_:key:value:migrator:indexes:derived:aggregates:)``).
    public func collection<Key: OrderedKey, Value>(
        _ name: String, key: Key.Type = Key.self, codec: some ValueCodec<Value>,
        migrator: CollectionMigrator<Key, Value>,
        indexes: [any IndexDefinition<Value>] = [],
        derived: [Derivation<Key, Value>] = [],
        aggregates: [Aggregation<Key, Value>] = []
    ) throws -> KVCollection<Key, Value> {
        try openCollection(name, codec: codec, schemaVersion: migrator.schemaVersion, indexes: indexes,
                           derived: derived, aggregates: aggregates, migration: .list(migrator))
    }

    /// How opening migrates: the `schemaVersion:` form's one closure, or a ``CollectionMigrator``'s list.
    private enum Migration<Key: OrderedKey, Value> {
        case closure((CollectionMigration<Key, Value>) throws -> Void)
        case list(CollectionMigrator<Key, Value>)
    }

    private func openCollection<Key: OrderedKey, Value>(
        _ name: String, codec: some ValueCodec<Value>, schemaVersion: Int,
        indexes: [any IndexDefinition<Value>], derived: [Derivation<Key, Value>], aggregates: [Aggregation<Key, Value>],
        migration: Migration<Key, Value>?
    ) throws -> KVCollection<Key, Value> {
        if TransactionScope.innermostKind(of: environment) != nil { throw KVStoreError.collectionOpenedInsideTransaction(name) }
        try Catalog.validateName(name, what: "collection")
        for index in indexes { try Catalog.validateName(index.name, what: "index") }
        // Closures, not key paths: a key path into a generic type is instantiated at run time, and
        // its generic arguments' conformances are looked up by scanning every conformance record of
        // the process (issue 39: 0.15M instructions of a widget's start).
        guard Set(indexes.map { $0.name }).count == indexes.count else {
            throw KVStoreError.invalidName(name, reason: "two indexes of collection '\(name)' share a name")
        }
        let targets = derived.map { $0.targetName } + aggregates.map { $0.targetName }
        guard Set(targets).count == targets.count, !targets.contains(name) else {
            throw KVStoreError.invalidName(name, reason: "collection '\(name)' lists a derived or aggregate collection twice, or itself")
        }
        guard schemaVersion >= 1 else {
            throw KVStoreError.invalidName(name, reason: "schema version must be at least 1, got \(schemaVersion)")
        }
        var migrator: CollectionMigrator<Key, Value>?
        if case .list(let list) = migration {
            try list.validate(collection: name)
            migrator = list
        }
        let databaseName = Catalog.collectionDatabase(name)
        var desired = CatalogEntry(
            name: name, kind: .collection, keyEncoding: Key.keyEncoding.description,
            valueEncoding: ValueEncoding(codec.encodingName), schemaVersion: schemaVersion,
            indexes: indexes.map {
                .init(name: $0.name, keyEncoding: $0.keyEncoding.description,
                      database: Catalog.indexDatabase(name, $0.name))
            },
            derived: targets, derivedFrom: nil, database: databaseName, migrations: migrator?.identifiers)

        let stored = try read { try Catalog.entry(named: name, kind: .collection, in: $0) }
        if let stored {
            guard stored.keyEncoding == desired.keyEncoding else {
                throw KVStoreError.catalogMismatch(
                    collection: name, detail: "keys are \(stored.keyEncoding) in the store, \(desired.keyEncoding) here")
            }
            let migrates: Bool
            if let migrator {
                migrates = try !migrator.pending(after: stored).isEmpty
            } else {
                migrates = migration != nil && stored.schemaVersion < schemaVersion
                // At the version a list reached, the number form keeps the list's identifiers.
                if stored.schemaVersion == schemaVersion { desired.migrations = stored.migrations }
            }
            guard stored.valueEncoding == desired.valueEncoding || migrates else {
                throw KVStoreError.catalogMismatch(
                    collection: name, detail: "values are \(stored.valueEncoding) in the store, \(desired.valueEncoding) here")
            }
            if stored.schemaVersion > schemaVersion {
                throw KVStoreError.schemaTooNew(collection: name, stored: stored.schemaVersion, supported: schemaVersion)
            }
            desired.derivedFrom = stored.derivedFrom
            desired.bucketed = stored.bucketed
        }

        let database = try self.database(named: databaseName, create: true)
        var indexHandles: [(definition: any IndexDefinition<Value>, database: DatabaseHandle)] = []
        // By position, not `zip`: the metadata of a `Zip2Sequence` of these arrays is completed at run
        // time through conformance look-ups (issue 39).
        for position in indexes.indices {
            if let handle = try self.database(named: desired.indexes[position].database, create: true) {
                indexHandles.append((indexes[position], handle))
            }
        }
        let collection = KVCollection<Key, Value>(
            name: name, store: self, database: database, codec: codec,
            indexes: indexHandles, derivations: derived, aggregations: aggregates)

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
        var droppedHandles: [(String, DatabaseHandle)] = []
        for entry in dropped {
            if let handle = try self.database(named: entry.database, create: false) { droppedHandles.append((entry.database, handle)) }
        }

        try write { transaction in
            let current = try Catalog.entry(named: name, kind: .collection, in: transaction)
            if let current {
                switch migration {
                case .list(let migrator):
                    let pending = try migrator.pending(after: current)
                    for position in pending.indices {
                        try pending[position].migrate(CollectionMigration(
                            fromVersion: position + 1, toVersion: position + 2, transaction: transaction, collection: collection))
                    }
                case .closure(let migrate) where current.schemaVersion < schemaVersion:
                    try migrate(CollectionMigration(fromVersion: current.schemaVersion, toVersion: schemaVersion,
                                                    transaction: transaction, collection: collection))
                default:
                    break
                }
            }
            let existingIndexes = Set((current?.indexes ?? []).map { $0.name })
            for index in indexHandles where !existingIndexes.contains(index.definition.name) || current == nil {
                try rebuild(index: index, of: collection, in: transaction)
            }
            for (_, handle) in droppedHandles { try transaction.drop(handle, delete: true) }
            let existingDerived = Set(current?.derived ?? [])
            for derivation in derived where !existingDerived.contains(derivation.targetName) {
                try rebuild(derivation: derivation, of: collection, in: transaction)
            }
            for aggregation in aggregates where !existingDerived.contains(aggregation.targetName) || current == nil {
                try aggregation.rebuild(collection, transaction)
            }
            let bucketed = Set(aggregates.map { $0.targetName })
            for target in targets {
                if var targetEntry = try Catalog.entry(named: target, kind: .collection, in: transaction) {
                    let marked = bucketed.contains(target) ? true : nil
                    guard targetEntry.derivedFrom != name || targetEntry.bucketed != marked else { continue }
                    targetEntry.derivedFrom = name
                    targetEntry.bucketed = marked
                    try Catalog.put(targetEntry, in: transaction)
                }
            }
            try Catalog.put(desired, in: transaction)
        }
        for (databaseName, _) in droppedHandles { environment.forgetDatabase(named: databaseName) }
        return collection
    }

    private func rebuild<Key, Value>(index: (definition: any IndexDefinition<Value>, database: DatabaseHandle),
                                     of collection: KVCollection<Key, Value>, in transaction: WriteTransaction) throws {
        try transaction.drop(index.database, delete: false)
        guard let database = try collection.resolvedDatabase(in: transaction) else { return }
        try transaction.scan(database, .all, reverse: false) { key, value in
            let decoded = try collection.decode(value, keyBytes: key)
            if let prefix = index.definition.indexPrefix(for: decoded) {
                try transaction.put(index.database, prefix + Array(key), [])
            }
            return true
        }
    }

    private func rebuild<Key, Value>(derivation: Derivation<Key, Value>, of collection: KVCollection<Key, Value>,
                                     in transaction: WriteTransaction) throws {
        guard let target = derivation.targetDatabase, try collection.resolvedDatabase(in: transaction) != nil else { return }
        try transaction.drop(target, delete: false)
        try collection.forEach(in: transaction) { key, value in
            try derivation.write(key.encodedKey, value, transaction)
            return true
        }
        try derivation.rebuildTargetAggregations(transaction)
    }
}
