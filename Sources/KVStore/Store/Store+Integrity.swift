/// One problem an integrity check found, naming where it is.
public struct IntegrityProblem: Hashable, Sendable, CustomStringConvertible {
    /// What kind of problem it is. KVStore declares the kinds its own walk finds; a layer above
    /// declares its own in an extension (SyncKit: `history`, `snapshot`, `feed`), so that KVStore knows
    /// nothing of them.
    ///
    /// ```swift
    /// extension IntegrityProblem.Kind {
    ///     public static let history = Self(rawValue: "history")
    /// }
    /// ```
    public struct Kind: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }
        /// Encoded as its raw value alone, as a `String`-backed enum is.
        public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(rawValue)
        }

        /// A catalog entry that does not decode or describes something that is not there.
        public static let catalog = Self(rawValue: "catalog")
        /// A named database the catalog does not account for.
        public static let unknownDatabase = Self(rawValue: "unknownDatabase")
        /// A stored key that does not decode with its collection's key encoding.
        public static let corruptKey = Self(rawValue: "corruptKey")
        /// A stored value that does not decode with its collection's value encoding.
        public static let corruptValue = Self(rawValue: "corruptValue")
        /// An index entry whose primary key has no record.
        public static let indexEntryWithoutRecord = Self(rawValue: "indexEntryWithoutRecord")
        /// A record whose index entry is missing.
        public static let missingIndexEntry = Self(rawValue: "missingIndexEntry")
        /// A derived entry whose key has no record in the source collection.
        public static let derivedEntryWithoutSource = Self(rawValue: "derivedEntryWithoutSource")
        /// A record whose derived entry is missing or differs from what its value derives.
        public static let derivedEntryMismatch = Self(rawValue: "derivedEntryMismatch")
    }

    public var kind: Kind
    /// The collection, suite or database (`dailyRecords`, `dailyRecords index byMonth`, `_catalog`…).
    public var location: String
    /// The key, rendered with the catalog's key encoding (or in hex when it does not decode).
    public var key: String?
    public var detail: String

    public init(kind: Kind, location: String, key: String? = nil, detail: String) {
        self.kind = kind
        self.location = location
        self.key = key
        self.detail = detail
    }

    public var description: String {
        "\(location)\(key.map { " key \($0)" } ?? ""): \(detail)"
    }
}

/// What ``Store/checkIntegrity(maxProblems:progress:)`` walked and found.
public struct IntegrityReport: Sendable {
    /// The transaction the walk read (the last one committed when it began).
    public var transactionID: Int
    /// Named databases walked.
    public var databases: Int
    /// Entries read, over all databases.
    public var entries: Int
    public var problems: [IntegrityProblem]
    /// Whether the walk stopped collecting problems at the limit.
    public var truncated: Bool

    public var isClean: Bool { problems.isEmpty }
}

extension Store {
    /// Walks every named database in one read transaction and checks everything the catalog alone can
    /// tell, without the Swift types:
    ///
    /// - every catalog entry decodes and names databases that exist; every database is accounted for;
    /// - every key of a collection decodes with its key encoding, and every value with its value
    ///   encoding (CBOR fully, with the decoder's depth limit; fixed layouts by size);
    /// - every index entry decodes (index key, then primary key) and its record exists;
    /// - every entry of a derived collection has a record at its key in the source collection.
    ///
    /// What needs the Swift types (that each record's index entries and derived value are present and
    /// current) is ``KVCollection/checkMaintainedData(in:)``. Reading pages also makes LMDB walk
    /// every B-tree page of every database, which catches a file truncated or scribbled over.
    ///
    /// Call it outside every transaction (it opens each database first).
    ///
    /// - Parameters:
    ///   - maxProblems: stop recording problems after this many (the walk still completes).
    ///   - progress: called with the number of entries read so far, about every 4,096 entries.
    public func checkIntegrity(maxProblems: Int = 1_000,
                               progress: ((Int) -> Void)? = nil) throws -> IntegrityReport {
        let databases = try rawDatabases()
        var checker = IntegrityChecker(maxProblems: maxProblems, progress: progress)
        let transactionID = try read { transaction in
            try checker.walk(databases, in: transaction)
            return transaction.transactionID
        }
        return IntegrityReport(transactionID: transactionID, databases: databases.count, entries: checker.entries,
                               problems: checker.problems, truncated: checker.truncated)
    }
}

