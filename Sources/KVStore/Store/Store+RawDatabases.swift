#if canImport(Glibc)
import Glibc
#endif

/// A named LMDB database of a store, by name: the byte-level view that tools such as `kvtool dump`,
/// `load` and `check` work with, whatever the Swift types of its collection.
///
/// Open one with ``Store/rawDatabase(named:create:)`` *before* the transaction that uses it begins
/// (LMDB lets a transaction use only the databases open when it began).
public struct RawDatabase: Hashable, Sendable, CustomStringConvertible {
    /// The LMDB name (`c/dailyRecords`, `i/billingEvents/bySubscription`, `d/com.example.settings`…).
    public let name: String
    let handle: DatabaseHandle

    public var description: String { name }
}

/// LMDB's figures for one named database (`mdb_stat` and `mdb_dbi_flags`).
public struct RawDatabaseStat: Hashable, Sendable, Codable {
    public var entries: Int
    public var depth: Int
    public var branchPages: Int
    public var leafPages: Int
    public var overflowPages: Int
    /// The database's `mdb_dbi_open` flags (`MDB_DUPSORT`…); 0 for every database KVStore creates.
    public var flags: UInt32
}

/// One slot of LMDB's reader table (`mdb_reader_list`).
public struct ReaderSlot: Hashable, Sendable, Codable {
    /// The process holding the slot.
    public var pid: Int32
    /// The thread that took the slot, as LMDB records it (`pthread_self`).
    public var thread: UInt64
    /// The transaction the reader is looking at, or `nil` if the slot is held but idle (a reset
    /// transaction kept for reuse).
    public var transactionID: Int?
    /// Whether the process still exists (`kill(pid, 0)`). A slot of a dead process is stale:
    /// ``Store/clearStaleReaders()`` frees it.
    public var processAlive: Bool
}

extension Store {
    /// The names of every named database, in LMDB's key order: the catalog, each collection, index and
    /// defaults suite, and SyncKit's history. They are the keys of LMDB's main database.
    ///
    /// - Throws: ``LMDBError/incompatible`` if the main database holds a key that is not a database
    ///   name (not UTF-8, or containing NUL), which KVStore never writes.
    public func databaseNames() throws -> [String] {
        try environment.withReadTransaction(Environment.databaseNames(in:))
    }

    /// Opens the named database `name`, or returns `nil` if it does not exist and `create` is false.
    /// Call it outside every transaction.
    ///
    /// - Throws: ``KVStoreError/databaseOpenedInsideTransaction(_:)`` inside a transaction;
    ///   ``KVStoreError/readOnly(path:)`` when asked to create in a read-only store.
    public func rawDatabase(named name: String, create: Bool = false) throws -> RawDatabase? {
        if create && isReadOnly { throw KVStoreError.readOnly(path: directory) }
        guard !name.isEmpty, !name.utf8.contains(0), name.utf8.count <= Store.maxKeySize else {
            throw KVStoreError.invalidName(name, reason: "an LMDB database name is 1 to \(Store.maxKeySize) bytes without NUL")
        }
        return try database(named: name, create: create).map { RawDatabase(name: name, handle: $0) }
    }

    /// Every named database, opened, in key order. Call it outside every transaction.
    public func rawDatabases() throws -> [RawDatabase] {
        try databaseNames().compactMap { try rawDatabase(named: $0) }
    }

    /// The slots of LMDB's reader table that a process holds, from `mdb_reader_list`.
    public func readerSlots() throws -> [ReaderSlot] {
        try environment.readerSlots()
    }
}

extension ReadTransaction {
    /// The stored value at `key` in `database`, copied, or `nil`.
    public func rawGet(_ database: RawDatabase, _ key: [UInt8]) throws -> [UInt8]? {
        readTracker?.noteUntracked()
        return try get(database.handle, key).map { Array($0) }
    }

    /// Every entry of `database` in key order (or reverse), handed to `body` as the stored bytes, which
    /// are valid only until `body` returns. Return `false` to stop.
    public func rawScan(_ database: RawDatabase, reverse: Bool = false,
                        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool) throws {
        readTracker?.noteUntracked()
        try scan(database.handle, .all, reverse: reverse, body)
    }

    /// LMDB's figures for `database` as this transaction sees it.
    public func rawStat(_ database: RawDatabase) throws -> RawDatabaseStat {
        readTracker?.noteUntracked()
        let s = try stat(database.handle)
        let flags = try self.flags(database.handle)
        return RawDatabaseStat(entries: s.ms_entries, depth: Int(s.ms_depth), branchPages: s.ms_branch_pages,
                               leafPages: s.ms_leaf_pages, overflowPages: s.ms_overflow_pages, flags: flags)
    }
}

extension WriteTransaction {
    /// Opens the named database `name` inside this transaction, creating it if `create` is set and
    /// it does not exist; `nil` if it does not exist and `create` is not set. Unlike
    /// ``Store/rawDatabase(named:create:)`` the creation belongs to this transaction: it is undone if
    /// the transaction aborts, and the handle is shared with the process's other transactions only
    /// once it commits. For restores that must leave nothing behind when they fail.
    package func rawDatabase(named name: String, create: Bool) throws -> RawDatabase? {
        try checkActive()
        guard !name.isEmpty, !name.utf8.contains(0), name.utf8.count <= Store.maxKeySize else {
            throw KVStoreError.invalidName(name, reason: "an LMDB database name is 1 to \(Store.maxKeySize) bytes without NUL")
        }
        guard let handle = try store.environment.database(named: name, create: create, inWrite: pointer) else { return nil }
        openedDatabases[name] = handle
        return RawDatabase(name: name, handle: handle)
    }

    /// Stores `value` at `key` in `database`, bypassing every collection: no codec, no index, no
    /// derived collection. With a `target`, the put is recorded in ``mutations`` as a change of that
    /// collection or suite, so write observers (history) see it; without one it is not.
    package func rawPut(_ database: RawDatabase, _ key: [UInt8], _ value: [UInt8], recordingAs target: Mutation.Target? = nil) throws {
        guard !key.isEmpty, key.count <= Store.maxKeySize else {
            throw KVStoreError.invalidKey(collection: database.name, reason: "a key is 1 to \(Store.maxKeySize) bytes, not \(key.count)")
        }
        try put(database.handle, key, value)
        if let target { record(Mutation(target: target, key: key, operation: .put)) }
    }

    /// Deletes `key` from `database`; returns whether it existed. Recorded as ``rawPut(_:_:_:recordingAs:)``.
    @discardableResult
    package func rawDelete(_ database: RawDatabase, _ key: [UInt8], recordingAs target: Mutation.Target? = nil) throws -> Bool {
        let existed = try delete(database.handle, key)
        if existed, let target { record(Mutation(target: target, key: key, operation: .delete)) }
        return existed
    }

    /// Removes every entry of `database` (the database itself stays). Nothing is recorded.
    package func rawClear(_ database: RawDatabase) throws {
        try drop(database.handle, delete: false)
    }
}
