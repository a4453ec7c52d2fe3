import CLMDB

/// What the store records about one collection or defaults suite, in the store itself, so that any
/// process or tool can render its keys and values without the Swift types.
public struct CatalogEntry: Codable, Hashable, Sendable {
    public enum Kind: String, Codable, Hashable, Sendable {
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
    /// ``ValueCodec/encodingName`` (`cbor`, `fixed(24)`, `bytes`).
    public var valueEncoding: String
    public var schemaVersion: Int
    public var indexes: [IndexEntry]
    /// Collections derived from this one (maintained in the same transaction).
    public var derived: [String]
    /// The collection this one is derived from, if any. Do not write to it directly.
    public var derivedFrom: String?
    /// The LMDB database holding the entries (what `mdb_dump -s` takes).
    public var database: String

    /// Whether writes need Swift code (index keys or derived values) that tools like `kvtool` lack.
    public var hasMaintainedData: Bool { !indexes.isEmpty || !derived.isEmpty || derivedFrom != nil }

    public init(name: String, kind: Kind, keyEncoding: String, valueEncoding: String, schemaVersion: Int,
                indexes: [IndexEntry], derived: [String], derivedFrom: String?, database: String) {
        self.name = name
        self.kind = kind
        self.keyEncoding = keyEncoding
        self.valueEncoding = valueEncoding
        self.schemaVersion = schemaVersion
        self.indexes = indexes
        self.derived = derived
        self.derivedFrom = derivedFrom
        self.database = database
    }

    /// `N` when values are ``FixedLayoutCodec`` layouts of `N` bytes (`fixed(N)`); otherwise `nil`.
    public var fixedValueSize: Int? {
        guard valueEncoding.hasPrefix("fixed("), valueEncoding.hasSuffix(")"),
              let size = Int(valueEncoding.dropFirst(6).dropLast()), size >= 1, "fixed(\(size))" == valueEncoding else { return nil }
        return size
    }

    /// Whether `name` may name a collection, index or defaults suite: 1–200 bytes of ASCII letters,
    /// digits, `.`, `_` and `-`.
    public static func isValidName(_ name: String) -> Bool {
        (try? Catalog.validateName(name, what: "collection")) != nil
    }
}


/// The catalog: an LMDB database named `_catalog` mapping names to ``CatalogEntry`` values (CBOR).
enum Catalog {
    static let databaseName = "_catalog"

    static func collectionDatabase(_ name: String) -> String { "c/" + name }
    static func indexDatabase(_ collection: String, _ index: String) -> String { "i/\(collection)/\(index)" }
    static func defaultsDatabase(_ suite: String) -> String { "d/" + suite }

    static func key(_ name: String, kind: CatalogEntry.Kind) -> [UInt8] {
        Array((kind == .collection ? "c/" : "d/").utf8) + Array(name.utf8)
    }

    static func entry(named name: String, kind: CatalogEntry.Kind, in transaction: ReadTransaction) throws -> CatalogEntry? {
        guard let database = transaction.store.catalogDatabase,
              let bytes = try transaction.get(database, key(name, kind: kind)) else { return nil }
        do {
            return try CBORDecoder().decode(CatalogEntry.self, from: bytes)
        } catch {
            throw KVStoreError.corruptValue(collection: databaseName, key: "\(kind.rawValue) '\(name)'", reason: "\(error)")
        }
    }

    static func put(_ entry: CatalogEntry, in transaction: WriteTransaction) throws {
        guard let database = transaction.store.catalogDatabase else {
            throw KVStoreError.readOnly(path: transaction.store.directory)
        }
        try transaction.put(database, key(entry.name, kind: entry.kind), try CBOREncoder().encode(entry))
    }

    static func all(in transaction: ReadTransaction) throws -> [CatalogEntry] {
        guard let database = transaction.store.catalogDatabase else { return [] }
        var entries: [CatalogEntry] = []
        try transaction.scan(database, .all, reverse: false) { key, value in
            do {
                entries.append(try CBORDecoder().decode(CatalogEntry.self, from: value))
            } catch {
                throw KVStoreError.corruptValue(collection: databaseName, key: String(decoding: key, as: UTF8.self), reason: "\(error)")
            }
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
        for scalar in name.unicodeScalars {
            let ok = scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)
                || scalar == "." || scalar == "_" || scalar == "-")
            guard ok else {
                throw KVStoreError.invalidName(
                    name, reason: "\(what) names may contain only ASCII letters, digits, '.', '_' and '-'")
            }
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
    public func catalogWithCounts() throws -> [(entry: CatalogEntry, count: Int)] {
        let entries = try catalog()
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