extension KVCollection {
    /// Recomputes, from every record and with the Swift types, its index entries, derived values and
    /// per-bucket aggregates, and compares them with what is stored: a record whose index entry is
    /// missing, a derived entry that is missing or stale, or an aggregate that is missing, stale or left
    /// over, is a problem. (Index and derived entries without a record are found
    /// by ``Store/checkIntegrity(maxProblems:progress:)``.)
    public func checkMaintainedData(in transaction: ReadTransaction, maxProblems: Int = 1_000) throws -> [IntegrityProblem] {
        guard let database = try resolvedDatabase(in: transaction) else { return [] }
        var problems: [IntegrityProblem] = []
        func add(_ problem: IntegrityProblem) { if problems.count < maxProblems { problems.append(problem) } }
        try transaction.scan(database, .all, reverse: false) { keyBytes, valueBytes in
            let key = Array(keyBytes)
            let value: Value
            do {
                value = try codec.decode(valueBytes)
            } catch {
                add(IntegrityProblem(kind: .corruptValue, location: name, key: renderKey(key), detail: "\(error)"))
                return true
            }
            for index in indexes {
                guard let prefix = index.definition.indexPrefix(for: value) else { continue }
                if try transaction.get(index.database, prefix + key) == nil {
                    add(IntegrityProblem(kind: .missingIndexEntry, location: "\(name) index \(index.definition.name)",
                                         key: renderKey(key), detail: "the record has no entry in the index"))
                }
            }
            for derivation in derivations {
                guard let target = derivation.targetDatabase else { continue }
                let expected = try derivation.encode(value)
                let stored = try transaction.get(target, key).map(Array.init)
                if stored != expected {
                    let detail = expected == nil ? "the record derives nothing, but \(derivation.targetName) has an entry"
                        : stored == nil ? "the derived entry in \(derivation.targetName) is missing"
                        : "the derived entry in \(derivation.targetName) differs from what the record derives"
                    add(IntegrityProblem(kind: .derivedEntryMismatch, location: name, key: renderKey(key), detail: detail))
                }
            }
            return true
        }
        for aggregation in aggregations {
            guard let target = aggregation.targetDatabase else { continue }
            let expected = try aggregation.expected(self, transaction)
            var stored: [(key: [UInt8], value: [UInt8])] = []
            try transaction.scan(target, .all, reverse: false) { key, value in
                stored.append((Array(key), Array(value)))
                return true
            }
            let expectedByKey = Dictionary(expected.map { ($0.key, $0.value) }, uniquingKeysWith: { a, _ in a })
            let storedByKey = Dictionary(stored.map { ($0.key, $0.value) }, uniquingKeysWith: { a, _ in a })
            for (key, value) in expected where storedByKey[key] != value {
                let detail = storedByKey[key] == nil ? "the aggregate in \(aggregation.targetName) is missing"
                    : "the aggregate in \(aggregation.targetName) differs from what the records give"
                add(IntegrityProblem(kind: .derivedEntryMismatch, location: aggregation.targetName, key: aggregation.renderKey(key), detail: detail))
            }
            for (key, _) in stored where expectedByKey[key] == nil {
                add(IntegrityProblem(kind: .derivedEntryMismatch, location: aggregation.targetName, key: aggregation.renderKey(key),
                                     detail: "an aggregate of a bucket in which no record falls"))
            }
        }
        return problems
    }
}

/// The catalog-driven walk behind ``Store/checkIntegrity(maxProblems:progress:)``.
private struct IntegrityChecker {
    let maxProblems: Int
    let progress: ((Int) -> Void)?
    var entries = 0
    var problems: [IntegrityProblem] = []
    var truncated = false

    init(maxProblems: Int, progress: ((Int) -> Void)?) {
        self.maxProblems = maxProblems
        self.progress = progress
    }

    mutating func add(_ kind: IntegrityProblem.Kind, _ location: String, key: String? = nil, _ detail: String) {
        guard problems.count < maxProblems else { truncated = true; return }
        problems.append(IntegrityProblem(kind: kind, location: location, key: key, detail: detail))
    }

    mutating func counted() {
        entries += 1
        if entries % 4_096 == 0 { progress?(entries) }
    }

