/// What the store records about one collection or defaults suite, in the store itself, so that any
/// process or tool can render its keys and values without the Swift types.
public struct CatalogEntry: Codable, Hashable, Sendable {
    public enum Kind: String, Codable, Hashable, Sendable, CaseIterable {
        case collection, defaults
    }

    /// An index of a collection.
    public struct IndexEntry: Codable, Hashable, Sendable {
        public var name: String
        /// ``KeyEncoding`` description of the index key.
        public var keyEncoding: String
        /// The LMDB database holding the index.
        public var database: String

        public init(name: String, keyEncoding: String, database: String) {
            self.name = name
            self.keyEncoding = keyEncoding
            self.database = database
        }
    }

    public var name: String
    public var kind: Kind
    /// ``KeyEncoding`` description (`int64`, `day`, `tuple(uuid,date)`…).
    public var keyEncoding: String
    /// The values' encoding (`cbor`, `fixed(24)`, `bytes`): a codec's ``ValueCodec/encodingName``,
    /// parsed. Stored as its text.
    public var valueEncoding: ValueEncoding
    public var schemaVersion: Int
    public var indexes: [IndexEntry]
    /// Collections derived from this one (maintained in the same transaction).
    public var derived: [String]
    /// The collection this one is derived from, if any. Do not write to it directly.
    public var derivedFrom: String?
    /// `true` when this collection holds per-bucket aggregates of ``derivedFrom`` (an ``Aggregation``):
    /// its keys are buckets, not the source's keys. Absent (`nil`) otherwise.
    public var bucketed: Bool?
    /// The LMDB database holding the entries (what `mdb_dump -s` takes).
    public var database: String
    /// The identifiers of the migrations applied, in order, when the collection is opened with a
    /// ``CollectionMigrator``: one per version after the first (`schemaVersion - 1` of them). Absent
    /// (`nil`) for collections opened with a `schemaVersion:` number only.
    public var migrations: [String]?

    /// Whether writes need Swift code (index keys or derived values) that tools like `kvtool` lack.
    public var hasMaintainedData: Bool { !indexes.isEmpty || !derived.isEmpty || derivedFrom != nil }

    public init(name: String, kind: Kind, keyEncoding: String, valueEncoding: ValueEncoding, schemaVersion: Int,
                indexes: [IndexEntry], derived: [String], derivedFrom: String?, database: String, bucketed: Bool? = nil,
                migrations: [String]? = nil) {
        self.name = name
        self.kind = kind
        self.keyEncoding = keyEncoding
        self.valueEncoding = valueEncoding
        self.schemaVersion = schemaVersion
        self.indexes = indexes
        self.derived = derived
        self.derivedFrom = derivedFrom
        self.database = database
        self.bucketed = bucketed
        self.migrations = migrations
    }

    /// `N` when values are ``FixedLayoutCodec`` layouts of `N` bytes (`fixed(N)`); otherwise `nil`.
    public var fixedValueSize: Int? { valueEncoding.fixedSize }

    /// Whether `name` may name a collection, index or defaults suite: 1–200 bytes of ASCII letters,
    /// digits, `.`, `_` and `-`.
    public static func isValidName(_ name: String) -> Bool {
        (try? Catalog.validateName(name, what: "collection")) != nil
    }

    /// The largest `fixed(N)` layout a catalog entry may name (LMDB's own limit on a value is 4 GiB;
    /// a fixed layout is a small trivial struct).
    public static let maxFixedValueSize = 1 << 20

    /// The catalog key of an entry: `c/NAME` for a collection, `d/NAME` for a defaults suite.
    public static func catalogKey(name: String, kind: Kind) -> [UInt8] { Catalog.key(name, kind: kind) }

    /// Parses one stored catalog entry: `value` must be the CBOR of an entry stored at `key`, and
    /// describe what the store itself would write (see ``problem``). Anything else was written by
    /// something other than KVStore, and reading on from it could open the wrong database.
    ///
    /// - Throws: ``KVStoreError/corruptValue(collection:key:reason:underlying:)`` naming `_catalog`, the key and
    ///   the first problem, in one line.
    public static func decode(_ value: some Collection<UInt8>, key: some Collection<UInt8>) throws -> CatalogEntry {
        let keyBytes = Array(key)
        let keyText = Catalog.renderKey(keyBytes)
        let entry: CatalogEntry
        do {
            entry = try CBORDecoder().decode(CatalogEntry.self, from: Array(value))
        } catch {
            throw KVStoreError.corruptValue(collection: Catalog.databaseName, key: keyText,
                                            reason: "the entry does not decode: \(error)".split(separator: "\n", omittingEmptySubsequences: false).joined(separator: " "),
                                            underlying: .init(error))
        }
        if let problem = entry.problem {
            throw KVStoreError.corruptValue(collection: Catalog.databaseName, key: keyText, reason: problem)
        }
        guard Catalog.key(entry.name, kind: entry.kind) == keyBytes else {
            throw KVStoreError.corruptValue(collection: Catalog.databaseName, key: keyText,
                                            reason: "the entry describes \(entry.kind.rawValue) \(KVStoreError.quote(entry.name)), not its key")
        }
        return entry
    }

