#if canImport(Glibc)
import Glibc
#endif

/// LMDB's two meta pages (the first two pages of `data.mdb`), mapped read-only, so that a read
/// transaction can check that the state it got is the transaction LMDB says it is.
///
/// Why: LMDB 0.9 begins a read transaction by reading the last committed transaction ID `N` from
/// the lock file, then copying the root pointers from meta page `N & 1`. A writer puts transaction
/// `N + 2` into that same page, and with durable commits the new meta page is in the page cache (and
/// so in every reader's map) while its synchronous write runs, before the lock file says `N + 2`. A
/// reader held up between those two steps therefore copies the roots of `N + 2` (or, in a far
/// smaller window, a page being rewritten) while it registers, and reports, `N`; its next
/// transactions then see `N + 1` again until the write finishes: a process sees the store go back
/// in time. The reliability suite's contention test caught it (12 reads in a row, under load).
///
/// The check, after `mdb_txn_begin`/`mdb_txn_renew` returned transaction `N`: meta page `N & 1` must
/// still say `N` (else it was rewritten by a newer commit: begin again, which reads a newer `N`); and
/// if the other page already holds a newer transaction, a rewrite of page `N & 1` may be under way, so
/// begin once more: if that gives `N` again, the lock file has not announced `N + 1` yet, so nothing
/// can be writing page `N & 1` and `N` is exact. Two loads from memory in the usual case.
///
/// Layout (LMDB's file format 1): a page starts with a 16-byte header, then `MDB_meta`, whose
/// `mm_magic` is at offset 0 and `mm_txnid` at offset 128. The layout is checked when mapping (the
/// magic, and two transaction IDs one apart or both 0); where it does not hold, there is no check.
///
/// `@unchecked Sendable`: no lock; `base` points into a read-only shared mapping that only LMDB writes
/// (from any process), read here with single aligned loads; nothing of the object itself changes.
final class MetaPages: @unchecked Sendable {
    private let base: UnsafeMutableRawPointer
    private let pageSize: Int

    static let magic: UInt32 = 0xBEEF_C0DE
    static let magicOffset = 16
    static let transactionIDOffset = 16 + 128

    /// Maps the meta pages of the data file open at `descriptor` (borrowed: it may be closed once this
    /// returns); `nil` if the file is shorter than two pages, cannot be mapped or does not have the
    /// expected layout.
    init?(descriptor fd: Int32, pageSize: Int) {
        guard pageSize >= 512 else { return nil }
        // Mapping past the end of the file would fault on first touch (SIGBUS), not fail here.
        var st = stat()
        guard fstat(fd, &st) == 0, Int(st.st_size) >= 2 * pageSize else { return nil }
        guard let map = mmap(nil, 2 * pageSize, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else { return nil }
        base = map
        self.pageSize = pageSize
        let (first, second) = (transactionID(inPage: 0), transactionID(inPage: 1))
        let layoutHolds = magic(inPage: 0) == Self.magic && magic(inPage: 1) == Self.magic
            && (first == second ? first == 0 : max(first, second) - min(first, second) == 1)
        if !layoutHolds {
            munmap(base, 2 * pageSize)
            return nil
        }
    }

    deinit { munmap(base, 2 * pageSize) }

    private func magic(inPage page: Int) -> UInt32 {
        base.load(fromByteOffset: page * pageSize + Self.magicOffset, as: UInt32.self)
    }

    /// The transaction ID meta page `page` (0 or 1) holds now.
    func transactionID(inPage page: Int) -> UInt64 {
        // A plain load from shared memory another process writes: read it afresh every time.
        UnsafeRawPointer(base + page * pageSize + Self.transactionIDOffset)
            .assumingMemoryBound(to: UInt64.self).pointee
    }

    /// `mm_mapsize` and `mm_last_pg` of `MDB_meta`, after the 16-byte page header.
    static let mapSizeOffset = 16 + 16
    static let lastPageOffset = 16 + 120

    /// The page of the newest committed transaction (the one a new transaction starts from).
    private var currentPage: Int { transactionID(inPage: 1) > transactionID(inPage: 0) ? 1 : 0 }

    /// The map size the newest meta page records: what `mdb_env_set_mapsize(env, 0)` would adopt.
    var recordedMapSize: Int {
        let size = base.load(fromByteOffset: currentPage * pageSize + Self.mapSizeOffset, as: UInt64.self)
        return size > UInt64(Int.max) ? Int.max : Int(size)
    }

    /// How many bytes the newest meta page says the data file holds: `(mm_last_pg + 1) * page size`,
    /// saturating rather than overflowing for a hostile value.
    var recordedDataSize: Int {
        let last = base.load(fromByteOffset: currentPage * pageSize + Self.lastPageOffset, as: UInt64.self)
        let (pages, o1) = last.addingReportingOverflow(1)
        let (bytes, o2) = pages.multipliedReportingOverflow(by: UInt64(pageSize))
        return o1 || o2 || bytes > UInt64(Int.max) ? Int.max : Int(bytes)
    }

    /// Whether a read transaction that LMDB reports as `id` certainly holds the roots of `id`.
    /// `repeated`: the previous attempt was `id` too.
    func isExact(transaction id: UInt64, repeated: Bool) -> Bool {
        Self.isExact(transaction: id, repeated: repeated,
                     own: transactionID(inPage: Int(id & 1)), other: transactionID(inPage: Int((id + 1) & 1)))
    }

    /// The rule, given what the two meta pages hold (`own`: page `id & 1`).
    static func isExact(transaction id: UInt64, repeated: Bool, own: UInt64, other: UInt64) -> Bool {
        if own != id { return false }
        if other > id && !repeated { return false }
        return true
    }
}
