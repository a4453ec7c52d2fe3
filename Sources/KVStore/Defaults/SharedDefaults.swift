#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A UserDefaults-style suite of small settings, shared by every process that opens the container.
///
/// ```swift
/// let defaults = try container.defaults()          // the suite named after the App Group
/// try defaults.set(trainer.id.uuidString, forKey: "selectedTrainerId")
/// // … in the notification extension, another process:
/// let id = try defaults.string(forKey: "selectedTrainerId")
/// ```
///
/// Unlike `UserDefaults`, a write is committed to the store before `set` returns, and the next read in
/// any process sees it: there is no `synchronize()` and no stale in-memory cache. Values are property
/// lists (`String`, `Int` and other integers, `Double`, `Float`, `Bool`, `Data`, `Date`, `URL`, and
/// arrays and string-keyed dictionaries of those), or any `Codable` through ``set(encodable:forKey:)``.
/// They are stored as CBOR in the LMDB database `d/<suite>`.
///
/// Each value may be at most ``maxValueSize`` bytes once encoded (iOS similarly caps a preferences
/// domain); keep images and other large data in ``SharedFiles``.
///
/// Every method reads or writes in a transaction of its own, or in the one you pass (`in:`), so a
/// setting can change atomically with collection records. Safe to use from any thread.
public final class SharedDefaults: Sendable {
    /// The largest encoded value a key may hold: 1 MiB.
    public static let maxValueSize = 1 << 20

    /// The suite's name.
    public let suiteName: String
    /// The store the suite lives in.
    public let store: Store
    private let database: DatabaseHandle?
    private let registered = Locked<[String: CBORValue]>([:])
    /// What the getters without a transaction read last, while no transaction has committed since
    /// (see ``committedValue(forKey:)``).
    private let committed = Locked(CommittedValueCache())

    /// Opens (creating, unless the store is read-only) the suite `suiteName` in `store`.
    ///
    /// - Throws: ``KVStoreError/invalidName(_:reason:)`` for a bad suite name.
    public init(store: Store, suiteName: String) throws {
        try Catalog.validateName(suiteName, what: "defaults suite")
        self.store = store
        self.suiteName = suiteName
        let databaseName = Catalog.defaultsDatabase(suiteName)
        database = try store.database(named: databaseName, create: true)
        if !store.isReadOnly {
            let exists = try store.read { try Catalog.entry(named: suiteName, kind: .defaults, in: $0) } != nil
            if !exists {
                try store.write { transaction in
                    try Catalog.put(CatalogEntry(
                        name: suiteName, kind: .defaults, keyEncoding: KeyEncoding.string.description,
                        valueEncoding: .cbor, schemaVersion: 1, indexes: [], derived: [], derivedFrom: nil,
                        database: databaseName), in: transaction)
                }
            }
        }
    }

    private var target: Mutation.Target { .defaults(suiteName) }

    /// The suite's database as `transaction` sees it, or `nil` if no process has written to it yet.
    private func resolvedDatabase(in transaction: ReadTransaction) throws -> DatabaseHandle? {
        transaction.readTracker?.note(target)
        if let database { return database }
        return try store.environment.database(named: Catalog.defaultsDatabase(suiteName), in: transaction.pointer)
    }

    /// Calls `body` with the key's stored bytes: an ASCII key's own UTF-8, without building an array
    /// (ASCII is its own normal form); any other key through ``keyBytes(_:)``, which normalises and checks it.
    private func withKey<R>(_ key: String, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        var key = key
        let direct = try key.withUTF8 { utf8 -> R? in
            let buffer = UnsafeRawBufferPointer(utf8)
            guard !buffer.isEmpty, buffer.count <= Store.maxKeySize, CBORReader.isASCII(buffer) else { return nil }
            return .some(try body(buffer))
        }
        if let direct { return direct }
        return try keyBytes(key).withUnsafeBytes { try body($0) }
    }

    private func keyBytes(_ key: String) throws -> [UInt8] {
        let bytes = key.encodedKey
        guard !bytes.isEmpty else {
            throw KVStoreError.invalidKey(collection: "defaults \(suiteName)", reason: "the key is empty")
        }
        guard bytes.count <= Store.maxKeySize else {
            throw KVStoreError.invalidKey(collection: "defaults \(suiteName)",
                                          reason: "the key is \(bytes.count) bytes; the limit is \(Store.maxKeySize)")
        }
        return bytes
    }

