import CLMDB

/// LMDB's figures for an environment (`mdb_env_info` and `mdb_env_stat`).
public struct EnvironmentInfo: Sendable, Hashable, Codable {
    /// The map size this process uses, in bytes.
    public var mapSize: Int
    /// The database page size in bytes.
    public var pageSize: Int
    /// Pages in use: the last page number + 1.
    public var usedPages: Int
    /// The ID of the last committed transaction.
    public var lastTransactionID: Int
    /// Reader slots in the table.
    public var maxReaders: Int
    /// Reader slots ever used (a high-water mark, as LMDB reports it).
    public var readersUsed: Int
    /// Pages on LMDB's free list, which new writes reuse before the file grows (`mdb_stat -f`'s
    /// "Free pages"), as the last committed transaction left it.
    public var freePages: Int
}

extension Store {
    /// LMDB's figures for this store.
    public func environmentInfo() throws -> EnvironmentInfo {
        // One read transaction, so the free list and the figures describe the same committed state.
        try environment.withReadTransaction { transaction in
            let info = environment.info()
            let stat = try environment.stat()
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

extension Store {
    /// The map size `mdb_dump` prints for this store, which is what a fresh open of the environment
    /// adopts: the larger of the size recorded in the newest meta page and the space the data already
    /// takes. Read from the meta pages this process mapped from the data file it checked at open (never
    /// from the path again). `nil` for a snapshot file.
    package var recordedMapSize: Int? {
        environment.metaPages.map { max($0.recordedMapSize, $0.recordedDataSize) }
    }
}
