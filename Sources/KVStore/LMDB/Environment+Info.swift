internal import CLMDB

extension Environment {
    /// LMDB's figures for this environment (`mdb_env_info`, `mdb_env_stat` and the free list).
    func figures() throws -> EnvironmentInfo {
        // One read transaction, so the free list and the figures describe the same committed state.
        try withReadTransaction { transaction in
            let info = self.info()
            let stat = try self.stat()
            return EnvironmentInfo(
                mapSize: info.me_mapsize, pageSize: Int(stat.ms_psize), usedPages: info.me_last_pgno + 1,
                lastTransactionID: Int(mdb_txn_id(transaction)), maxReaders: Int(info.me_maxreaders),
                readersUsed: Int(info.me_numreaders), freePages: try Self.freePages(in: transaction))
        }
    }

    /// Sums LMDB's free list (`FREE_DBI`, database 0): each record is an ID list whose first word is
    /// its length, as `mdb_stat -f` reads it.
    private static func freePages(in transaction: OpaquePointer) throws -> Int {
        var cursor: OpaquePointer?
        try LMDBError.check(mdb_cursor_open(transaction, 0, &cursor))
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val(), value = MDB_val()
        var pages = 0
        var rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
        while rc == MDB_SUCCESS {
            if value.mv_size >= MemoryLayout<Int>.size, let data = value.mv_data {
                pages += data.loadUnaligned(as: Int.self)
            }
            rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
        }
        guard rc == MDB_NOTFOUND else { try LMDBError.check(rc); return pages }
        return pages
    }
}

