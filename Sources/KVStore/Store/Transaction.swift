import CLMDB

/// A read-only view of the store at one point in time: every read through it sees the same committed
/// state, whatever other threads and processes commit meanwhile.
///
/// You get one from ``Store/read(_:)``. It is valid only during the execution of that closure: do
/// not keep it, and do not use it from another thread. Bytes handed to you by `withValueBytes`
/// methods are valid only until the closure that received them returns.
public class ReadTransaction {
    let pointer: OpaquePointer
    /// The store this transaction belongs to.
    public unowned let store: Store
    private(set) var isActive = true
    /// Collects what this transaction reads, while ``trackingReads(_:)`` runs.
    var readTracker: ReadTracker?

    init(pointer: OpaquePointer, store: Store) {
        self.pointer = pointer
        self.store = store
    }

    func end() { isActive = false }

    @inline(__always)
    func checkActive() throws {
        if !isActive { throw KVStoreError.transactionEnded }
    }

    /// LMDB's transaction ID: for a read, the ID of the last committed write it sees; for a write,
    /// the ID this write will commit as. The corresponding LMDB call is `mdb_txn_id`.
    public var transactionID: Int { Int(mdb_txn_id(pointer)) }

    /// The stored bytes at `key`, or `nil`. Valid only inside the transaction.
    func get(_ database: MDB_dbi, _ key: [UInt8]) throws -> UnsafeRawBufferPointer? {
        try checkActive()
        return try key.withUnsafeBytes { buffer in
            var k = MDB_val(mv_size: buffer.count, mv_data: UnsafeMutableRawPointer(mutating: buffer.baseAddress))
            var v = MDB_val()
            let rc = mdb_get(pointer, database, &k, &v)
            if rc == MDB_NOTFOUND { return nil }
            try LMDBError.check(rc)
            return v.buffer
        }
    }

    /// The number of entries in a named database (`mdb_stat`).
    func count(_ database: MDB_dbi) throws -> Int {
        try checkActive()
        var stat = MDB_stat()
        try LMDBError.check(mdb_stat(pointer, database, &stat))
        return stat.ms_entries
    }

    func stat(_ database: MDB_dbi) throws -> MDB_stat {
        try checkActive()
        var stat = MDB_stat()
        try LMDBError.check(mdb_stat(pointer, database, &stat))
        return stat
    }

    func scan(
        _ database: MDB_dbi, _ range: ByteRange, reverse: Bool,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        try checkActive()
        try range.scan(pointer, database, reverse: reverse, body)
    }
}

/// A read-write transaction: everything done through it commits together when the closure given to
/// ``Store/write(author:_:)`` returns, or not at all if it throws.
///
/// Valid only during the execution of that closure. The closure may run more than once (when the map
/// has to grow, the transaction is aborted and run again), so keep its side effects inside the
/// transaction.
public final class WriteTransaction: ReadTransaction {
    /// Who is writing (`"app"`, `"extension"`, `"widget"`, `"kvtool"`…), as given to
    /// ``Store/write(author:_:)``. History records it.
    public let author: String?
    /// The puts and deletes made so far through collections and defaults suites, in order. Write
    /// observers read it in ``WriteObserver/transactionWillCommit(_:)``.
    public private(set) var mutations: [Mutation] = []
    /// Observer requirements already looked up in this transaction (see
    /// ``Store/observerRequirement(for:in:)``).
    var observerRequirements: [Mutation.Target: String?] = [:]
    /// Databases opened or created in this transaction: shared with the process once it commits.
    var openedDatabases: [String: MDB_dbi] = [:]
    private var recording = true

    init(pointer: OpaquePointer, store: Store, author: String?) {
        self.author = author
        super.init(pointer: pointer, store: store)
    }

    /// Runs `body` without adding its writes to ``mutations``: for bookkeeping that observers write
    /// (history entries, for instance), which must not be observed as changes themselves.
    public func unrecorded<R>(_ body: () throws -> R) rethrows -> R {
        let saved = recording
        recording = false
        defer { recording = saved }
        return try body()
    }

