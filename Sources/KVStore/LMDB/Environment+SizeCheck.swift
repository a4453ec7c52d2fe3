internal import CLMDB
#if canImport(Glibc)
import Glibc
#endif

extension Environment {
    /// Refuses a data file that LMDB would fault on: one where a page the newest transaction reaches
    /// is past the end of the file (another process truncated it, a disk filled up, a copy was cut
    /// short), which LMDB maps and faults on (`SIGBUS`) at the first read of it.
    ///
    /// A file at least as long as the newest meta page's last page says (`(mm_last_pg + 1) × page
    /// size`) is the usual case and costs one `fstat`. A shorter one is not necessarily truncated: LMDB
    /// commits transactions whose last pages were freed before they were ever written (see
    /// ``ReachablePages``), and opens them. For such a file the pages the newest transaction reaches
    /// are walked (read with `pread`, never through the map), with a read transaction held meanwhile:
    /// while it is, no writer reuses a page that any transaction from it on reaches, so the walk reads
    /// the pages of a state that stays whole even while other processes commit. The walk is refused
    /// only if the meta page it started from still holds the same bytes afterwards (else it runs
    /// again from the newer one, up to four times), so a read that overlapped a commit cannot refuse a
    /// healthy store.
    ///
    /// The walk reads every page the transaction reaches, one `pread` each (measured on the shared
    /// 2-core machine: 9,432 pages of a 37 MiB store, 9.5 ms of system calls under `strace`), and
    /// LMDB reuses the lowest free pages first, so a file can stay short for many commits. A
    /// read-write open that found nothing missing therefore extends the file to the recorded size
    /// (`fallocate`, which never shrinks a file and never overwrites what a writer wrote meanwhile;
    /// the pages it adds are free, so nothing reads them before a writer writes them), and later opens
    /// cost one `fstat` again. It does so only for a gap no larger than the file or 64 MiB: a last page
    /// recorded far past the end (by a co-tenant, say) must not make every writer allocate up to the
    /// map size.
    static func checkSize(_ handle: OpaquePointer, _ files: EnvironmentFiles, metaPages: MetaPages?, pageSize: Int,
                          directory: String, configuration: Configuration) throws {
        guard let metaPages else { return }
        // The recorded size before the file's: every page of that transaction was written before it
        // committed, so a file at least that long holds them all.
        let recorded = metaPages.recordedDataSize
        if try dataFileSize(files) >= recorded { return }
        // LMDB writes pages of 512 bytes to 64 KiB (a power of two); it opens whatever the meta page
        // says, but a walk must not allocate a page of whatever size a co-tenant planted.
        guard (512...65_536).contains(pageSize), pageSize & (pageSize - 1) == 0 else { throw LMDBError.corrupted }
        let transaction = try beginPinningRead(handle, metaPages: metaPages, directory: directory, configuration: configuration)
        defer { mdb_txn_abort(transaction) }
        var refusal: KVStoreError?
        for _ in 0..<4 {
            guard let meta = ReachablePages.newestMeta(files.dataFD, pageSize: pageSize) else { return }
            let size = try dataFileSize(files)
            let filePages = UInt64(size / pageSize)
            if filePages > meta.lastPage { return }
            let outcome = ReachablePages.walk(files.dataFD, pageSize: pageSize, filePages: filePages, meta: meta)
            guard let missing = outcome.firstMissing else {
                if !configuration.readOnly && !configuration.immutableFile {
                    extendToRecordedSize(files.dataFD, size: size, lastPage: meta.lastPage, pageSize: pageSize)
                }
                return
            }
            refusal = KVStoreError.truncatedStore(path: files.dataPath, size: size, missingPage: Int(clamping: missing), pageSize: pageSize)
            if ReachablePages.newestMeta(files.dataFD, pageSize: pageSize) == meta { break }
        }
        if let refusal { throw refusal }
    }

    /// `fallocate` up to page `lastPage` inclusive, best effort: a file system without it, a full disk
    /// or a gap over the bound leaves the walk to the next open.
    private static func extendToRecordedSize(_ fd: Int32, size: Int, lastPage: UInt64, pageSize: Int) {
        let (pages, overflow) = lastPage.addingReportingOverflow(1)
        guard !overflow, pages <= UInt64(Int.max / pageSize) else { return }
        let gap = Int(pages) * pageSize - size
        guard gap > 0, gap <= max(size, 64 << 20) else { return }
        _ = SystemCall.retry { fallocate(fd, 0, off_t(size), off_t(gap)) }
    }

    private static func dataFileSize(_ files: EnvironmentFiles) throws -> Int {
        Int(try FilePolicy.status(files.dataFD, path: files.dataPath).st_size)
    }

    /// A read transaction on the environment being opened, held while the walk reads pages. Another
    /// process may have grown the map since the open (`MDB_MAP_RESIZED`: the recorded size is adopted
    /// as at open, up to ``Configuration/maxMapSize``), or taken every reader slot (`MDB_READERS_FULL`:
    /// the slots of dead processes are cleared and it is tried once more).
    private static func beginPinningRead(_ handle: OpaquePointer, metaPages: MetaPages, directory: String,
                                         configuration: Configuration) throws -> OpaquePointer {
        var clearedReaders = false
        for _ in 0..<8 {
            var transaction: OpaquePointer?
            let rc = mdb_txn_begin(handle, nil, UInt32(MDB_RDONLY), &transaction)
            if rc == MDB_SUCCESS, let transaction { return transaction }
            if rc == MDB_MAP_RESIZED && !configuration.immutableFile {
                try adoptRecordedMapSize(handle, metaPages: metaPages, directory: directory, limit: configuration.maxMapSize)
                continue
            }
            if rc == MDB_READERS_FULL && !clearedReaders {
                clearedReaders = true
                var dead: Int32 = 0
                try LMDBError.check(mdb_reader_check(handle, &dead))
                continue
            }
            throw LMDBError(rawValue: rc)
        }
        throw LMDBError.mapResized
    }
}