    /// The first thing in the entry that KVStore would never have written, or `nil`: a name that is
    /// not a valid name, a key encoding that does not parse, a value encoding that is not a short
    /// token (or a `fixed(N)` out of range), a schema version below 1, databases other than the ones
    /// the names give (`c/NAME`, `d/NAME`, `i/NAME/INDEX`), or indexes and derived collections on a
    /// defaults suite. One line; names are quoted and shortened.
    public var problem: String? {
        let q = KVStoreError.quote
        if !Self.isValidName(name) { return "the name \(q(name)) is not a valid \(kind.rawValue) name" }
        if KeyEncoding(keyEncoding) == nil { return "unknown key encoding \(q(keyEncoding))" }
        switch valueEncoding {
        case .cbor, .bytes:
            break
        case .fixed(let size):
            if size > Self.maxFixedValueSize {
                return "the value encoding \(q(valueEncoding.description)) is over the \(Self.maxFixedValueSize)-byte limit of a fixed layout"
            }
        case .other(let name):
            let tokenOK = !name.isEmpty && name.utf8.count <= 100 && name.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
            if !tokenOK { return "the value encoding \(q(name)) is not an encoding name" }
            if name.hasPrefix("fixed(") { return "the value encoding \(q(name)) is not fixed(N) with N ≥ 1" }
        }
        if schemaVersion < 1 { return "schema version \(schemaVersion) is below 1" }
        let expected = kind == .collection ? Catalog.collectionDatabase(name) : Catalog.defaultsDatabase(name)
        if database != expected { return "its database is \(q(database)), not \(expected)" }
        if kind == .defaults && (!indexes.isEmpty || !derived.isEmpty || derivedFrom != nil) {
            return "a defaults suite with indexes or derived collections"
        }
        var indexNames: Set<String> = []
        for index in indexes {
            if !Self.isValidName(index.name) { return "index name \(q(index.name)) is not a valid name" }
            if !indexNames.insert(index.name).inserted { return "index \(q(index.name)) is listed twice" }
            if KeyEncoding(index.keyEncoding) == nil { return "index \(q(index.name)) has unknown key encoding \(q(index.keyEncoding))" }
            let expected = Catalog.indexDatabase(name, index.name)
            if index.database != expected { return "index \(q(index.name)) has database \(q(index.database)), not \(expected)" }
        }
        for target in derived where !Self.isValidName(target) || target == name {
            return "derived collection \(q(target)) is not a valid name"
        }
        if let derivedFrom, !Self.isValidName(derivedFrom) || derivedFrom == name {
            return "derived from \(q(derivedFrom)), which is not a valid name"
        }
        if bucketed != nil && (bucketed != true || derivedFrom == nil) {
            return "\"bucketed\" is only ever true, on a collection derived from another"
        }
        if let migrations {
            if kind == .defaults || migrations.count != schemaVersion - 1 {
                return "it records \(migrations.count) migrations at schema version \(schemaVersion)"
            }
            var seen: Set<String> = []
            for identifier in migrations {
                if let problem = Self.migrationIdentifierProblem(identifier) { return problem }
                if !seen.insert(identifier).inserted { return "migration \(q(identifier)) is listed twice" }
            }
        }
        return nil
    }

    /// Why `identifier` cannot name a migration (empty, or over 200 bytes), or `nil`.
    static func migrationIdentifierProblem(_ identifier: String) -> String? {
        if identifier.isEmpty { return "a migration identifier is empty" }
        if identifier.utf8.count > 200 { return "migration identifier \(KVStoreError.quote(identifier)) is longer than 200 bytes" }
        return nil
    }
}


