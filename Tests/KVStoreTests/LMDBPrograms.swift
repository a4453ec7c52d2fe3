import Foundation
@testable import KVStore
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The C programs under `scripts/` that drive LMDB directly (issue 46's probe, the differential
/// test's generator), and what LMDB's own tools make of a store.
enum LMDBPrograms {
    /// `scripts/`, next to `Tests/`.
    static let scripts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts").path

    /// `scripts/NAME.c`, compiled against liblmdb (`pkg-config lmdb`) into the build directory when it
    /// is missing or older than its source.
    static func compiled(_ name: String) throws -> String {
        let source = scripts + "/" + name + ".c"
        let program = productsDirectory() + "/" + name
        func modified(_ path: String) -> Int? {
            var info = stat()
            return stat(path, &info) == 0 ? Int(info.st_mtim.tv_sec) : nil
        }
        if let built = modified(program), let written = modified(source), built >= written { return program }
        let flags = try run("/usr/bin/pkg-config", ["--cflags", "--libs", "lmdb"], timeout: 30)
        try #require(flags.status == 0, "pkg-config lmdb: \(flags.stderr)")
        let compilers: [String] = ["/usr/bin/cc", "/usr/bin/clang", "/usr/bin/gcc"]
        let compiler = compilers.first { access($0, X_OK) == 0 } ?? "/usr/bin/cc"
        let linking: [String] = flags.stdout.split(whereSeparator: \.isWhitespace).map { String($0) }
        // Unique per call, not per process: Swift Testing runs tests in parallel, and two tests of one
        // process may compile the same program at once (each renames its own file into place).
        let temporary = program + ".tmp-\(getpid())-\(UUID().uuidString)"
        defer { unlink(temporary) }  // after the rename it is gone; after a failure it is removed
        let result = try run(compiler, ["-O2", "-Wall", "-o", temporary, source] + linking, timeout: 120)
        try #require(result.status == 0 && rename(temporary, program) == 0, "compiling \(source): \(result.stderr)")
        return program
    }

    /// What LMDB's tools make of the store in `store`: `mdb_dump -a` (every database, every value read
    /// whole), `mdb_stat -ffa` (the free list walked, record by record) and `mdb_copy -c` (compaction
    /// reads every overflow run as long as its header says) all exit 0, or the first that did not,
    /// with its status (a signal's number when one killed it: 7 is `SIGBUS`). `scratch` is a directory
    /// for the copy, made and removed here.
    static func lmdbReads(_ store: String, scratch: String) throws -> LMDBView {
        let dump = try run("/usr/bin/mdb_dump", ["-a", store], timeout: 120)
        if dump.status != 0 { return LMDBView(detail: "mdb_dump -a: status \(dump.status) \(dump.stderr.prefix(200))") }
        let stat = try run("/usr/bin/mdb_stat", ["-ffa", store], timeout: 120)
        if stat.status != 0 { return LMDBView(detail: "mdb_stat -ffa: status \(stat.status) \(stat.stderr.prefix(200))") }
        try? FileManager.default.removeItem(atPath: scratch)
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let copy = try run("/usr/bin/mdb_copy", ["-c", store, scratch], timeout: 120)
        if copy.status != 0 { return LMDBView(detail: "mdb_copy -c: status \(copy.status) \(copy.stderr.prefix(200))") }
        let compacted = try Data(contentsOf: URL(fileURLWithPath: scratch + "/data.mdb"))
        return LMDBView(readable: true, detail: "", dump: dump.stdout, stat: stat.stdout, compacted: compacted)
    }

    /// What the three tools printed and wrote, when all three exited 0.
    struct LMDBView {
        var readable = false
        /// The first tool that did not exit 0, and how.
        var detail: String
        var dump = ""
        var stat = ""
        var compacted = Data()
    }

    struct Reach {
        /// The highest page the newest transaction reaches; `nil` for an empty store.
        var highest: UInt64?
        var filePages: UInt64
        var pageSize: Int
        /// The meta page's `mm_last_pg`.
        var lastPage: UInt64
        /// Every page reached, as runs.
        var ranges: [ClosedRange<UInt64>]
    }

    /// What KVStore's walk reads of `dataFile`.
    static func reach(_ dataFile: String) throws -> Reach {
        let fd = open(dataFile, O_RDONLY | O_CLOEXEC)
        try #require(fd >= 0, "open \(dataFile): errno \(errno)")
        defer { close(fd) }
        var info = stat()
        try #require(fstat(fd, &info) == 0)
        // The page size is the meta page's mm_psize (md_pad of the free list's MDB_db, after the header).
        var word: UInt32 = 0
        try #require(pread(fd, &word, 4, 16 + 24) == 4)
        let pageSize = Int(word)
        try #require(pageSize >= 512 && pageSize <= 65_536, "page size \(pageSize)")
        let meta = try #require(ReachablePages.newestMeta(fd, pageSize: pageSize))
        let filePages = UInt64(Int(info.st_size) / pageSize)
        let outcome = ReachablePages.walk(fd, pageSize: pageSize, filePages: filePages, meta: meta, recordingRanges: true)
        return Reach(highest: outcome.highest, filePages: filePages, pageSize: pageSize, lastPage: meta.lastPage, ranges: outcome.ranges)
    }

    /// The file's whole pages and the newest meta page's last page, without a walk.
    static func meta(_ dataFile: String) throws -> (filePages: UInt64, lastPage: UInt64) {
        let fd = open(dataFile, O_RDONLY | O_CLOEXEC)
        try #require(fd >= 0, "open \(dataFile): errno \(errno)")
        defer { close(fd) }
        var info = stat()
        try #require(fstat(fd, &info) == 0)
        var word: UInt32 = 0
        try #require(pread(fd, &word, 4, 16 + 24) == 4)
        let pageSize = Int(word)
        try #require(pageSize >= 512 && pageSize <= 65_536, "page size \(pageSize)")
        let meta = try #require(ReachablePages.newestMeta(fd, pageSize: pageSize))
        return (UInt64(Int(info.st_size) / pageSize), meta.lastPage)
    }

    /// Writes `directory/data.mdb`: `dataFile` with every page but the meta pages and those `reach`
    /// says its newest transaction reaches overwritten with zeros. Returns how many pages were zeroed.
    static func zeroingUnreached(_ dataFile: String, into directory: String, reach: Reach) throws -> Int {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dataFile)))
        var kept = [Bool](repeating: false, count: Int(reach.filePages))
        for page in 0..<min(2, kept.count) { kept[page] = true }
        for range in reach.ranges where range.lowerBound < reach.filePages {
            for page in range.lowerBound...min(range.upperBound, reach.filePages - 1) { kept[Int(page)] = true }
        }
        var zeroed = 0
        for (page, keep) in kept.enumerated() where !keep {
            let start = page * reach.pageSize
            bytes.replaceSubrange(start..<start + reach.pageSize, with: repeatElement(0, count: reach.pageSize))
            zeroed += 1
        }
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: directory + "/data.mdb"))
        return zeroed
    }
}
