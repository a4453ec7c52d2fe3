#if canImport(Glibc)
import Glibc
#endif

/// The pages of an LMDB data file that its newest transaction reaches, read with `pread`: whether
/// LMDB would fault on a `data.mdb` shorter than its meta page's last page.
///
/// LMDB can commit a transaction whose last page (`mm_last_pg`) is past the end of the file: pages a
/// transaction took from the end and freed again before committing (a value of a megabyte put and
/// deleted) are listed in the free list but never written, so the file is never extended to them
/// (issue 46: `kvtool sync run --once` left such a store, which `mdb_dump`, `mdb_stat` and
/// `mdb_copy` read without complaint). LMDB reads a page only when something reaches it, so the
/// question for a short file is whether any page reachable from the newest meta page lies past the
/// end: the main tree, the free-list tree (a writer reads it), the tree of every named database found
/// in the main tree, the sub-databases of `MDB_DUPSORT` databases, and every overflow run. Such a page
/// is mapped past the end of the file, and touching it is `SIGBUS`.
///
/// The walk reads the file, never the map, and trusts nothing it reads (another process that can
/// write the file can plant anything): every page is read at most once (a bit per page of the file,
/// so a cycle ends), a page number at or past the meta page's last page is left alone (LMDB answers
/// `MDB_PAGE_NOTFOUND` for it, without touching it), every offset inside a page is checked against the
/// page, and a page that is neither a branch nor a leaf has no children (LMDB answers
/// `MDB_CORRUPTED` for it). Its memory is one bit per page of the file and at most one stack entry per
/// page of the file.
///
/// The layout, LMDB 0.9's file format 1 on a 64-bit machine (`mdb.c`):
/// - a page header (`MDB_page`, 16 bytes): `mp_pgno` (8), `mp_pad` (2), `mp_flags` (2), then
///   `mp_lower`, `mp_upper` (2 each), or for an overflow page `mp_pages` (4): how many pages the run
///   has. The node offsets (`mp_ptrs`, 2 bytes each) follow; `(mp_lower - 16) / 2` of them.
/// - a node (`MDB_node`, 8 bytes, then the key, then the data): `mn_lo`, `mn_hi` (the data size, or with
///   `mn_flags` the child page of a branch node: `lo | hi << 16 | flags << 32`), `mn_flags`, `mn_ksize`.
///   In a leaf, `F_BIGDATA` (1): the data is the first page of an overflow run; `F_SUBDATA` (2): the
///   data is an `MDB_db` (a named database in the main tree, or with `F_DUPDATA` (4) a sub-database of
///   duplicates), whose root is at offset 40; `F_DUPDATA` alone: the duplicates are a sub-page inside
///   the node, with no page numbers. `P_LEAF2` leaves (`MDB_DUPFIXED` duplicates) hold no nodes.
/// - the meta page: after the header, `MDB_meta`: `mm_dbs[0]` (the free list) at 24, `mm_dbs[1]` (the
///   main tree) at 72 (48 bytes each, `md_root` at 40 in each), `mm_last_pg` at 120, `mm_txnid` at 128.
struct ReachablePages {
    /// What the newest meta page says, and its bytes (to tell that it did not change).
    struct Meta: Equatable {
        var transactionID: UInt64
        var lastPage: UInt64
        var freeRoot: UInt64
        var mainRoot: UInt64
        var bytes: [UInt8]
    }

    /// What a walk found.
    struct Outcome: Equatable {
        /// The lowest page the transaction reaches that is past the end of the file; `nil` if none.
        var firstMissing: UInt64?
        /// The highest page it reaches, overflow runs included; `nil` for an empty store.
        var highest: UInt64?
        /// How many pages were read.
        var pagesRead: Int
        /// Every page reached, as runs (a tree page is a run of one), when the walk was asked to
        /// record them (the tests check them against LMDB's tools); otherwise empty.
        var ranges: [ClosedRange<UInt64>] = []
    }

