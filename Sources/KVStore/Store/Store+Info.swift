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
        try environment.figures()
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