    mutating func walk(_ databases: [RawDatabase], in transaction: ReadTransaction) throws {
        let byName = Dictionary(databases.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        var accounted: Set<String> = [Catalog.databaseName, Store.requirementsDatabaseName]
        var catalog: [CatalogEntry] = []

        if let database = byName[Catalog.databaseName] {
            try transaction.rawScan(database) { key, value in
                counted()
                do {
                    catalog.append(try CatalogEntry.decode(value, key: key))
                } catch KVStoreError.corruptValue(_, let keyText, let reason, _) {
                    add(.catalog, Catalog.databaseName, key: keyText, reason)
                }
                return true
            }
        }
        if let database = byName[Store.requirementsDatabaseName] {
            try transaction.rawScan(database) { _, _ in counted(); return true }
        }

        let collections = Dictionary(catalog.filter { $0.kind == .collection }.map { ($0.name, $0) },
                                     uniquingKeysWith: { a, _ in a })
        for entry in catalog {
            accounted.insert(entry.database)
            let location = entry.kind == .collection ? entry.name : "defaults suite '\(entry.name)'"
            guard let keyEncoding = KeyEncoding(entry.keyEncoding) else {
                add(.catalog, location, "unknown key encoding '\(entry.keyEncoding)'")
                continue
            }
            guard let database = byName[entry.database] else {
                add(.catalog, location, "its database \(entry.database) does not exist")
                continue
            }
            try walkEntries(database, location: location, keyEncoding: keyEncoding,
                            valueEncoding: entry.valueEncoding,
                            maxValueSize: entry.kind == .defaults ? SharedDefaults.maxValueSize : CBORLimits.default.maxInputSize,
                            in: transaction)
            if let source = entry.derivedFrom {
                // An aggregation's keys are buckets, not the source's keys: only the source's presence is checked.
                if entry.bucketed == true {
                    if collections[source] == nil { add(.catalog, location, "it aggregates '\(source)', which is not in the catalog") }
                } else if let sourceEntry = collections[source], let sourceDatabase = byName[sourceEntry.database] {
                    try checkDerived(database, location: location, keyEncoding: keyEncoding,
                                     source: sourceDatabase, sourceName: source, in: transaction)
                } else {
                    add(.catalog, location, "it is derived from '\(source)', which is not in the catalog")
                }
            }
            for index in entry.indexes {
                accounted.insert(index.database)
                let indexLocation = "\(entry.name) index \(index.name)"
                guard let indexEncoding = KeyEncoding(index.keyEncoding) else {
                    add(.catalog, indexLocation, "unknown key encoding '\(index.keyEncoding)'")
                    continue
                }
                guard let indexDatabase = byName[index.database] else {
                    add(.catalog, indexLocation, "its database \(index.database) does not exist")
                    continue
                }
                try checkIndex(indexDatabase, location: indexLocation, indexEncoding: indexEncoding,
                               keyEncoding: keyEncoding, records: database, in: transaction)
            }
        }
        for database in databases where !accounted.contains(database.name) {
            add(.unknownDatabase, database.name, "the catalog does not account for this database")
        }
        progress?(entries)
    }

    private mutating func walkEntries(_ database: RawDatabase, location: String, keyEncoding: KeyEncoding,
                                      valueEncoding: ValueEncoding, maxValueSize: Int,
                                      in transaction: ReadTransaction) throws {
        if case .other(let name) = valueEncoding {
            add(.catalog, location, "unknown value encoding '\(name)'")
        }
        try transaction.rawScan(database) { keyBuffer, value in
            counted()
            let key = Array(keyBuffer)
            switch CatalogEntry.entryProblem(key: key, value: value, keyEncoding: keyEncoding, valueEncoding: valueEncoding,
                                             maxValueSize: maxValueSize) {
            case .key(let detail): add(.corruptKey, location, key: "0x" + Hex.encode(key), detail)
            case .value(let rendered, let detail): add(.corruptValue, location, key: rendered, detail)
            case nil: break
            }
            return true
        }
    }

    private mutating func checkIndex(_ index: RawDatabase, location: String, indexEncoding: KeyEncoding,
                                     keyEncoding: KeyEncoding, records: RawDatabase,
                                     in transaction: ReadTransaction) throws {
        try transaction.rawScan(index) { entryBuffer, _ in
            counted()
            let entry = Array(entryBuffer)
            let prefix: (value: KeyValue, length: Int)
            do {
                prefix = try indexEncoding.renderPrefix(entry)
            } catch {
                add(.corruptKey, location, key: "0x" + Hex.encode(entry), "the index key does not decode as \(indexEncoding): \(error)")
                return true
            }
            let primary = Array(entry[prefix.length...])
            let rendered: String
            do {
                rendered = try keyEncoding.render(primary).description
            } catch {
                add(.corruptKey, location, key: "0x" + Hex.encode(entry), "the primary key after \(prefix.value) does not decode as \(keyEncoding): \(error)")
                return true
            }
            if try transaction.rawGet(records, primary) == nil {
                add(.indexEntryWithoutRecord, location, key: rendered, "index key \(prefix.value) points at a record that does not exist")
            }
            return true
        }
    }

    private mutating func checkDerived(_ database: RawDatabase, location: String, keyEncoding: KeyEncoding,
                                       source: RawDatabase, sourceName: String,
                                       in transaction: ReadTransaction) throws {
        try transaction.rawScan(database) { keyBuffer, _ in
            let key = Array(keyBuffer)
            if try transaction.rawGet(source, key) == nil {
                add(.derivedEntryWithoutSource, location, key: (try? keyEncoding.render(key).description) ?? "0x" + Hex.encode(key),
                    "no record at this key in '\(sourceName)'")
            }
            return true
        }
    }
}

/// What ``Store/checkIntegrity(maxProblems:progress:)`` finds wrong with one stored entry, as its
/// catalog entry describes entries.
package enum CatalogEntryProblem: Error, CustomStringConvertible {
    /// The key does not decode with the key encoding.
    case key(String)
    /// The value (at the key, rendered) is over the size limit, not of its layout, or not CBOR.
    case value(rendered: String, String)

    package var description: String {
        switch self {
        case .key(let detail): "the key \(detail)"
        case .value(let rendered, let detail): "the value at \(rendered) is \(detail)"
        }
    }
}

extension CatalogEntry {
    /// The largest value ``Store/checkIntegrity(maxProblems:progress:)`` accepts in this collection or suite.
    package var maxValueSize: Int { kind == .defaults ? SharedDefaults.maxValueSize : CBORLimits.default.maxInputSize }