    // MARK: - Writing

    /// Stores a property-list value, or removes the key if `value` is `nil`.
    ///
    /// - Throws: ``KVStoreError/notAPropertyList(key:type:)`` for other types,
    ///   ``KVStoreError/valueTooLarge(what:size:limit:hint:)`` over ``maxValueSize``.
    public func set(_ value: Any?, forKey key: String) throws {
        try store.write { try set(value, forKey: key, in: $0) }
    }

    /// Stores a property-list value inside `transaction`.
    public func set(_ value: Any?, forKey key: String, in transaction: WriteTransaction) throws {
        guard let value else { return try removeObject(forKey: key, in: transaction) }
        let encoded = try PropertyListValue.cbor(from: value, key: key).encoded()
        try store(encoded, forKey: key, in: transaction)
    }

    /// Stores any `Encodable` value (as CBOR). Read it back with ``value(_:forKey:)``.
    public func set<T: Encodable>(encodable value: T, forKey key: String) throws {
        try store.write { try set(encodable: value, forKey: key, in: $0) }
    }

    /// Stores any `Encodable` value inside `transaction`.
    public func set<T: Encodable>(encodable value: T, forKey key: String, in transaction: WriteTransaction) throws {
        let encoded: [UInt8]
        do {
            encoded = try CBOREncoder().encode(value)
        } catch {
            throw KVStoreError.encodingFailed(collection: "defaults \(suiteName)", reason: "\(error)")
        }
        try store(encoded, forKey: key, in: transaction)
    }

    private func store(_ encoded: [UInt8], forKey key: String, in transaction: WriteTransaction) throws {
        let k = try keyBytes(key)
        guard encoded.count <= Self.maxValueSize else {
            throw KVStoreError.valueTooLarge(
                what: "the value for key '\(key)' in defaults suite '\(suiteName)'", size: encoded.count,
                limit: Self.maxValueSize, hint: "store large data with SharedFiles instead")
        }
        // Refuse what reading would refuse (nesting deeper than the decoder's limit).
        do {
            try CBORReader.check(encoded, limits: .default)
        } catch {
            throw KVStoreError.encodingFailed(collection: suiteName, reason: "the value for key '\(key)': \(error)")
        }
        guard let database = try resolvedDatabase(in: transaction) else { throw KVStoreError.readOnly(path: store.directory) }
        try transaction.put(database, k, encoded)
        transaction.record(Mutation(target: target, key: k, operation: .put))
    }

    /// Removes the stored value for `key` (a registered default shows through again).
    public func removeObject(forKey key: String) throws {
        try store.write { try removeObject(forKey: key, in: $0) }
    }

    /// Removes the stored value for `key` inside `transaction`.
    public func removeObject(forKey key: String, in transaction: WriteTransaction) throws {
        let k = try keyBytes(key)
        guard let database = try resolvedDatabase(in: transaction) else { throw KVStoreError.readOnly(path: store.directory) }
        if try transaction.delete(database, k) {
            transaction.record(Mutation(target: target, key: k, operation: .delete))
        }
    }

    /// Sets fallback values for keys that have none stored. Like `UserDefaults`, they live in this
    /// process's memory only and are never written to the store.
    public func register(defaults: [String: Any]) throws {
        var converted: [String: CBORValue] = [:]
        for (key, value) in defaults { converted[key] = try PropertyListValue.cbor(from: value, key: key) }
        registered.withLock { $0.merge(converted) { _, new in new } }
    }

    // MARK: - Reading

    /// The stored value (or registered default) as a property list, or `nil`.
    public func object(forKey key: String) throws -> Any? {
        try rawValue(forKey: key).map { try PropertyListValue.object(from: $0) }
    }

    /// The stored value inside `transaction`, or the registered default, or `nil`.
    public func object(forKey key: String, in transaction: ReadTransaction) throws -> Any? {
        try rawValue(forKey: key, in: transaction).map { try PropertyListValue.object(from: $0) }
    }

