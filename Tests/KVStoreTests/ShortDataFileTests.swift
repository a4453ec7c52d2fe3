import Foundation
@testable import KVStore
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 46, finding 1: LMDB commits transactions whose last page (`mm_last_pg`) is past the end of
/// `data.mdb`. Pages a transaction took from the end of the file and freed again before committing
/// go to the free list without ever being written, so the file is never extended to them; LMDB and
/// its tools open such a store, and so must KVStore. Before, every process of the container refused
/// it as truncated ("shorter than the … bytes its meta page records"): after an ordinary `kvtool
/// sync run --once`, every command, the widget and the push extension exited 74. A store that is
/// truncated for real (a page its newest transaction reaches is past the end) is still refused, in
/// one line naming the file, its size and the first missing page.
@Suite struct ShortDataFileTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.short"

    /// KVStore writes such a store itself: three small commits leave free pages, then one write puts
    /// a 1 MiB value and deletes it.
    func storeKVStoreLeftShort(_ name: String) throws -> String {
        let path = dir.path + "/" + name
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let store = try Store(directory: path)
        let items = try store.collection("items", key: Int.self, value: [UInt8].self)
        for key in 0..<3 { try items.put([UInt8](repeating: UInt8(key), count: 100), forKey: key) }
        try store.write { tx in
            try items.put([UInt8](repeating: 9, count: 1 << 20), forKey: 99, in: tx)
            #expect(try items.delete(99, in: tx))
        }
        return path
    }

    /// The store's file ends before the meta page's last page: what the test is about.
    func expectShort(_ store: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let reach = try LMDBPrograms.reach(store + "/data.mdb")
        try #require(reach.filePages <= reach.lastPage,
                     "the file has \(reach.filePages) pages and the last page is \(reach.lastPage): not the state under test",
                     sourceLocation: sourceLocation)
    }

    @Test(.blockingWork) func aStoreKVStoreCommittedShortOfItsLastPageOpensAgain() throws {
        let path = try storeKVStoreLeftShort("own")
        try expectShort(path)
        let lmdb = try LMDBPrograms.lmdbReads(path, scratch: dir.path + "/copy")
        #expect(lmdb.readable, "\(lmdb.detail)")
        // Another process (a widget's read-only open), then this one (its environment was closed with
        // the store that wrote it), reading every value.
        let other = try helper(["store-count", dir.path, group, path, String(64 << 30)])
        #expect(other.status == 0 && other.stdout == "3\n", "\(other.stderr)")
        let store = try Store(directory: path)
        let items = try store.collection("items", key: Int.self, value: [UInt8].self)
        #expect(try store.read { tx in try items.entries(in: tx).map(\.key) } == [0, 1, 2])
        #expect(try store.checkIntegrity().isClean)
    }

    /// A read-only open (a widget's) changes nothing; a read-write open that found nothing missing
    /// extends the file to the size the meta page records, so that later opens cost one `fstat`.
    @Test(.blockingWork) func aReadWriteOpenExtendsAShortFileAndAReadOnlyOneLeavesIt() throws {
        let path = try storeKVStoreLeftShort("extend")
        let before = fileSize(path + "/data.mdb")
        var readOnly = Store.Options()
        readOnly.readOnly = true
        do { _ = try Store(directory: path, options: readOnly) }
        #expect(fileSize(path + "/data.mdb") == before)
        try expectShort(path)
        do { _ = try Store(directory: path) }
        let reach = try LMDBPrograms.reach(path + "/data.mdb")
        #expect(reach.filePages == reach.lastPage + 1, "\(reach)")
        #expect(try LMDBPrograms.lmdbReads(path, scratch: dir.path + "/copy").readable)
        let store = try Store(directory: path, options: readOnly)
        #expect(try store.collection("items", key: Int.self, value: [UInt8].self).count() == 3)
        #expect(try store.checkIntegrity().isClean)
    }

    /// The walk stays right while another process commits: the differential test's generator
    /// (`scripts/lmdb-differential.c`, 3,000 steps, no copy put in place of `data.mdb`) commits as fast
    /// as it can, the probe's pattern among its operations, while this process opens the store
    /// read-only over and over, each time a new environment. No open is refused: the read transaction
    /// held during the walk keeps the pages it reads from being reused, and a refusal is made only
    /// against a meta page that did not change.
    @Test(.blockingWork) func opensWhileAnotherProcessCommitsAreNeverRefused() throws {
        let root = dir.path + "/busy"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        do {
            let container = try SharedContainer(groupIdentifier: group, root: root)
            for name in LMDBDifferentialTests.collections { _ = try container.store.collection(name, key: ByteKey.self, codec: RawBytesCodec()) }
        }
        let store = root + "/" + group + "/Store"
        let seed = UInt64.random(in: 1...999_999_999)
        let writer = try BackgroundProcess(try LMDBPrograms.compiled("lmdb-differential"),
                                           [store, String(seed), "3000"] + LMDBDifferentialTests.collections.map { Catalog.collectionDatabase($0) },
                                           environment: ["LMDB_DIFFERENTIAL_NO_COPIES": "1"])
        var readOnly = Store.Options()
        readOnly.readOnly = true
        var opens = 0, short = 0, refusals: [String] = []
        while writer.process.isRunning {
            let reach = try? LMDBPrograms.meta(store + "/data.mdb")
            if let reach, reach.filePages <= reach.lastPage { short += 1 }
            do {
                _ = try Store(directory: store, options: readOnly)
            } catch {
                refusals.append("\(error)")
            }
            opens += 1
        }
        let (status, _, stderr) = writer.wait()
        #expect(status == 0, "the generator (seed \(seed)): \(stderr)")
        #expect(refusals.isEmpty, "seed \(seed): \(refusals.count) of \(opens) opens refused: \(refusals.prefix(3))")
        print("[short-file] \(opens) opens while another process committed (seed \(seed)), \(short) of them with the file short "
              + "just before; \(refusals.count) refused")
    }

    /// The probe of the issue (`scripts/lmdb-short-file-probe.c`: a 1 MiB value put into a scratch
    /// database, deleted, the database dropped, committed) run by plain LMDB on a container made by
    /// KVStore: every kvtool command of the container works, read-only and read-write.
    @Test(.blockingWork) func theProbeOfIssue46LeavesAContainerEveryProcessOpens() throws {
        let put = try helper(["container-put", dir.path, group, "privateToUser"])
        try #require(put.status == 0, "\(put.stderr)")
        let store = dir.path + "/" + group + "/Store"
        let probe = try run(try LMDBPrograms.compiled("lmdb-short-file-probe"), [store], timeout: 60)
        try #require(probe.status == 0, "\(probe.stderr)")
        try expectShort(store)
        #expect(try LMDBPrograms.lmdbReads(store, scratch: dir.path + "/copy").readable)
        let kvtool = productsDirectory() + "/kvtool"
        let place = ["--root", dir.path, "--group", group]
        let get = try run(kvtool, ["get", "notes", "a"] + place)
        #expect(get.status == 0 && get.stdout == "\"1\"\n", "\(get.stderr)")
        let write = try run(kvtool, ["put", "notes", "b", "\"2\""] + place)
        #expect(write.status == 0, "\(write.stderr)")
        let check = try run(kvtool, ["check"] + place)
        #expect(check.status == 0, "\(check.stderr)\(check.stdout)")
    }

    /// A cut inside the overflow run of a value: `mdb_dump` faults, and the open is refused in one
    /// line naming the file, its size and the first page that is missing, in another process too.
    @Test(.blockingWork) func aCutInsideAnOverflowRunIsRefusedNamingTheFirstMissingPage() throws {
        let path = dir.path + "/overflow"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        do {
            let store = try Store(directory: path)
            try store.collection("items", key: Int.self, value: [UInt8].self).put([UInt8](repeating: 5, count: 1 << 20), forKey: 1)
        }
        // The value's 257 pages are most of the file's: its middle page is one of them.
        let reach = try LMDBPrograms.reach(path + "/data.mdb")
        let cut = reach.filePages / 2
        let size = Int(cut) * reach.pageSize
        #expect(truncate(path + "/data.mdb", off_t(size)) == 0)
        let lmdb = try LMDBPrograms.lmdbReads(path, scratch: dir.path + "/copy")
        #expect(!lmdb.readable && lmdb.detail.hasPrefix("mdb_dump -a: status 7 "), "\(lmdb.detail)")
        let expected = "the store file \(path)/data.mdb was truncated: it is \(size) bytes, but its newest transaction reaches page \(cut), which starts at byte \(size)"
        #expect(throws: KVStoreError.truncatedStore(path: path + "/data.mdb", size: size, missingPage: Int(cut), pageSize: reach.pageSize)) {
            _ = try Store(directory: path)
        }
        let other = try helper(["store-count", dir.path, group, path, String(64 << 30)])
        #expect(other.status == 1 && other.stderr.contains(expected), "\(other.stderr)")
    }

    /// LMDB opens whatever page size the meta page records (`mdb_stat` reads this store with pages of
    /// 1 MiB); a short file with a page size LMDB never writes (not a power of two from 512 bytes to
    /// 64 KiB) is refused as corrupted rather than walked with a page buffer of the planted size.
    @Test(.blockingWork) func aPlantedPageSizeOnAShortFileIsRefusedWithoutAWalk() throws {
        let path = try storeKVStoreLeftShort("pagesize")
        let dataFile = path + "/data.mdb"
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dataFile)))
        let planted = 1 << 20
        // mm_psize (md_pad of the free list's MDB_db) in both meta pages; LMDB reads the second one at
        // the planted page size, so a copy of it goes there.
        for page in 0..<2 { withUnsafeBytes(of: UInt32(planted).littleEndian) { bytes.replaceSubrange(page * 4096 + 40..<page * 4096 + 44, with: $0) } }
        if bytes.count < 2 * planted { bytes += [UInt8](repeating: 0, count: 2 * planted - bytes.count) }
        bytes.replaceSubrange(planted..<planted + 4096, with: bytes[4096..<8192])
        try Data(bytes).write(to: URL(fileURLWithPath: dataFile))
        let stat = try run("/usr/bin/mdb_stat", ["-e", path])
        try #require(stat.status == 0 && stat.stdout.contains("Page size: 1048576"), "\(stat.stderr)")
        #expect(throws: LMDBError.corrupted) { _ = try Store(directory: path) }
    }

    /// The free list is read by every writer (and by `mdb_stat -ff`), though no reader of the data
    /// touches it: a free-list page cut off is refused, although `mdb_dump` reads everything else.
    @Test(.blockingWork) func aFreeListPageCutOffIsRefusedThoughMdbDumpReadsTheData() throws {
        let put = try helper(["container-put", dir.path, group, "privateToUser"])
        try #require(put.status == 0, "\(put.stderr)")
        let store = dir.path + "/" + group + "/Store"
        let probe = try run(try LMDBPrograms.compiled("lmdb-short-file-probe"), [store], timeout: 60)
        try #require(probe.status == 0, "\(probe.stderr)")
        let reach = try LMDBPrograms.reach(store + "/data.mdb")
        let cut = try #require(reach.highest)
        #expect(truncate(store + "/data.mdb", off_t(Int(cut) * reach.pageSize)) == 0)
        let dump = try run("/usr/bin/mdb_dump", ["-a", store])
        try #require(dump.status == 0, "the last page reached is not a free-list page here: \(dump.stderr)")
        let freeList = try run("/usr/bin/mdb_stat", ["-ff", store])
        #expect(freeList.status == 7, "mdb_stat -ff: \(freeList.status) \(freeList.stderr)")  // SIGBUS
        let check = try run(productsDirectory() + "/kvtool", ["check", "--root", dir.path, "--group", group])
        #expect(check.status == 74 && check.stderr.contains("was truncated") && check.stderr.contains("reaches page \(cut),"),
                "\(check.stderr)")
    }
}
