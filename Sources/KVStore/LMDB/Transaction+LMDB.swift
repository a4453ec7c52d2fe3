internal import CLMDB

// The LMDB calls of transactions: the only place outside `LMDB/` that reads or writes bytes is here,
// in `LMDB/`. Collections, defaults and the catalog call these with a ``DatabaseHandle``.

extension ReadTransaction {
    /// LMDB's transaction ID: for a read, the ID of the last committed write it sees; for a write,
    /// the ID this write will commit as. The corresponding LMDB call is `mdb_txn_id`.
    public var transactionID: Int { Int(mdb_txn_id(pointer)) }

    /// The stored bytes at `key`, or `nil`. Valid only inside the transaction.
    func get(_ database: DatabaseHandle, _ key: [UInt8]) throws -> UnsafeRawBufferPointer? {
        try key.withUnsafeBytes { try get(database, key: $0) }
    }

    /// The stored bytes at the key in `key`'s bytes, or `nil`. Valid only inside the transaction.
    func get(_ database: DatabaseHandle, key buffer: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        try checkActive()
        var k = MDB_val(mv_size: buffer.count, mv_data: UnsafeMutableRawPointer(mutating: buffer.baseAddress))
        var v = MDB_val()
        let rc = mdb_get(pointer, database.dbi, &k, &v)
        if rc == MDB_NOTFOUND { return nil }
        try LMDBError.check(rc)
        return v.buffer
    }

    /// The number of entries in a named database (`mdb_stat`).
    func count(_ database: DatabaseHandle) throws -> Int {
        try checkActive()
        var stat = MDB_stat()
        try LMDBError.check(mdb_stat(pointer, database.dbi, &stat))
        return stat.ms_entries
    }

    func stat(_ database: DatabaseHandle) throws -> MDB_stat {
        try checkActive()
        var stat = MDB_stat()
        try LMDBError.check(mdb_stat(pointer, database.dbi, &stat))
        return stat
    }

    func scan(
        _ database: DatabaseHandle, _ range: ByteRange, reverse: Bool,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        try checkActive()
        try range.scan(pointer, database, reverse: reverse, body)
    }

    /// The database's `mdb_dbi_open` flags.
    func flags(_ database: DatabaseHandle) throws -> UInt32 {
        try checkActive()
        var flags: UInt32 = 0
        try LMDBError.check(mdb_dbi_flags(pointer, database.dbi, &flags))
        return flags
    }
}

extension WriteTransaction {
    func put(_ database: DatabaseHandle, _ key: [UInt8], _ value: [UInt8]) throws {
        try checkActive()
        try key.withUnsafeBytes { k in
            try value.withUnsafeBytes { v in
                var mk = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                var mv = MDB_val(mv_size: v.count, mv_data: UnsafeMutableRawPointer(mutating: v.baseAddress))
                try checkWrite(mdb_put(pointer, database.dbi, &mk, &mv, 0))
            }
        }
    }

    /// Puts `key` after every key of `database` (`MDB_APPEND`: the last leaf is filled, not split
    /// in half, and the key is not looked for); returns `false`, having written nothing, if `key` is
    /// not greater than the database's last key.
    func append(_ database: DatabaseHandle, _ key: [UInt8], _ value: [UInt8]) throws -> Bool {
        try checkActive()
        return try key.withUnsafeBytes { k in
            try value.withUnsafeBytes { v in
                var mk = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                var mv = MDB_val(mv_size: v.count, mv_data: UnsafeMutableRawPointer(mutating: v.baseAddress))
                let rc = mdb_put(pointer, database.dbi, &mk, &mv, UInt32(MDB_APPEND))
                if rc == MDB_KEYEXIST { return false }
                try checkWrite(rc)
                return true
            }
        }
    }

    /// Deletes `key`; returns whether it existed.
    @discardableResult
    func delete(_ database: DatabaseHandle, _ key: [UInt8]) throws -> Bool {
        try checkActive()
        return try key.withUnsafeBytes { k in
            var mk = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
            let rc = mdb_del(pointer, database.dbi, &mk, nil)
            if rc == MDB_NOTFOUND { return false }
            try checkWrite(rc)
            return true
        }
    }

    /// Empties a named database (`mdb_drop` with `del = 0`), or deletes it (`del = 1`).
    func drop(_ database: DatabaseHandle, delete: Bool) throws {
        try checkActive()
        try checkWrite(mdb_drop(pointer, database.dbi, delete ? 1 : 0))
    }

    fileprivate func checkWrite(_ rc: Int32) throws {
        if rc == MDB_MAP_FULL { store.environment.writeHitMapFull = true }
        try LMDBError.check(rc)
    }
}
