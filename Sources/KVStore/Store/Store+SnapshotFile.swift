#if canImport(Glibc)
import Glibc
#endif

extension Store {
    /// Opens an immutable single-file copy of a store (a snapshot written by
    /// ``copy(toNewFile:fileMode:)``) for reading, through the same typed API as a live store.
    ///
    /// ```swift
    /// let snapshot = try Store(snapshotFile: container.snapshotsDirectory + "/snapshot-000007.mdb")
    /// let records = try snapshot.collection("dailyRecords", key: LogicalDay.self, value: DailyRecord.self)
    /// let today = try records.get(LogicalDay(year: 2026, month: 11, day: 21)!)
    /// ```
    ///
    /// The file is opened with `MDB_RDONLY|MDB_NOSUBDIR|MDB_NOLOCK`: no lock file is created or
    /// needed, so a process that may only read the file (a widget) can open it, and nothing of the
    /// live store is touched. This is safe only because nobody writes the file any more; never open
    /// a file that another process may still be writing this way.
    ///
    /// Every write throws ``KVStoreError/readOnly(path:)``. Collections that the snapshot does not
    /// contain open as empty. Lifetime and threads: as for any ``Store``; a process opens one
    /// environment per file, so opening the same file twice returns handles on the same one. The
    /// mapping stays valid if the file is deleted (pruned) while open.
    ///
    /// - Throws: ``KVStoreError/io(operation:path:errno:)`` if the file does not exist or cannot be
    ///   resolved; ``LMDBError`` if LMDB refuses it (``LMDBError/invalid`` for a file that is not an
    ///   LMDB file, ``LMDBError/accessDenied`` when it is unreadable).
    public convenience init(snapshotFile path: String) throws {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw KVStoreError.io(operation: "open snapshot file", path: path, errno: errno)
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw KVStoreError.invalidPath(path, reason: "a snapshot is a regular file")
        }
        var options = Options()
        options.readOnly = true
        options.immutableFile = true
        try self.init(directory: path, options: options)
    }

    /// Whether this store is an immutable snapshot file opened with ``init(snapshotFile:)``.
    public var isSnapshotFile: Bool { environment.configuration.immutableFile }
}