    /// A string, or a number's or bool's text; `nil` otherwise.
    public func string(forKey key: String, in transaction: ReadTransaction) throws -> String? {
        let stored = try withKey(key) { k -> String?? in
            guard let database = try resolvedDatabase(in: transaction),
                  let bytes = try transaction.get(database, key: k) else { return nil }
            // The usual case, a stored text string, is read straight from the map without a CBORValue.
            if let text = Self.wholeText(bytes) { return .some(text) }
            return .some(Self.string(from: try decodeValue(bytes, key: key)))
        }
        if let stored { return stored }
        return Self.string(from: registered.withLock { $0[key] })
    }

    /// `bytes` as a String when they are exactly one definite-length CBOR text string of valid UTF-8
    /// within the size limit; `nil` for anything else (which the general path decodes, or refuses).
    private static func wholeText(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard bytes.count <= maxValueSize, let base = bytes.baseAddress, bytes.count > 0 else { return nil }
        let reader = CBORReader(base: base, end: bytes.count)
        guard let head = try? reader.head(at: 0), head.major == 3, !head.isIndefinite,
              head.argument == UInt64(bytes.count - head.next) else { return nil }
        return CBORReader.string(UnsafeRawBufferPointer(rebasing: bytes[head.next...]))
    }

    /// What ``string(forKey:in:)`` gives for a decoded value.
    static func string(from value: CBORValue?) -> String? {
        switch value {
        case .text(let s)?: s
        case .unsigned(let n)?: String(n)
        case .negative(let n)?: n == .max ? "-18446744073709551616" : "-\(n + 1)"
        case .float(let d)?: String(d)
        case .bool(let b)?: b ? "1" : "0"
        default: nil
        }
    }

    /// An integer (numbers are truncated, `true` is 1, numeric strings are parsed), or 0.
    public func integer(forKey key: String, in transaction: ReadTransaction) throws -> Int {
        Self.integer(from: try rawValue(forKey: key, in: transaction))
    }

    /// What ``integer(forKey:in:)`` gives for a decoded value.
    static func integer(from value: CBORValue?) -> Int {
        switch value {
        case .unsigned(let n)?: Int(clamping: n)
        case .negative(let n)?: n < UInt64(Int.max) ? -1 - Int(n) : Int.min
        case .float(let d)?: d.isFinite ? Int(clamping: Int64(exactly: d.rounded(.towardZero)) ?? 0) : 0
        case .bool(let b)?: b ? 1 : 0
        case .text(let s)?: Int(s.trimmingBlanks) ?? Double(s).flatMap { Int(exactly: $0.rounded(.towardZero)) } ?? 0
        default: 0
        }
    }

    /// A floating-point number (integers converted, numeric strings parsed), or 0.
    public func double(forKey key: String, in transaction: ReadTransaction) throws -> Double {
        Self.double(from: try rawValue(forKey: key, in: transaction))
    }

    /// What ``double(forKey:in:)`` gives for a decoded value.
    static func double(from value: CBORValue?) -> Double {
        switch value {
        case .unsigned(let n)?: Double(n)
        case .negative(let n)?: -1 - Double(n)
        case .float(let d)?: d
        case .bool(let b)?: b ? 1 : 0
        case .text(let s)?: Double(s.trimmingBlanks) ?? 0
        default: 0
        }
    }

    /// A bool (non-zero numbers; strings "YES", "true", "1"), or `false`.
    public func bool(forKey key: String, in transaction: ReadTransaction) throws -> Bool {
        Self.bool(from: try rawValue(forKey: key, in: transaction))
    }

    /// What ``bool(forKey:in:)`` gives for a decoded value.
    static func bool(from value: CBORValue?) -> Bool {
        switch value {
        case .bool(let b)?: b
        case .unsigned(let n)?: n != 0
        case .negative?: true
        case .float(let d)?: d != 0
        case .text(let s)?: ["yes", "true", "1"].contains(s.lowercased())
        default: false
        }
    }

    /// Bytes, or `nil`.
    public func data(forKey key: String, in transaction: ReadTransaction) throws -> Data? {
        Self.data(from: try rawValue(forKey: key, in: transaction))
    }

    /// What ``data(forKey:in:)`` gives for a decoded value.
    static func data(from value: CBORValue?) -> Data? {
        if case .bytes(let b)? = value { return Data(b) }
        return nil
    }