    /// Why `key` and `value` are not an entry of this collection or suite as its catalog entry describes
    /// them, or `nil`: the test ``Store/checkIntegrity(maxProblems:progress:)`` (`kvtool check`) applies to
    /// every stored entry, for a writer that stores bytes by name (a replicator of a collection it knows
    /// only by name), so that what it stores is what the check accepts.
    package func entryProblem(key: [UInt8], value: [UInt8]) -> CatalogEntryProblem? {
        guard let keyEncoding = KeyEncoding(self.keyEncoding) else { return .key("has an unknown key encoding '\(self.keyEncoding)'") }
        return value.withUnsafeBytes { value in
            Self.entryProblem(key: key, value: value, keyEncoding: keyEncoding, valueEncoding: valueEncoding, maxValueSize: maxValueSize)
        }
    }

    /// Why `key` is not a key of this collection or suite (it does not decode with its key encoding), or `nil`.
    package func keyProblem(_ key: [UInt8]) -> CatalogEntryProblem? {
        guard let keyEncoding = KeyEncoding(self.keyEncoding) else { return .key("has an unknown key encoding '\(self.keyEncoding)'") }
        do {
            _ = try keyEncoding.render(key)
            return nil
        } catch {
            return .key("does not decode as \(keyEncoding): \(error)")
        }
    }

    static func entryProblem(key: [UInt8], value: UnsafeRawBufferPointer, keyEncoding: KeyEncoding, valueEncoding: ValueEncoding,
                             maxValueSize: Int) -> CatalogEntryProblem? {
        let rendered: String
        do {
            rendered = try keyEncoding.render(key).description
        } catch {
            return .key("does not decode as \(keyEncoding): \(error)")
        }
        // What reading refuses (a value stored raw by another process), reported without decoding it.
        if value.count > maxValueSize {
            return .value(rendered: rendered, "\(value.count) bytes, over the \(maxValueSize)-byte limit of a value")
        }
        switch valueEncoding {
        case .fixed(let size):
            if value.count != size { return .value(rendered: rendered, "\(value.count) bytes, but the layout is \(size)") }
        case .cbor:
            do {
                _ = try CBORValue.decode(value)
            } catch {
                return .value(rendered: rendered, "not valid CBOR: \(error)")
            }
        case .bytes, .other:
            break
        }
        return nil
    }
}