    static let headerSize = 16
    static let metaSize = headerSize + 136
    static let magic: UInt32 = 0xBEEF_C0DE
    /// `P_INVALID`: the root of an empty tree.
    static let invalidPage = UInt64.max
    static let branch: UInt16 = 0x01, leaf: UInt16 = 0x02, overflow: UInt16 = 0x04, leaf2: UInt16 = 0x20
    static let bigData: UInt16 = 0x01, subData: UInt16 = 0x02

    /// The newer of the two meta pages of the file open at `fd`, read twice and the same both times
    /// (a commit may be rewriting it: a read that overlaps the write could mix the two); `nil` when
    /// neither page has LMDB's magic.
    static func newestMeta(_ fd: Int32, pageSize: Int) -> Meta? {
        var previous: Meta?
        for _ in 0..<64 {
            guard let meta = readNewestMeta(fd, pageSize: pageSize) else { return nil }
            if meta == previous { return meta }
            previous = meta
        }
        return previous
    }

    private static func readNewestMeta(_ fd: Int32, pageSize: Int) -> Meta? {
        var newest: Meta?
        for page in 0..<2 {
            var bytes = [UInt8](repeating: 0, count: metaSize)
            let count = bytes.withUnsafeMutableBytes { buffer in SystemCall.retry { pread(fd, buffer.baseAddress, metaSize, off_t(page * pageSize)) } }
            guard count == metaSize else { continue }
            let body = headerSize
            guard load(UInt32.self, bytes, body) == magic else { continue }
            let meta = Meta(transactionID: load(UInt64.self, bytes, body + 128), lastPage: load(UInt64.self, bytes, body + 120),
                            freeRoot: load(UInt64.self, bytes, body + 24 + 40), mainRoot: load(UInt64.self, bytes, body + 72 + 40),
                            bytes: bytes)
            if newest.map({ meta.transactionID > $0.transactionID }) ?? true { newest = meta }
        }
        return newest
    }

    /// Walks everything `meta` reaches in the file open at `fd`, of which `filePages` whole pages exist.
    static func walk(_ fd: Int32, pageSize: Int, filePages: UInt64, meta: Meta, recordingRanges: Bool = false) -> Outcome {
        var walker = Walker(fd: fd, pageSize: pageSize, filePages: filePages, lastPage: meta.lastPage)
        walker.ranges = recordingRanges ? [] : nil
        walker.visit(meta.freeRoot)
        walker.visit(meta.mainRoot)
        walker.run()
        return Outcome(firstMissing: walker.firstMissing, highest: walker.highest, pagesRead: walker.pagesRead,
                       ranges: walker.ranges ?? [])
    }

    private struct Walker {
        let fd: Int32
        let pageSize: Int
        let filePages: UInt64
        /// `mm_last_pg`: pages past it are never read (`mdb_page_get` refuses them).
        let lastPage: UInt64
        var seen: [UInt64]
        var stack: [UInt64] = []
        var page: [UInt8]
        var firstMissing: UInt64?
        var highest: UInt64?
        var pagesRead = 0
        var ranges: [ClosedRange<UInt64>]?

        init(fd: Int32, pageSize: Int, filePages: UInt64, lastPage: UInt64) {
            self.fd = fd
            self.pageSize = pageSize
            self.filePages = filePages
            self.lastPage = lastPage
            // One bit per page that exists, and no more than the meta page records: both real bounds.
            seen = [UInt64](repeating: 0, count: Int(((lastPage < filePages ? lastPage + 1 : filePages) + 63) / 64))
            page = [UInt8](repeating: 0, count: pageSize)
        }

        mutating func reached(_ first: UInt64, through last: UInt64) {
            ranges?.append(first...last)
            highest = max(highest ?? 0, last)
            if last >= filePages { firstMissing = min(firstMissing ?? .max, max(first, filePages)) }
        }