    /// An array, or `nil`.
    public func array(forKey key: String, in transaction: ReadTransaction) throws -> [Any]? {
        try object(forKey: key, in: transaction) as? [Any]
    }

    /// An array of strings, or `nil` if the value is not one.
    public func stringArray(forKey key: String, in transaction: ReadTransaction) throws -> [String]? {
        try object(forKey: key, in: transaction) as? [String]
    }

    /// A dictionary, or `nil`.
    public func dictionary(forKey key: String, in transaction: ReadTransaction) throws -> [String: Any]? {
        try object(forKey: key, in: transaction) as? [String: Any]
    }

    /// A URL, or `nil`.
    public func url(forKey key: String, in transaction: ReadTransaction) throws -> URL? {
        try object(forKey: key, in: transaction) as? URL
    }

    /// A value stored with ``set(encodable:forKey:)`` (or any value that decodes as `T`), or `nil`.
    ///
    /// - Throws: ``KVStoreError/corruptValue(collection:key:reason:underlying:)`` if the value does not decode as `T`.
    public func value<T: Decodable>(_ type: T.Type, forKey key: String) throws -> T? {
        try store.read { try value(type, forKey: key, in: $0) }
    }

    /// A `Decodable` value read inside `transaction`, or `nil`.
    public func value<T: Decodable>(_ type: T.Type, forKey key: String, in transaction: ReadTransaction) throws -> T? {
        let k = try keyBytes(key)
        do {
            if let database = try resolvedDatabase(in: transaction), let bytes = try transaction.get(database, k) {
                try checkSize(bytes, key: key)
                return try CBORDecoder().decode(T.self, from: bytes)
            }
            guard let fallback = registered.withLock({ $0[key] }) else { return nil }
            return try CBORDecoder().decode(T.self, from: fallback.encoded())
        } catch let error as KVStoreError {
            throw error
        } catch {
            throw KVStoreError.corruptValue(collection: "defaults \(suiteName)", key: "'\(key)'", reason: "\(error)", underlying: .init(error))
        }
    }

    /// The stored value (or registered default) as it is stored: a ``CBORValue``, or `nil`.
    public func cborValue(forKey key: String) throws -> CBORValue? {
        try rawValue(forKey: key)
    }

    /// The stored value (or registered default) inside `transaction`, as it is stored, or `nil`.
    public func cborValue(forKey key: String, in transaction: ReadTransaction) throws -> CBORValue? {
        try rawValue(forKey: key, in: transaction)
    }

    /// Stores a ``CBORValue`` as it is, inside `transaction`.
    public func set(cborValue value: CBORValue, forKey key: String, in transaction: WriteTransaction) throws {
        try store(value.encoded(), forKey: key, in: transaction)
    }

    /// The keys that have a stored value, in key order.
    public func keys() throws -> [String] {
        try store.read { try storedKeys(in: $0) }
    }

    /// Every stored value, over the registered defaults, read in one transaction.
    public func dictionaryRepresentation() throws -> [String: Any] {
        var result: [String: Any] = [:]
        for (key, value) in registered.withLock({ $0 }) { result[key] = try PropertyListValue.object(from: value) }
        try store.read { transaction in
            guard let database = try resolvedDatabase(in: transaction) else { return }
            try transaction.scan(database, .all, reverse: false) { keyBytes, valueBytes in
                let key = String(decoding: keyBytes, as: UTF8.self)
                result[key] = try PropertyListValue.object(from: try decodeValue(valueBytes, key: key))
                return true
            }
        }
        return result
    }

    /// The stored value at `key`, without registered defaults, or `nil` (for replication).
    package func storedValue(forKey key: String, in transaction: ReadTransaction) throws -> CBORValue? {
        try stored(forKey: key, in: transaction)?.value
    }

    /// The keys with a stored value inside `transaction`, in key order.
    package func storedKeys(in transaction: ReadTransaction) throws -> [String] {
        guard let database = try resolvedDatabase(in: transaction) else { return [] }
        var keys: [String] = []
        try transaction.scan(database, .all, reverse: false) { key, _ in
            keys.append(String(decoding: key, as: UTF8.self))
            return true
        }
        return keys
    }

