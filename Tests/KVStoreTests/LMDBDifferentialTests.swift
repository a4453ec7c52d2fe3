import Foundation
@testable import KVStore
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// KVStore's open check against LMDB's own tools (issue 46): generated sequences of LMDB operations
/// (`scripts/lmdb-differential.c`: puts of every size up to 2 MiB, overwrites, deletes, emptied and
/// deleted databases, `MDB_DUPSORT` and `MDB_DUPFIXED` databases, nested and aborted transactions,
/// read transactions held across commits, `mdb_env_copy2` with and without compaction, maps grown,
/// shrunk and reopened) run on a real container's `Store/`, whose catalog names the databases they
/// write. After each case:
///
/// - `mdb_dump -a`, `mdb_stat -ffa` (every database, and the free list walked) and `mdb_copy -c`
///   (compaction reads every overflow run whole) read the store, `kvtool check` opens it and passes,
///   and `kvtool dump --format mdb` prints what `mdb_dump -a` prints;
/// - in a copy whose every page KVStore's walk does not reach is zeroed, the three tools print and
///   write exactly what they did (the walk misses no page LMDB reads);
/// - the file is cut at page boundaries, from the end down: just after the highest page the newest
///   transaction reaches (every tool reads it, KVStore opens it and `kvtool check` passes), at that
///   page and at a random page below it (every tool faults or fails, and KVStore's open throws
///   `truncatedStore` naming `data.mdb`), and in the long run also at a random page between the end
///   and the highest page reached.
///
/// The cases are seeded: a failure names its seed, and `KVSTORE_DIFFERENTIAL_SEED=N` replays the run
/// from it (`KVSTORE_DIFFERENTIAL_CASES=1` for that case alone). 150 cases in `make test` (fewer under
/// a sanitizer), 3,000 in `make stress`.
@Suite struct LMDBDifferentialTests {
    let dir = TemporaryDirectory()
    static let group = "group.com.example.differential"
    /// The catalog's collections: "dup" ones become MDB_DUPSORT, "fix" ones MDB_DUPSORT|MDB_DUPFIXED.
    static let collections = ["t0", "t1", "dup0", "fix0"]

    struct Figures {
        var cases = 0, states = 0, shortAccepted = 0, cutsAccepted = 0, cutsRefused = 0, toolSignals = 0, zeroedPages = 0
        var driver: [String: Int] = [:]
    }

    @Test(.blockingWork) func generatedSequencesAgreeWithLMDBsTools() throws {
        let environment = ProcessInfo.processInfo.environment
        // Under a sanitizer (kvtool 4 to 8 times slower), as many cases as fit in the same time.
        let cases = Int(environment["KVSTORE_DIFFERENTIAL_CASES"] ?? "")
            ?? StressLevel.pick(short: 150, long: 3_000) / (BuildScale.sanitizer == nil ? 1 : Int(BuildScale.factor))
        let base = UInt64(environment["KVSTORE_DIFFERENTIAL_SEED"] ?? "") ?? UInt64.random(in: 1...999_999_999)
        print("[differential] seed \(base), \(cases) cases (\(StressLevel.name)); KVSTORE_DIFFERENTIAL_SEED=\(base) replays them")
        let driver = try LMDBPrograms.compiled("lmdb-differential")
        let kvtool = productsDirectory() + "/kvtool"
        let started = Date()
        let next = Locked(0)
        let results = Locked((figures: Figures(), failures: [String]()))
        let workers = 2
        DispatchQueue.concurrentPerform(iterations: workers) { _ in
            while true {
                let index = next.withLock { value -> Int in defer { value += 1 }; return value }
                guard index < cases, results.withLock({ $0.failures.count }) < 5 else { return }
                let seed = base &+ UInt64(index)
                var figures = Figures()
                do {
                    if let failure = try runCase(seed: seed, driver: driver, kvtool: kvtool, figures: &figures) {
                        results.withLock { $0.failures.append("seed \(seed) (KVSTORE_DIFFERENTIAL_SEED=\(seed) KVSTORE_DIFFERENTIAL_CASES=1): \(failure)") }
                    }
                } catch {
                    results.withLock { $0.failures.append("seed \(seed): \(error)") }
                }
                results.withLock { total in
                    total.figures.cases += figures.cases
                    total.figures.states += figures.states
                    total.figures.shortAccepted += figures.shortAccepted
                    total.figures.cutsAccepted += figures.cutsAccepted
                    total.figures.cutsRefused += figures.cutsRefused
                    total.figures.toolSignals += figures.toolSignals
                    total.figures.zeroedPages += figures.zeroedPages
                    total.figures.driver.merge(figures.driver, uniquingKeysWith: +)
                }
            }
        }
        let (figures, failures) = results.withLock { $0 }
        for failure in failures { Issue.record(Comment(rawValue: failure)) }
        let seconds = Date().timeIntervalSince(started)
        let driverText = figures.driver.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        print("[differential] \(figures.cases) cases in \(String(format: "%.0f", seconds)) s, \(figures.states) states checked: "
              + "\(figures.shortAccepted) committed with the file short of its last page (opened), "
              + "\(figures.cutsAccepted) cut above every reached page (opened), \(figures.cutsRefused) cut below one (refused; "
              + "\(figures.toolSignals) of them killed an LMDB tool by a signal); \(figures.zeroedPages) pages the walk does not reach "
              + "zeroed, with the same mdb_dump; the generator: \(driverText)")
        #expect(figures.cases == cases || !failures.isEmpty)
    }

