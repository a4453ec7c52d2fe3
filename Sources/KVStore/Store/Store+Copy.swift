#if canImport(Glibc)
import Glibc
#endif

extension Store {
    /// What a compacted copy of a store holds, and which state of the store it is.
    public struct CopyResult: Hashable, Sendable, Codable {
        /// The `mdb_txn_id` of the read transaction the copy was taken from: the ID of the last write
        /// transaction committed before it. Copies taken later never have a smaller one.
        public var sourceTransactionID: Int
        /// How many named databases (collections, indexes, defaults suites, the catalog…) it holds.
        public var databases: Int
        /// How many entries it holds, over all databases.
        public var entries: Int
        /// The size of the copy file in bytes.
        public var size: Int
    }

    /// Writes a consistent, compacted copy of the whole store into a new single LMDB file, and says
    /// which committed state it is.
    ///
    /// ```swift
    /// let copy = try store.copy(toNewFile: "/tmp/backup.mdb")
    /// print(copy.sourceTransactionID, copy.size)
    /// let snapshot = try Store(copyFile: "/tmp/backup.mdb")
    /// ```
    ///
    /// The copy comes from one read transaction, so it is exactly one committed state, whatever other
    /// threads and processes commit meanwhile; they are never blocked. LMDB's own
    /// `mdb_env_copy2(…, MDB_CP_COMPACT)` cannot say which state it copied (it writes transaction
    /// ID 1 into the copy), so KVStore copies each named database itself, in key order with
    /// `MDB_APPEND`. The result opens with ``init(copyFile:)``.
    ///
    /// The file is created with `O_CREAT|O_EXCL|O_NOFOLLOW` (it must not exist), written, and
    /// flushed with `fsync`. If anything fails it is removed. To publish a copy atomically under a
    /// final name, create the file yourself and use ``copy(intoEmptyFile:at:)`` (SyncKit's snapshots
    /// do, through ``SharedFiles/publish(to:temporaryName:replacing:_:)``).
    ///
    /// Threads: call it from any thread, but not inside a transaction (it opens every named database
    /// before its read transaction begins, which LMDB allows only outside transactions).
    ///
    /// - Parameter fileMode: The permissions of the new file. Default `0600`.
    /// - Throws: ``KVStoreError/io(operation:path:errno:)`` if the file cannot be created (`EEXIST`
    ///   if it exists) or written; ``KVStoreError/databaseOpenedInsideTransaction(_:)`` when called
    ///   inside a transaction; ``LMDBError`` (`noSpace`…) if LMDB fails.
    @discardableResult
    public func copy(toNewFile path: String, fileMode: mode_t = 0o600) throws -> CopyResult {
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw KVStoreError.io(operation: "create copy file", path: path, errno: errno) }
        defer { Glibc.close(fd) }
        do {
            guard fchmod(fd, fileMode) == 0 else {
                throw KVStoreError.io(operation: "chmod", path: path, errno: errno)
            }
            let result = try copy(intoEmptyFile: fd, at: path)
            guard fsync(fd) == 0 else { throw KVStoreError.io(operation: "fsync", path: path, errno: errno) }
            return result
        } catch {
            unlink(path)
            throw error
        }
    }

    /// Writes a consistent, compacted copy of the whole store into the empty file open at
    /// `descriptor`, whose path is `path`. See ``copy(toNewFile:fileMode:)``.
    ///
    /// ```swift
    /// try files.publish(to: "backup.mdb", temporaryName: TemporaryFileName.make(for: "backup.mdb")) { fd, path in
    ///     try store.copy(intoEmptyFile: fd, at: path)
    /// }
    /// ```
    ///
    /// The file written is the one open at `descriptor`, which must be empty: LMDB opens files by
    /// path, so it is given `/proc/self/fd/<descriptor>`, which names that very file even if a
    /// directory on `path` was swapped for a symbolic link meanwhile (`path` serves in messages, and
    /// as LMDB's path where `/proc` is not mounted, in which case a file LMDB opened that is not the
    /// one at `descriptor`, same device and inode, is refused). The data is
    /// flushed (`mdb_env_sync`) before this returns; the descriptor stays open and is not `fsync`ed
    /// again. On failure the file may hold a partial copy: remove it.
    ///
    /// - Throws: ``KVStoreError/invalidPath(_:reason:)`` if the file is not empty or is not the one at
    ///   `descriptor`; otherwise as ``copy(toNewFile:fileMode:)``.
    ///
    /// - Parameter progress: called with the number of entries copied so far, about every 4,096.
    @discardableResult
    public func copy(intoEmptyFile descriptor: Int32, at path: String, progress: ((Int) -> Void)? = nil) throws -> CopyResult {
        // A transaction can use only the named databases open in this process when it began: open
        // them all first. One created after this is met inside the read, which then runs again.
        if ThreadState.isInTransaction {
            throw KVStoreError.databaseOpenedInsideTransaction("(every database, for a copy)")
        }
        for name in try environment.withReadTransaction(Environment.databaseNames(in:)) {
            _ = try environment.database(named: name, create: false)
        }
        let (counts, transactionID) = try read { transaction in
            (try environment.writeCompactedCopy(of: transaction.pointer, to: path, descriptor: descriptor, progress: progress),
             transaction.transactionID)
        }
        var info = Glibc.stat()
        guard fstat(descriptor, &info) == 0 else {
            throw KVStoreError.io(operation: "stat copy file", path: path, errno: errno)
        }
        return CopyResult(sourceTransactionID: transactionID, databases: counts.databases,
                          entries: counts.entries, size: Int(info.st_size))
    }
}
