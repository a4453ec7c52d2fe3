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
        let temporary = program + ".tmp-\(getpid())"
        let result = try run(compiler, ["-O2", "-Wall", "-o", temporary, source] + linking, timeout: 120)
        try #require(result.status == 0 && rename(temporary, program) == 0, "compiling \(source): \(result.stderr)")
        return program
    }

    /// What LMDB's tools make of the store in `store`: `mdb_dump -a` (every database, every value read
    /// whole), `mdb_stat -ffa` (the free list walked, record by record) and `mdb_copy -c` (compaction
    /// reads every overflow run as long as its header says) all exit 0, or the first that did not,
    /// with its status (a signal's number when one killed it: 7 is `SIGBUS`). `scratch` is a directory
    /// for the copy, made and removed here.
    static func lmdbReads(_ store: String, scratch: String) throws -> (readable: Bool, detail: String, dump: String) {
        let dump = try run("/usr/bin/mdb_dump", ["-a", store], timeout: 120)
        if dump.status != 0 { return (false, "mdb_dump -a: status \(dump.status) \(dump.stderr.prefix(200))", "") }
        let stat = try run("/usr/bin/mdb_stat", ["-ffa", store], timeout: 120)
        if stat.status != 0 { return (false, "mdb_stat -ffa: status \(stat.status) \(stat.stderr.prefix(200))", "") }
        try? FileManager.default.removeItem(atPath: scratch)
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let copy = try run("/usr/bin/mdb_copy", ["-c", store, scratch], timeout: 120)
        if copy.status != 0 { return (false, "mdb_copy -c: status \(copy.status) \(copy.stderr.prefix(200))", "") }
        return (true, "", dump.stdout)
    }

    /// What KVStore's walk reads of `dataFile`: the highest page its newest transaction reaches (`nil`
    /// for an empty store), the file's whole pages, the page size and the meta page's last page.
    static func reach(_ dataFile: String) throws -> (highest: UInt64?, filePages: UInt64, pageSize: Int, lastPage: UInt64) {
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
        let outcome = ReachablePages.walk(fd, pageSize: pageSize, filePages: filePages, meta: meta)
        return (outcome.highest, filePages, pageSize, meta.lastPage)
    }
}
