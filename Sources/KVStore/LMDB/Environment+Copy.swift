internal import CLMDB
#if canImport(Glibc)
import Glibc
#endif

extension Environment {
    /// What a compacted copy wrote.
    struct CopyCounts {
        var databases = 0
        var entries = 0
    }

    /// The names of the named databases visible in `transaction`, in key order. They are the keys of
    /// the main database (`MAIN_DBI`), whose handle needs no opening (`mdb_dbi_open` with a NULL name).
    static func databaseNames(in transaction: OpaquePointer) throws -> [String] {
        var main = MDB_dbi()
        try LMDBError.check(mdb_dbi_open(transaction, nil, 0, &main))
        var names: [String] = []
        try ByteRange.all.scan(transaction, DatabaseHandle(dbi: main), reverse: false) { key, _ in
            guard let name = String(validating: key, as: UTF8.self), !name.utf8.contains(0) else {
                throw LMDBError.incompatible  // not a name KVStore (or mdb_dbi_open) could have made
            }
            names.append(name)
            return true
        }
        return names
    }

    /// Writes every named database as `transaction` (a read transaction of this environment) sees it
    /// into a new single-file environment at `path`, compacted: entries go in key order with
    /// `MDB_APPEND`, so pages are filled and no free pages are carried over.
    ///
    /// `path` must be the empty file open at `descriptor` (created by the caller with `O_EXCL`);
    /// LMDB opens it by path, and the copy refuses to write unless LMDB's descriptor is that very file.
    /// It is built with `MDB_NOLOCK` (nobody else writes it) and `MDB_NOSYNC`, then flushed once with
    /// `mdb_env_sync(force)`.
    ///
    /// Every database must be open in this process when `transaction` began: an unopened one throws
    /// ``KVStoreError/databaseOpenedInsideTransaction(_:)`` before anything is written, and
    /// ``Store/read(_:)`` opens it and runs again.
    func writeCompactedCopy(of transaction: OpaquePointer, to path: String, descriptor: Int32,
                            progress: ((Int) -> Void)? = nil) throws -> CopyCounts {
        // Resolve every handle first, so that a retry never finds a half-written file.
        var sources: [(name: String, dbi: MDB_dbi, flags: UInt32)] = []
        for name in try Self.databaseNames(in: transaction) {
            guard let dbi = try database(named: name, in: transaction)?.dbi else { continue }
            var flags: UInt32 = 0
            try LMDBError.check(mdb_dbi_flags(transaction, dbi, &flags))
            sources.append((name, dbi, flags))
        }

        var before = Glibc.stat()
        guard fstat(descriptor, &before) == 0 else {
            throw KVStoreError.io(operation: "stat copy file", path: path, errno: errno)
        }
        guard before.st_size == 0 else {
            throw KVStoreError.invalidPath(path, reason: "the copy must go to a new, empty file")
        }

        var envPointer: OpaquePointer?
        try LMDBError.check(mdb_env_create(&envPointer))
        guard let target = envPointer else { throw LMDBError.invalid }
        defer { mdb_env_close(target) }

        let pageSize = max(Int(try self.stat().ms_psize), 4096)
        let used = (info().me_last_pgno + 1) * pageSize
        var mapSize = (used + used / 4 + (1 << 20) + pageSize - 1) / pageSize * pageSize
        try LMDBError.check(mdb_env_set_maxdbs(target, MDB_dbi(sources.count + 1)))
        try LMDBError.check(mdb_env_set_mapsize(target, mapSize))
        // LMDB opens files by path, with O_CREAT. Through /proc/self/fd it opens the very file the caller
        // holds, so a directory on the way swapped for a symbolic link meanwhile cannot make LMDB create
        // and write a file elsewhere. (Without /proc, the path, and the check below refuses a swap.)
        let procPath = "/proc/self/fd/\(descriptor)"
        let openPath = access(procPath, F_OK) == 0 ? procPath : path
        try LMDBError.check(mdb_env_open(target, openPath, UInt32(MDB_NOSUBDIR | MDB_NOLOCK | MDB_NOSYNC), 0o600))

        // LMDB opened the file by path: make sure it is the one the caller created.
        var targetFD: Int32 = -1
        try LMDBError.check(mdb_env_get_fd(target, &targetFD))
        var opened = Glibc.stat()
        guard fstat(targetFD, &opened) == 0 else {
            throw KVStoreError.io(operation: "stat copy file", path: path, errno: errno)
        }
        guard opened.st_dev == before.st_dev && opened.st_ino == before.st_ino else {
            throw KVStoreError.invalidPath(path, reason: "the copy file was replaced while it was being opened")
        }

        while true {
            do {
                let counts = try copyDatabases(sources, from: transaction, into: target, progress: progress)
                try LMDBError.check(mdb_env_sync(target, 1))
                return counts
            } catch LMDBError.mapFull {
                // The copy is never larger than the pages in use here, plus branch pages; if it is,
                // grow the target's map (no transaction of it is active now) and start again.
                mapSize *= 2
                try LMDBError.check(mdb_env_set_mapsize(target, mapSize))
            }
        }
    }

