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
}

extension Store {
    /// LMDB's figures for this store.
    public func environmentInfo() throws -> EnvironmentInfo {
        let info = environment.info()
        let stat = try environment.stat()
        return EnvironmentInfo(
            mapSize: info.me_mapsize, pageSize: Int(stat.ms_psize), usedPages: info.me_last_pgno + 1,
            lastTransactionID: info.me_last_txnid, maxReaders: Int(info.me_maxreaders),
            readersUsed: Int(info.me_numreaders))
    }
}