    /// The stored keys after `lower` (from the first when `nil`) through `upper` (to the last when
    /// `nil`), as UTF-8, in key order, `limit` at most (for replication, as
    /// `KVCollection.encodedKeys(after:through:limit:in:)`).
    package func storedKeys(after lower: [UInt8]?, through upper: [UInt8]?, limit: Int,
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

    // MARK: - Internals

    /// The stored value, or the registered default, as of the last commit (for the getters without a
    /// transaction).
    func rawValue(forKey key: String) throws -> CBORValue? {
        if let stored = try committedValue(forKey: key) { return stored }
        return registered.withLock { $0[key] }
    }

    /// The value stored under `key` as of the last commit of any process, without registered defaults.
    ///
    /// Served from memory while no transaction has committed since it was read, as `UserDefaults` and
    /// MMKV serve their reads: the ID of the last committed transaction is two loads from LMDB's meta
    /// pages, mapped apart (``MetaPages``), which every commit updates before any reader can see it.
    /// So a value from memory is never older than what a read transaction begun now would see. Inside a
    /// write transaction of this store on this thread, the read transaction is begun anyway, and refuses
    /// to nest as it always did. Values over ``CommittedValueCache/maxValueBytes`` are not kept.
    func committedValue(forKey key: String) throws -> CBORValue? {
        let environment = store.environment
        let last = environment.lastCommittedTransactionID
        if let last, TransactionScope.innermostKind(of: environment) != .write,
           let hit = committed.withLock({ $0.value(forKey: key, at: last) }) {
            return hit
        }
        let (found, id) = try store.read { transaction in
            (try stored(forKey: key, in: transaction), UInt64(transaction.transactionID))
        }
        if last != nil { committed.withLock { $0.remember(found?.value, size: found?.size ?? 0, forKey: key, at: id) } }
        return found?.value
    }

    /// How many keys the getters without a transaction keep in memory now (for tests).
    var committedValueCount: Int { committed.withLock { $0.count } }

    private func rawValue(forKey key: String, in transaction: ReadTransaction) throws -> CBORValue? {
        if let found = try stored(forKey: key, in: transaction) { return found.value }
        return registered.withLock { $0[key] }
    }

    /// The value stored under `key` inside `transaction`, and its size in bytes; `nil` if none is
    /// stored (registered defaults aside). A text string, the usual value, is read without the
    /// general decoder, as in ``string(forKey:in:)``.
    private func stored(forKey key: String, in transaction: ReadTransaction) throws -> (value: CBORValue, size: Int)? {
        try withKey(key) { k in
            guard let database = try resolvedDatabase(in: transaction),
                  let bytes = try transaction.get(database, key: k) else { return nil }
            if let text = Self.wholeText(bytes) { return (.text(text), bytes.count) }
            return (try decodeValue(bytes, key: key), bytes.count)
        }
    }

    /// Refuses a stored value over ``maxValueSize`` (only another process writing raw can store
    /// one), before anything decodes it.
    private func checkSize(_ bytes: UnsafeRawBufferPointer, key: String) throws {
        guard bytes.count <= Self.maxValueSize else {
            throw KVStoreError.corruptValue(collection: "defaults \(suiteName)", key: "'\(key)'",
                                            reason: "the stored value is \(bytes.count) bytes, over the \(Self.maxValueSize)-byte limit of a defaults value")
        }
    }

    private func decodeValue(_ bytes: UnsafeRawBufferPointer, key: String) throws -> CBORValue {
        try checkSize(bytes, key: key)
        do {
            return try CBORValue.decode(bytes)
        } catch {
            throw KVStoreError.corruptValue(collection: "defaults \(suiteName)", key: "'\(key)'", reason: "\(error)", underlying: .init(error))
        }
    }
}

extension String {
    /// The string without leading and trailing spaces and tabs (Unicode's space separators and
    /// U+0009), as Foundation's `trimmingCharacters(in: .whitespaces)` trims them.
    var trimmingBlanks: Substring {
        func isBlank(_ scalar: Unicode.Scalar) -> Bool {
            scalar == "\t" || scalar.properties.generalCategory == .spaceSeparator
        }
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !isBlank($0) }),
              let last = scalars.lastIndex(where: { !isBlank($0) }) else { return "" }
        return self[first...last]
    }
}