    /// One case: the container, the generated operations, the checks. Returns what disagreed, or `nil`.
    func runCase(seed: UInt64, driver: String, kvtool: String, figures: inout Figures) throws -> String? {
        let root = dir.path + "/case-\(seed)"
        let storePath = root + "/" + Self.group + "/Store"
        let dataFile = storePath + "/data.mdb"
        defer { try? FileManager.default.removeItem(atPath: root) }
        var databases: [String] = []
        do {
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            let container = try SharedContainer(groupIdentifier: Self.group, root: root)
            for name in Self.collections { _ = try container.store.collection(name, key: ByteKey.self, codec: RawBytesCodec()) }
            databases = Self.collections.map { Catalog.collectionDatabase($0) }
        }
        var rng = SplitMix(seed: seed)
        let steps = 1 + Int(rng.next() % 40)
        let generated = try run(driver, [storePath, String(seed), String(steps)] + databases, timeout: 300)
        guard generated.status == 0 else { return "the generator failed: \(generated.stderr)" }
        let fields = generated.stdout.split(whereSeparator: \.isWhitespace).map(String.init)
        for pair in stride(from: 0, to: fields.count - 1, by: 2) where !["last-page", "file-pages"].contains(fields[pair]) {
            figures.driver[fields[pair], default: 0] += Int(fields[pair + 1]) ?? 0
        }
        figures.cases += 1
        let scratch = root + "/copy"
        let tool = { (arguments: [String]) in try run(kvtool, arguments + ["--root", root, "--group", Self.group], timeout: 300) }

        // As committed.
        let committed = try LMDBPrograms.lmdbReads(storePath, scratch: scratch)
        figures.states += 1
        guard committed.readable else { return "LMDB's tools cannot read what LMDB committed: \(committed.detail)" }
        let check = try tool(["check"])
        guard check.status == 0 else { return "kvtool check refused what LMDB's tools read: \(check.stderr)\(check.stdout)" }
        let dump = try tool(["dump", "--format", "mdb"])
        guard dump.status == 0, dump.stdout == committed.dump else {
            return "kvtool dump --format mdb differs from mdb_dump -a (status \(dump.status)): \(dump.stderr.prefix(300))"
        }
        let reach = try LMDBPrograms.reach(dataFile)
        if reach.filePages <= reach.lastPage { figures.shortAccepted += 1 }
        // Every page the walk does not reach, zeroed in a copy: LMDB's tools read the copy as they read
        // the store, so the walk misses no page they read (a truncation could then only cut pages
        // nothing reads).
        let zeroedStore = root + "/zeroed"
        figures.zeroedPages += try LMDBPrograms.zeroingUnreached(dataFile, into: zeroedStore, reach: reach)
        let zeroed = try LMDBPrograms.lmdbReads(zeroedStore, scratch: scratch)
        guard zeroed.readable, zeroed.dump == committed.dump, zeroed.stat == committed.stat, zeroed.compacted == committed.compacted else {
            return "with the pages KVStore's walk does not reach zeroed, LMDB's tools "
                + (!zeroed.readable ? "fail: \(zeroed.detail)" : zeroed.dump != committed.dump ? "print another dump"
                   : zeroed.stat != committed.stat ? "print another mdb_stat -ffa" : "write another compacted copy")
        }
        try? FileManager.default.removeItem(atPath: zeroedStore)
        guard let highest = reach.highest else { return nil }

        // Cut from the end down, each cut shorter than the last.
        var cuts: [(pages: UInt64, readable: Bool)] = []
        if highest + 1 < reach.filePages { cuts.append((highest + 1, true)) }
        cuts.append((highest, false))
        if StressLevel.isLong && highest + 2 < reach.filePages { cuts.append((highest + 2 + rng.next() % (reach.filePages - highest - 2), true)) }
        if highest > 2 { cuts.append((2 + rng.next() % (highest - 2), false)) }
        for cut in cuts.sorted(by: { $0.pages > $1.pages }) {
            guard truncate(dataFile, off_t(cut.pages) * off_t(reach.pageSize)) == 0 else { return "truncate: errno \(errno)" }
            figures.states += 1
            let lmdb = try LMDBPrograms.lmdbReads(storePath, scratch: scratch)
            let state = "cut to \(cut.pages) pages (the highest page reached is \(highest))"
            if lmdb.readable != cut.readable {
                return "\(state): LMDB's tools " + (lmdb.readable ? "read it, but KVStore's walk reaches page \(highest)" : "fail: \(lmdb.detail)")
            }
            // KVStore's open, in this process: it reads no page through the map, so a wrong answer is
            // reported here rather than fatal; what it accepts, kvtool check then reads whole.
            var readOnly = Store.Options()
            readOnly.readOnly = true
            let opened = Result { _ = try Store(directory: storePath, options: readOnly) }
            if cut.readable {
                if case .failure(let error) = opened { return "\(state): LMDB's tools read it, KVStore refused it: \(error)" }
                let check = try tool(["check"])
                guard check.status == 0 else { return "\(state): LMDB's tools read it, kvtool check refused: \(check.stderr)" }
                figures.cutsAccepted += 1
            } else {
                guard case .failure(let error) = opened, case KVStoreError.truncatedStore(dataFile, _, let missing, _) = error,
                      missing <= Int(highest), "\(error)".split(separator: "\n").count == 1 else {
                    return "\(state): LMDB's tools fail (\(lmdb.detail)), KVStore's open: \(opened)"
                }
                if lmdb.detail.contains("status 7 ") || lmdb.detail.contains("status 11 ") { figures.toolSignals += 1 }
                figures.cutsRefused += 1
            }
        }
        return nil
    }
}