/// The catalog: an LMDB database named `_catalog` mapping names to ``CatalogEntry`` values (CBOR).
package enum Catalog {
    package static let databaseName = "_catalog"

    package static func collectionDatabase(_ name: String) -> String { "c/" + name }
    package static func indexDatabase(_ collection: String, _ index: String) -> String { "i/\(collection)/\(index)" }
    package static func defaultsDatabase(_ suite: String) -> String { "d/" + suite }

    static func key(_ name: String, kind: CatalogEntry.Kind) -> [UInt8] {
        Array((kind == .collection ? "c/" : "d/").utf8) + Array(name.utf8)
    }

    static func entry(named name: String, kind: CatalogEntry.Kind, in transaction: ReadTransaction) throws -> CatalogEntry? {
        let key = key(name, kind: kind)
        guard let database = transaction.store.catalogDatabase,
              let bytes = try transaction.get(database, key) else { return nil }
        return try CatalogEntry.decode(bytes, key: key)
    }

    /// A catalog key as text for messages: quoted and shortened, control bytes escaped.
    static func renderKey(_ key: [UInt8]) -> String {
        KVStoreError.quote(String(decoding: key, as: UTF8.self))
    }

    static func put(_ entry: CatalogEntry, in transaction: WriteTransaction) throws {
        guard let database = transaction.store.catalogDatabase else {
            throw KVStoreError.readOnly(path: transaction.store.directory)
        }
        try transaction.put(database, key(entry.name, kind: entry.kind), try CBOREncoder().encode(entry))
    }

    /// Every entry; with `skippingCorrupt`, the entries that do not parse are left out rather than
    /// thrown (``Store/checkIntegrity(maxProblems:progress:)`` names them).
    static func all(in transaction: ReadTransaction, skippingCorrupt: Bool = false) throws -> [CatalogEntry] {
        guard let database = transaction.store.catalogDatabase else { return [] }
        var entries: [CatalogEntry] = []
        try transaction.scan(database, .all, reverse: false) { key, value in
            do {
                entries.append(try CatalogEntry.decode(value, key: key))
            } catch KVStoreError.corruptValue where skippingCorrupt {}
            return true
        }
        return entries
    }

    /// Collection and suite names: 1–200 bytes of letters, digits, `.`, `_` and `-`.
    static func validateName(_ name: String, what: String) throws {
        guard !name.isEmpty else { throw KVStoreError.invalidName(name, reason: "\(what) name is empty") }
        guard name.utf8.count <= 200 else {
            throw KVStoreError.invalidName(name, reason: "\(what) name is longer than 200 bytes")
        }
        // By byte: a scalar past ASCII is made of bytes from 0x80 on, none of them allowed; and the
        // ASCII letters are what Unicode calls alphabetic in ASCII. (Looking the property up per
        // scalar made this check a third of what reading history cost: issue 51, callgrind.)
        for byte in name.utf8 where !Self.allowedInName(byte) {
            throw KVStoreError.invalidName(
                name, reason: "\(what) names may contain only ASCII letters, digits, '.', '_' and '-'")
        }
    }

    /// Whether `byte` may be in a collection's, suite's or index's name: an ASCII letter or digit, `.`,
    /// `_` or `-`.
    @inline(__always)
    static func allowedInName(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"): true
        default: false
        }
    }
}

extension Store {
    /// Every collection and defaults suite recorded in the catalog, sorted by kind and name.
    public func catalog() throws -> [CatalogEntry] {
        try read { try Catalog.all(in: $0) }
    }

    /// Every catalog entry with its number of entries (keys, for a defaults suite), all counted in one
    /// read transaction.
    ///
    /// The databases are opened before that transaction begins: LMDB lets a transaction use only the
    /// named databases that were open in the process when it began.
    ///
    /// - Parameter skippingCorrupt: leave out the entries that do not parse (what an integrity check
    ///   wants, as it names them) rather than throw ``KVStoreError/corruptValue(collection:key:reason:underlying:)``.
    public func catalogWithCounts(skippingCorrupt: Bool = false) throws -> [(entry: CatalogEntry, count: Int)] {
        let entries = try read { try Catalog.all(in: $0, skippingCorrupt: skippingCorrupt) }
        let handles = try entries.map { try database(named: $0.database, create: false) }
        return try read { transaction in
            try zip(entries, handles).map { entry, handle in
                (entry, try handle.map { try transaction.count($0) } ?? 0)
            }
        }
    }

    /// The catalog entry of one collection, or `nil`.
    public func catalogEntry(forCollection name: String) throws -> CatalogEntry? {
        try read { try Catalog.entry(named: name, kind: .collection, in: $0) }
    }
}
