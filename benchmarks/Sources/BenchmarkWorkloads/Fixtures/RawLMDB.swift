import CLMDB
import KVStore
import Workloads

/// The floor: plain C LMDB, no KVStore. An environment with its named databases and one read
/// transaction kept reset between reads (`mdb_txn_renew` / `mdb_txn_reset`, as KVStore does with its
/// read transactions). Every `mdb_*` return code goes through ``check(_:)``.
final class RawLMDB: @unchecked Sendable {
    let env: OpaquePointer
    private var databases: [String: MDB_dbi] = [:]
    private let readTransaction: OpaquePointer

    /// A new environment in a new directory, with `names` created.
    init(_ name: String, databases names: [String], flags: UInt32 = 0) throws {
        let directory = try Dataset.temporaryDirectory(name)
        var env: OpaquePointer?
        try Self.check(mdb_env_create(&env))
        guard let env else { throw LMDBError(rawValue: MDB_PANIC) }
        self.env = env
        try Self.check(mdb_env_set_maxdbs(env, 8))
        try Self.check(mdb_env_set_mapsize(env, 64 << 20))
        try Self.check(mdb_env_open(env, directory, UInt32(MDB_NOTLS) | flags, 0o600))
        var write: OpaquePointer?
        try Self.check(mdb_txn_begin(env, nil, 0, &write))
        for name in names {
            var dbi = MDB_dbi()
            try Self.check(mdb_dbi_open(write, name, UInt32(MDB_CREATE), &dbi))
            databases[name] = dbi
        }
        try Self.check(mdb_txn_commit(write))
        var read: OpaquePointer?
        try Self.check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &read))
        guard let read else { throw LMDBError(rawValue: MDB_PANIC) }
        mdb_txn_reset(read)
        readTransaction = read
    }

    static func check(_ rc: Int32) throws { if rc != MDB_SUCCESS { throw LMDBError(rawValue: rc) } }

    func database(_ name: String) -> MDB_dbi { databases[name]! }

    /// Runs `body` in one committed write transaction (aborted if `body` throws).
    func write(_ body: (OpaquePointer) throws -> Void) throws {
        var write: OpaquePointer?
        try Self.check(mdb_txn_begin(env, nil, 0, &write))
        guard let write else { throw LMDBError(rawValue: MDB_PANIC) }
        do {
            try body(write)
        } catch {
            mdb_txn_abort(write)
            throw error
        }
        try Self.check(mdb_txn_commit(write))
    }

    /// Runs `body` in the renewed read transaction, reset afterwards.
    func read<R>(_ body: (OpaquePointer) throws -> R) throws -> R {
        try Self.check(mdb_txn_renew(readTransaction))
        defer { mdb_txn_reset(readTransaction) }
        return try body(readTransaction)
    }

    /// `mdb_put` of `key` → `value` in `transaction`.
    static func put(_ transaction: OpaquePointer, _ dbi: MDB_dbi, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
        try check(mdb_put(transaction, dbi, &k, &v, 0))
    }

    /// The bytes at `key` (valid until the transaction ends), or `nil`.
    static func get(_ transaction: OpaquePointer, _ dbi: MDB_dbi, _ key: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val()
        let rc = mdb_get(transaction, dbi, &k, &v)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc)
        return UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)
    }
}