        /// A tree page to read: queued once, if it exists; noted if it is past the end.
        mutating func visit(_ number: UInt64) {
            guard number != ReachablePages.invalidPage, number <= lastPage, number >= 2 else { return }
            reached(number, through: number)
            guard number < filePages else { return }
            let (word, bit) = (Int(number / 64), UInt64(1) << (number % 64))
            guard seen[word] & bit == 0 else { return }
            seen[word] |= bit
            stack.append(number)
        }

        mutating func run() {
            while let number = stack.popLast() {
                guard read(number) else {
                    reached(number, through: number)  // the file shrank under the walk
                    continue
                }
                pagesRead += 1
                let flags = load(UInt16.self, page, 10)
                guard flags & (ReachablePages.branch | ReachablePages.leaf) != 0, flags & ReachablePages.leaf2 == 0 else { continue }
                let lower = Int(load(UInt16.self, page, 12))
                let nodes = min(max(0, lower - ReachablePages.headerSize) / 2, (pageSize - ReachablePages.headerSize) / 2)
                for index in 0..<nodes {
                    let node = Int(load(UInt16.self, page, ReachablePages.headerSize + 2 * index))
                    guard node >= ReachablePages.headerSize, node + 8 <= pageSize else { continue }
                    let low = UInt64(load(UInt16.self, page, node)), high = UInt64(load(UInt16.self, page, node + 2))
                    let nodeFlags = load(UInt16.self, page, node + 4)
                    if flags & ReachablePages.branch != 0 {
                        visit(low | high << 16 | UInt64(nodeFlags) << 32)
                        continue
                    }
                    let data = node + 8 + Int(load(UInt16.self, page, node + 6))
                    if nodeFlags & ReachablePages.bigData != 0 {
                        guard data + 8 <= pageSize else { continue }
                        overflowRun(at: load(UInt64.self, page, data), dataSize: low | high << 16)
                    } else if nodeFlags & ReachablePages.subData != 0 {
                        guard data + 48 <= pageSize else { continue }
                        visit(load(UInt64.self, page, data + 40))
                    }
                }
            }
        }

        /// An overflow run: its first page holds the header, and the run is as long as the larger of
        /// what the value needs (`OVPAGES`) and what the header says (`mp_pages`: a value rewritten
        /// smaller in its own run keeps the run, and `mdb_env_copy`'s compaction copies all of it).
        mutating func overflowRun(at first: UInt64, dataSize: UInt64) {
            guard first >= 2, first <= lastPage else { return }
            let needed = (UInt64(ReachablePages.headerSize) - 1 + dataSize) / UInt64(pageSize) + 1
            var recorded: UInt64 = 0
            if first < filePages {
                var header = [UInt8](repeating: 0, count: ReachablePages.headerSize)
                let count = header.withUnsafeMutableBytes { buffer in
                    SystemCall.retry { pread(fd, buffer.baseAddress, ReachablePages.headerSize, off_t(first) * off_t(pageSize)) }
                }
                if count == ReachablePages.headerSize, load(UInt16.self, header, 10) & ReachablePages.overflow != 0 {
                    recorded = UInt64(load(UInt32.self, header, 12))
                }
            }
            let (last, overflowed) = first.addingReportingOverflow(max(needed, recorded, 1) - 1)
            reached(first, through: overflowed ? .max : last)
        }

        /// Reads page `number` whole into `page`.
        mutating func read(_ number: UInt64) -> Bool {
            let size = pageSize
            let offset = off_t(number) * off_t(size)
            let count = page.withUnsafeMutableBytes { buffer in SystemCall.retry { pread(fd, buffer.baseAddress, size, offset) } }
            return count == size
        }
    }

    static func load<T: FixedWidthInteger>(_: T.Type, _ bytes: [UInt8], _ offset: Int) -> T {
        bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: T.self) }
    }
}