    /// One write transaction of the target that receives every database; aborted if anything throws.
    private func copyDatabases(
        _ sources: [(name: String, dbi: MDB_dbi, flags: UInt32)],
        from transaction: OpaquePointer, into target: OpaquePointer, progress: ((Int) -> Void)?
    ) throws -> CopyCounts {
        var txnPointer: OpaquePointer?
        try LMDBError.check(mdb_txn_begin(target, nil, 0, &txnPointer))
        guard let write = txnPointer else { throw LMDBError.invalid }
        var counts = CopyCounts()
        do {
            // The flags that describe a database's layout (MDB_DUPSORT, MDB_INTEGERKEY, …).
            let persistent = UInt32(MDB_REVERSEKEY | MDB_DUPSORT | MDB_INTEGERKEY | MDB_DUPFIXED
                                    | MDB_INTEGERDUP | MDB_REVERSEDUP)
            for source in sources {
                var dbi = MDB_dbi()
                try LMDBError.check(mdb_dbi_open(write, source.name, UInt32(MDB_CREATE) | (source.flags & persistent), &dbi))
                let base = counts.entries
                counts.entries += try copyEntries(of: source.dbi, from: transaction, to: dbi, in: write,
                                                  duplicates: source.flags & UInt32(MDB_DUPSORT) != 0) { progress?(base + $0) }
                counts.databases += 1
            }
        } catch {
            mdb_txn_abort(write)
            throw error
        }
        try LMDBError.check(mdb_txn_commit(write))
        return counts
    }

    /// Appends every entry of `source` to the empty `target`, in the source's order.
    private func copyEntries(
        of source: MDB_dbi, from transaction: OpaquePointer, to target: MDB_dbi, in write: OpaquePointer,
        duplicates: Bool, progress: (Int) -> Void
    ) throws -> Int {
        let reader = try Cursor(transaction: transaction, database: DatabaseHandle(dbi: source))
        let writer = try Cursor(transaction: write, database: DatabaseHandle(dbi: target))
        var count = 0
        var entry = try reader.first()
        var previousKey: UnsafeRawBufferPointer?
        while let (key, value) = entry {
            var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
            var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
            // In a MDB_DUPSORT database the second and later values of a key are appended as duplicates.
            let sameKey = duplicates && previousKey.map { compareBytes($0, key) == 0 } == true
            try LMDBError.check(mdb_cursor_put(writer.pointer, &k, &v, UInt32(sameKey ? MDB_APPENDDUP : MDB_APPEND)))
            count += 1
            if count % 4_096 == 0 { progress(count) }
            previousKey = key
            entry = try reader.next()
        }
        return count
    }
}

/// Compares two stored byte strings as LMDB's default comparator does.
private func compareBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
    let n = min(a.count, b.count)
    if n > 0, let pa = a.baseAddress, let pb = b.baseAddress {
        let c = memcmp(pa, pb, n)
        if c != 0 { return Int(c) }
    }
    return a.count - b.count
}
