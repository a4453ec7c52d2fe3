#if canImport(Glibc)
import Glibc
#endif

extension Store {
    /// Opens an immutable single-file copy of a store (written by ``copy(toNewFile:fileMode:)``, by
    /// `kvtool compact`, or published by SyncKit's `Snapshots`) for reading, through the same typed API
    /// as a live store.
    ///
    /// ```swift
    /// try container.store.copy(toNewFile: "/tmp/backup.mdb")
    /// let backup = try Store(copyFile: "/tmp/backup.mdb")
    /// let records = try backup.collection("dailyRecords", key: LogicalDay.self, value: DailyRecord.self)
    /// let today = try backup.read { try records.get(LogicalDay(year: 2026, month: 11, day: 21)!, in: $0) }
    /// ```
    ///
    /// In this package a *snapshot* is always one thing: a copy that SyncKit's `Snapshots` published
    /// (checksummed, listed in its manifest). KVStore itself only knows copies.
    ///
    /// The file is opened with `MDB_RDONLY|MDB_NOSUBDIR|MDB_NOLOCK`: no lock file is created or
    /// needed, so a process that may only read the file (a widget) can open it, and nothing of the
    /// live store is touched. This is safe only because nobody writes the file any more; never open
    /// a file that another process may still be writing this way.
    ///
    /// Every write throws ``KVStoreError/readOnly(path:)``. Collections that the copy does not
    /// contain open as empty. Lifetime and threads: as for any ``Store``; a process opens one
    /// environment per file, so opening the same file twice returns handles on the same one. The
    /// mapping stays valid if the file is deleted (pruned) while open.
    ///
    /// - Throws: ``KVStoreError/io(operation:path:errno:)`` if the file does not exist or cannot be
    ///   resolved; ``LMDBError`` if LMDB refuses it (``LMDBError/invalid`` for a file that is not an
    ///   LMDB file, ``LMDBError/accessDenied`` when it is unreadable).
    ///
    /// The file is opened once, with `O_NOFOLLOW` (a symbolic link at `path` is refused with
    /// ``KVStoreError/unsafeFile(path:reason:)``), and LMDB maps exactly that file.
    public convenience init(copyFile path: String) throws {
        try self.init(immutableFile: path, descriptor: nil)
    }

    /// Opens the immutable single-file copy already open at `descriptor` (borrowed; the store keeps its
    /// own), so that what a caller checked on that descriptor (a checksum) is what LMDB maps: there is
    /// no window in which another file can take the path's place. `path` names it in errors.
    package convenience init(copyDescriptor descriptor: Int32, path: String) throws {
        try self.init(immutableFile: path, descriptor: descriptor)
    }

    private convenience init(immutableFile path: String, descriptor: Int32?) throws {
        var options = Options()
        options.readOnly = true
        options.immutableFile = true
        try self.init(directory: path, descriptor: descriptor, options: options)
    }

    /// Whether this store is an immutable single-file copy opened with ``init(copyFile:)``.
    public var isCopyFile: Bool { environment.configuration.immutableFile }
}
