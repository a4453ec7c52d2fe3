import CLMDB

extension Store {
    /// The flags LMDB reports for this store's environment (`mdb_env_get_flags`): `MDB_NOMETASYNC`,
    /// `MDB_NOSYNC`, `MDB_RDONLY`, `MDB_NOTLS`… as LMDB's raw bit set. Read-only; for tests and tools
    /// that check a ``Durability`` really reached LMDB. The flags are per process: another process
    /// opening the same environment has its own.
    package var environmentFlags: UInt32 {
        get throws {
            var flags: UInt32 = 0
            try LMDBError.check(mdb_env_get_flags(environment.handle, &flags))
            return flags
        }
    }
}