    func record(_ mutation: Mutation) {
        if recording { mutations.append(mutation) }
    }

    func put(_ database: MDB_dbi, _ key: [UInt8], _ value: [UInt8]) throws {
        try checkActive()
        try key.withUnsafeBytes { k in
            try value.withUnsafeBytes { v in
                var mk = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                var mv = MDB_val(mv_size: v.count, mv_data: UnsafeMutableRawPointer(mutating: v.baseAddress))
                try checkWrite(mdb_put(pointer, database, &mk, &mv, 0))
            }
        }
    }

    /// Deletes `key`; returns whether it existed.
    @discardableResult
    func delete(_ database: MDB_dbi, _ key: [UInt8]) throws -> Bool {
        try checkActive()
        return try key.withUnsafeBytes { k in
            var mk = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
            let rc = mdb_del(pointer, database, &mk, nil)
            if rc == MDB_NOTFOUND { return false }
            try checkWrite(rc)
            return true
        }
    }

    /// Empties a named database (`mdb_drop` with `del = 0`), or deletes it (`del = 1`).
    func drop(_ database: MDB_dbi, delete: Bool) throws {
        try checkActive()
        try checkWrite(mdb_drop(pointer, database, delete ? 1 : 0))
    }

    private func checkWrite(_ rc: Int32) throws {
        if rc == MDB_MAP_FULL { store.environment.writeHitMapFull = true }
        try LMDBError.check(rc)
    }
}

/// One put or delete made in a write transaction.
public struct Mutation: Hashable, Sendable {
    public enum Operation: String, Hashable, Sendable, Codable {
        case put, delete
    }

    /// Where the mutation happened.
    public enum Target: Hashable, Sendable, CustomStringConvertible {
        /// A collection, by name.
        case collection(String)
        /// A ``SharedDefaults`` suite, by name.
        case defaults(String)

        /// The collection or suite name.
        public var name: String {
            switch self {
            case .collection(let name), .defaults(let name): name
            }
        }

        /// `collection 'name'` or `defaults suite 'name'`.
        public var description: String {
            switch self {
            case .collection(let name): "collection '\(name)'"
            case .defaults(let name): "defaults suite '\(name)'"
            }
        }
    }

    public var target: Target
    /// The stored key bytes (decode them with the collection's key type, or render them with its
    /// ``KeyEncoding``; for defaults suites they are the UTF-8 key).
    public var key: [UInt8]
    public var operation: Operation

    public init(target: Target, key: [UInt8], operation: Operation) {
        self.target = target
        self.key = key
        self.operation = operation
    }
}

/// What a committed write transaction changed, as handed to ``WriteObserver/transactionDidCommit(_:)``.
public struct CommittedTransaction: Sendable {
    public var transactionID: Int
    public var author: String?
    public var mutations: [Mutation]
}

/// A hook in the store's write path. SyncKit's history is built on it.
///
/// ``transactionWillCommit(_:)`` runs inside the transaction, after your closure returned and before
/// LMDB commits: it can write more (with ``WriteTransaction/unrecorded(_:)``), and throwing aborts the
/// whole transaction. ``transactionDidCommit(_:)`` runs after the commit succeeded, on the thread that
/// committed.
public protocol WriteObserver: AnyObject, Sendable {
    /// The kind of hook this is (`"history"`, say), matched against the requirements recorded with
    /// ``Store/requireObserver(kind:for:in:)``. `nil` (the default) for hooks nothing depends on.
    var observerKind: String? { get }
    func transactionWillCommit(_ transaction: WriteTransaction) throws
    func transactionDidCommit(_ commit: CommittedTransaction)
}

extension WriteObserver {
    public var observerKind: String? { nil }
    public func transactionWillCommit(_ transaction: WriteTransaction) throws {}
    public func transactionDidCommit(_ commit: CommittedTransaction) {}
}
