internal import CLMDB

extension Environment {
    /// `mdb_env_get_flags`: LMDB's raw flag bits for this process's handle of the environment.
    func flags() throws -> UInt32 {
        var flags: UInt32 = 0
        try LMDBError.check(mdb_env_get_flags(handle, &flags))
        return flags
    }
}
