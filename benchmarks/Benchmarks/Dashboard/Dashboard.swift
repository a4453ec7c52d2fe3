// The dashboard path over one year of data (DESIGN.md's dataset), and the work around it, done four
// ways on identical data: KVStore, GRDB.swift 7.10.0 on SQLite in WAL mode (idiomatic: a table with the
// cache fields as columns, a range query), Foundation's UserDefaults (defaults only) and raw C LMDB (the
// floor). Names are "<workload> · <implementation>", which scripts/bench-ratios.py pairs up.
import Benchmark
import CLMDB
import Foundation
import GRDB
import KVStore
import SyncKit
import Workloads

let benchmarks: @Sendable () -> Void = {
    let configuration = Benchmark.Configuration(metrics: [.wallClock, .mallocCountTotal], maxDuration: .seconds(2))
    Benchmark.defaultConfiguration = configuration
    let today = ChecklistDataset.today

    // MARK: Dashboard

    for (label, periods) in DashboardPeriod.allCases.map({ ($0.rawValue, [$0]) }) + [("all five periods", DashboardPeriod.allCases)] {
        Benchmark("Dashboard \(label) · KVStore") { benchmark in
            let fixture = Fixture.shared
            for _ in benchmark.scaledIterations {
                blackHole(try fixture.store.read { tx in try fixture.checklist.dashboard(periods, today: today, in: tx) })
            }
        }
        Benchmark("Dashboard \(label) · GRDB") { benchmark in
            let fixture = Fixture.shared
            for _ in benchmark.scaledIterations {
                blackHole(try fixture.sqlite.dashboard(periods, today: today))
            }
        }
        Benchmark("Dashboard \(label) · raw LMDB") { benchmark in
            let fixture = Fixture.shared
            for _ in benchmark.scaledIterations {
                blackHole(fixture.raw.dashboard(periods, today: today))
            }
        }
    }

    // MARK: Full records

    Benchmark("Year of full records fetched and decoded · KVStore") { benchmark in
        let fixture = Fixture.shared
        for _ in benchmark.scaledIterations {
            blackHole(try fixture.checklist.records.entries((today - 364)...today))
        }
    }
    Benchmark("Year of full records fetched and decoded · GRDB") { benchmark in
        let fixture = Fixture.shared
        for _ in benchmark.scaledIterations {
            blackHole(try fixture.sqlite.pool.read { db in
                try SQLiteRecord.filter(Column("day") >= (today - 364).dayNumber && Column("day") <= today.dayNumber)
                    .order(Column("day")).fetchAll(db)
            })
        }
    }

    // MARK: Defaults

    // The keys are made before measuring: building a String per get would be timed too.
    let keys = (0..<100).map { "key-\($0)" }
    Benchmark("Defaults get · KVStore") { benchmark in
        let defaults = Fixture.shared.defaults
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations { blackHole(try defaults.string(forKey: keys[i % 100])) }
    }
    Benchmark("Defaults get · UserDefaults") { benchmark in
        let defaults = Fixture.shared.userDefaults
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations { blackHole(defaults.string(forKey: keys[i % 100])) }
    }
    Benchmark("Defaults set · KVStore") { benchmark in
        let defaults = Fixture.shared.defaults
        for i in benchmark.scaledIterations { try defaults.set("value-\(i)", forKey: "key-\(i % 100)") }
    }
    Benchmark("Defaults set · UserDefaults") { benchmark in
        let defaults = Fixture.shared.userDefaults
        for i in benchmark.scaledIterations { defaults.set("value-\(i)", forKey: "key-\(i % 100)") }
    }

    // MARK: Saving one record

    /// Saves today's record again and again (one score changing) through `saver`, which is built once
    /// per process, already holding the whole year: steady-state saves, not the first save into a new
    /// store (which writes past the end of the file), and no environment left open per sample.
    func saveBenchmark(_ name: String, _ saver: @escaping @Sendable () throws -> (DailyRecord) throws -> Void) {
        Benchmark(name, configuration: .init(metrics: [.wallClock, .mallocCountTotal], maxDuration: .seconds(2), maxIterations: 500)) { benchmark in
            let save = try saver()
            var record = Fixture.records[Fixture.records.count - 1]
            benchmark.startMeasurement()
            for i in benchmark.scaledIterations {
                record.scores["think.1"] = 1 + i % 5
                try save(record)
            }
        }
    }

    for (mode, durability, synchronous) in [("durable", Durability.durable, "FULL"), ("no meta sync", .noMetaSync, "NORMAL")] {
        saveBenchmark("Save one DailyRecord, \(mode) · KVStore") { try Savers.kvstore(durability).save }
        saveBenchmark("Save one DailyRecord, \(mode) · raw LMDB") {
            // The same bytes KVStore commits for the record and its summary, in one transaction with
            // the same sync flags (history aside), into a table seeded with the same year.
            let raw = try Savers.raw(durability)
            return { record in try raw.save(try CBOREncoder().encode(record), DailySummary(record), day: record.day) }
        }
        saveBenchmark("Save one DailyRecord, \(mode) · GRDB") {
            let saver = try Savers.sqlite(synchronous)
            return { record in try saver.save(record) }
        }
    }

    // MARK: Change notifications

    // Commit (with history) → post → inotify → an observer thread wakes. In one process: package-benchmark
    // runs benchmarks in-process, so the cross-process figure comes from HistoryProcessTests instead.
    Benchmark("Commit to notification wakeup · KVStore", configuration: .init(metrics: [.wallClock], maxDuration: .seconds(2), maxIterations: 2_000)) { benchmark in
        let container = try SharedContainer(groupIdentifier: "group.com.example.notify", root: try Fixture.temporaryDirectory("notify"),
                                            options: { var o = SharedContainer.Options(); o.store.durability = .noSync; return o }())
        _ = try History.attach(to: container)
        let defaults = try container.defaults()
        let wakes = try ChangeNotifier(directory: container.notifyDirectory).notifications()
        let woke = DispatchSemaphore(value: 0)
        let observer = Task { for await _ in wakes { woke.signal() } }
        defer { observer.cancel() }
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            try defaults.set(i, forKey: "seq")
            guard woke.wait(timeout: .now() + 5) == .success else { throw KVStoreError.io(operation: "wait 5 s for a wakeup on", path: container.notifyDirectory, errno: ETIMEDOUT) }
        }
    }

    // MARK: Decoding and encoding one record (each apart; the input is made before measuring)

    Benchmark("Decode one DailyRecord · KVStore CBOR") { benchmark in
        let bytes = Fixture.recordCBOR
        let decoder = CBORDecoder()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { blackHole(try decoder.decode(DailyRecord.self, from: bytes)) }
    }
    Benchmark("Decode one DailyRecord · JSONDecoder") { benchmark in
        let data = Fixture.recordJSON
        let decoder = JSONDecoder()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { blackHole(try decoder.decode(DailyRecord.self, from: data)) }
    }
    Benchmark("Encode one DailyRecord · KVStore CBOR") { benchmark in
        let record = Fixture.records[Fixture.records.count - 1]
        let encoder = CBOREncoder()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { blackHole(try encoder.encode(record)) }
    }
    Benchmark("Encode one DailyRecord · JSONEncoder") { benchmark in
        let record = Fixture.records[Fixture.records.count - 1]
        let encoder = JSONEncoder()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { blackHole(try encoder.encode(record)) }
    }
}

/// The savers of the save benchmarks, each made once per process (lazily, so that other benchmarks do
/// not pay for them) and kept open.
enum Savers {
    nonisolated(unsafe) private static let kvstoreDurable = Result { try KVStoreSaver(durability: .durable) }
    nonisolated(unsafe) private static let kvstoreNoMetaSync = Result { try KVStoreSaver(durability: .noMetaSync) }
    nonisolated(unsafe) private static let rawDurable = Result { try RawLMDB.seededForSaving(flags: 0) }
    nonisolated(unsafe) private static let rawNoMetaSync = Result { try RawLMDB.seededForSaving(flags: UInt32(MDB_NOMETASYNC)) }
    nonisolated(unsafe) private static let sqliteFull = Result { try SQLiteChecklist(synchronous: "FULL") }
    nonisolated(unsafe) private static let sqliteNormal = Result { try SQLiteChecklist(synchronous: "NORMAL") }

    static func kvstore(_ durability: Durability) throws -> KVStoreSaver {
        try (durability == .durable ? kvstoreDurable : kvstoreNoMetaSync).get()
    }
    static func raw(_ durability: Durability) throws -> RawLMDB {
        try (durability == .durable ? rawDurable : rawNoMetaSync).get()
    }
    static func sqlite(_ synchronous: String) throws -> SQLiteChecklist {
        try (synchronous == "FULL" ? sqliteFull : sqliteNormal).get()
    }
}

// MARK: - Fixtures

/// The one-year dataset in each implementation, built once per benchmark process.
final class Fixture: @unchecked Sendable {
    static let records = ChecklistDataset.records()
    static let shared = try! Fixture()
    /// The last record (the fullest day) as KVStore and JSONEncoder store it.
    static let recordCBOR = try! CBOREncoder().encode(records[records.count - 1])
    static let recordJSON = try! JSONEncoder().encode(records[records.count - 1])

    let directory: String
    let store: Store
    let checklist: ChecklistStore
    let defaults: SharedDefaults
    let sqlite: SQLiteChecklist
    let raw: RawLMDB
    let userDefaults: UserDefaults

    /// A new directory under the system's temporary directory.
    static func temporaryDirectory(_ name: String) throws -> String {
        var template = Array((NSTemporaryDirectory() + "/kvstore-bench-\(name)-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw KVStoreError.io(operation: "mkdtemp", path: name, errno: errno) }
        return String(cString: made)
    }

    init() throws {
        directory = try Self.temporaryDirectory("data")
        let container = try SharedContainer(groupIdentifier: "group.com.example.bench", root: directory)
        store = container.store
        let app = try ChecklistWidgetFlow.App(container: container)
        checklist = app.checklist
        try app.save(Self.records)
        let defaults = try container.defaults()
        try container.store.write { tx in for i in 0..<100 { try defaults.set("value-\(i)", forKey: "key-\(i)", in: tx) } }
        self.defaults = defaults
        sqlite = try SQLiteChecklist(path: directory + "/checklist.sqlite", synchronous: "NORMAL")
        try sqlite.save(Self.records)
        raw = try RawLMDB(directory: directory + "/raw", records: Self.records)
        userDefaults = UserDefaults(suiteName: "kvstore-bench-\(getpid())")!
        for i in 0..<100 { userDefaults.set("value-\(i)", forKey: "key-\(i)") }
        // The year on disk, each compacted: KVStore's copy of the whole store, SQLite after VACUUM.
        let compacted = try store.copy(toNewFile: directory + "/compacted.mdb").size
        try sqlite.pool.writeWithoutTransaction { db in try db.execute(sql: "VACUUM; PRAGMA wal_checkpoint(TRUNCATE)") }
        let sqliteSize = (try FileManager.default.attributesOfItem(atPath: directory + "/checklist.sqlite")[.size] as? Int) ?? 0
        // package-benchmark shows no output of ours, so the figure goes to benchmarks/.build/sizes.txt.
        let sizes = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/sizes.txt")
        try Data("one year on disk, compacted: KVStore \(compacted) bytes (records, summaries, history, catalog); SQLite \(sqliteSize) bytes (after VACUUM)\n".utf8)
            .write(to: sizes)
        // Every implementation answers the same.
        let reference = DashboardReference.dashboard(Self.records, today: ChecklistDataset.today)
        let checklist = self.checklist
        let ours = try store.read { tx in try checklist.dashboard(today: ChecklistDataset.today, in: tx) }
        precondition(ours.periods.map(\.records) == reference.periods.map(\.records) && ours.streak == reference.streak)
        let theirs = try sqlite.dashboard(DashboardPeriod.allCases, today: ChecklistDataset.today)
        precondition(theirs.periods.map(\.trends) == ours.periods.map(\.trends) && theirs.streak == ours.streak)
        precondition(raw.dashboard(DashboardPeriod.allCases, today: ChecklistDataset.today).periods.map(\.trends) == ours.periods.map(\.trends))
    }
}

/// Saving in KVStore as the app does: record + derived summary + history, one transaction.
struct KVStoreSaver {
    let store: Store
    let checklist: ChecklistStore

    init(durability: Durability) throws {
        var options = SharedContainer.Options()
        options.store.durability = durability
        let container = try SharedContainer(groupIdentifier: "group.com.example.save", root: try Fixture.temporaryDirectory("save"), options: options)
        let app = try ChecklistWidgetFlow.App(container: container)
        store = container.store
        checklist = app.checklist
        try store.write { tx in for r in Fixture.records { try checklist.records.put(r, forKey: r.day, in: tx) } }
    }

    func save(_ record: DailyRecord) throws {
        try store.write(author: "app") { tx in try checklist.records.put(record, forKey: record.day, in: tx) }
    }
}

// MARK: - GRDB

/// The checklist as a GRDB user would store it: one row per day, scores and memos as JSON, the cache
/// fields as columns.
struct SQLiteRecord: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "dailyRecord"
    var day: Int32
    var scores: [String: Int]
    var memos: [String: String]
    var perceive: Double?
    var think: Double?
    var execute: Double?
    var engage: Double?
    var sustain: Double?
    var totalAverage: Double
    var inputCount: Int

    init(_ record: DailyRecord) {
        day = record.day.dayNumber
        scores = record.scores
        memos = record.memos
        perceive = record.cachedCategoryAverages["perceive"]
        think = record.cachedCategoryAverages["think"]
        execute = record.cachedCategoryAverages["execute"]
        engage = record.cachedCategoryAverages["engage"]
        sustain = record.cachedCategoryAverages["sustain"]
        totalAverage = record.cachedTotalAverage
        inputCount = record.cachedInputCount
    }
}

final class SQLiteChecklist: @unchecked Sendable {
    let pool: DatabasePool

    convenience init(synchronous: String) throws {
        try self.init(path: try Fixture.temporaryDirectory("sqlite") + "/checklist.sqlite", synchronous: synchronous)
        try save(Fixture.records)
    }

    init(path: String, synchronous: String) throws {
        var configuration = Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = \(synchronous)") }
        pool = try DatabasePool(path: path, configuration: configuration)  // WAL
        try pool.write { db in
            try db.create(table: SQLiteRecord.databaseTableName, ifNotExists: true) { t in
                t.primaryKey("day", .integer)
                t.column("scores", .jsonText).notNull()
                t.column("memos", .jsonText).notNull()
                for c in ["perceive", "think", "execute", "engage", "sustain"] { t.column(c, .double) }
                t.column("totalAverage", .double).notNull()
                t.column("inputCount", .integer).notNull()
            }
        }
    }

    func save(_ records: [DailyRecord]) throws {
        try pool.write { db in for r in records { try SQLiteRecord(r).upsert(db) } }
    }

    func save(_ record: DailyRecord) throws {
        try pool.write { db in try SQLiteRecord(record).upsert(db) }
    }

    /// The same computation as KVStore's, from a range query over the cache columns.
    func dashboard(_ periods: [DashboardPeriod], today: LogicalDay) throws -> Dashboard {
        let longest = periods.map(\.days).max() ?? 0
        return try pool.read { db in
            var rows: [DailySummary] = []
            let cursor = try Row.fetchCursor(db, sql: """
                SELECT day, inputCount, totalAverage, perceive, think, execute, engage, sustain
                FROM dailyRecord WHERE day BETWEEN ? AND ? ORDER BY day
                """, arguments: [(today - (longest - 1)).dayNumber, today.dayNumber])
            while let row = try cursor.next() {
                rows.append(DailySummary(dayNumber: row[0], inputCount: row[1], totalAverage: row[2],
                                         perceive: row[3] ?? .nan, think: row[4] ?? .nan, execute: row[5] ?? .nan,
                                         engage: row[6] ?? .nan, sustain: row[7] ?? .nan))
            }
            var accumulator = Streak.Accumulator()
            let days = try Int32.fetchCursor(db, sql: "SELECT day FROM dailyRecord ORDER BY day")
            while let day = try days.next() { accumulator.add(LogicalDay(dayNumber: day)) }
            return Dashboard(periods: periods.map { period in
                let first = today.dayNumber - Int32(period.days - 1)
                let start = rows.firstIndex { $0.dayNumber >= first } ?? rows.count
                return DashboardPeriodResult(period, summaries: rows[start...])
            }, streak: accumulator.streak)
        }
    }
}

// MARK: - Raw C LMDB

/// The floor: the same summaries under the same keys in a plain LMDB environment, read with
/// `mdb_cursor_get` in a renewed read transaction, computed by the same code.
final class RawLMDB: @unchecked Sendable {
    let env: OpaquePointer
    let dbi: MDB_dbi
    let txn: OpaquePointer

    let recordsDBI: MDB_dbi

    init(directory: String, records: [DailyRecord], flags: UInt32 = 0) throws {
        mkdir(directory, 0o700)
        var env: OpaquePointer?
        try Self.check(mdb_env_create(&env))
        try Self.check(mdb_env_set_maxdbs(env, 4))
        try Self.check(mdb_env_set_mapsize(env, 64 << 20))
        try Self.check(mdb_env_open(env, directory, UInt32(MDB_NOTLS) | flags, 0o600))
        self.env = env!
        var write: OpaquePointer?
        try Self.check(mdb_txn_begin(env, nil, 0, &write))
        var dbi = MDB_dbi(), recordsDBI = MDB_dbi()
        try Self.check(mdb_dbi_open(write, "summaries", UInt32(MDB_CREATE), &dbi))
        try Self.check(mdb_dbi_open(write, "records", UInt32(MDB_CREATE), &recordsDBI))
        for record in records {
            var summary = DailySummary(record)
            var key = record.day.encodedKey
            try key.withUnsafeMutableBytes { k in
                try withUnsafeMutableBytes(of: &summary) { v in
                    var mk = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                    var mv = MDB_val(mv_size: v.count, mv_data: v.baseAddress)
                    try Self.check(mdb_put(write, dbi, &mk, &mv, 0))
                }
            }
        }
        try Self.check(mdb_txn_commit(write))
        self.dbi = dbi
        self.recordsDBI = recordsDBI
        var read: OpaquePointer?
        try Self.check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &read))
        mdb_txn_reset(read)
        txn = read!
    }

    static func check(_ rc: Int32) throws { if rc != MDB_SUCCESS { throw LMDBError(rawValue: rc) } }

    /// A new environment holding the year as KVStore holds it: every record's CBOR and its summary.
    static func seededForSaving(flags: UInt32) throws -> RawLMDB {
        let raw = try RawLMDB(directory: Fixture.temporaryDirectory("raw-save"), records: Fixture.records, flags: flags)
        for record in Fixture.records { try raw.save(try CBOREncoder().encode(record), DailySummary(record), day: record.day) }
        return raw
    }

    /// Puts a record's bytes and its summary under the day's key in one committed transaction.
    func save(_ bytes: [UInt8], _ summary: DailySummary, day: LogicalDay) throws {
        var write: OpaquePointer?
        try Self.check(mdb_txn_begin(env, nil, 0, &write))
        var key = day.encodedKey
        var value = bytes
        var summary = summary
        do {
            try key.withUnsafeMutableBytes { k in
                var mk = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                try value.withUnsafeMutableBytes { v in
                    var mv = MDB_val(mv_size: v.count, mv_data: v.baseAddress)
                    try Self.check(mdb_put(write, recordsDBI, &mk, &mv, 0))
                }
                try withUnsafeMutableBytes(of: &summary) { v in
                    var mv = MDB_val(mv_size: v.count, mv_data: v.baseAddress)
                    try Self.check(mdb_put(write, dbi, &mk, &mv, 0))
                }
            }
        } catch {
            mdb_txn_abort(write)
            throw error
        }
        try Self.check(mdb_txn_commit(write))
    }

    func dashboard(_ periods: [DashboardPeriod], today: LogicalDay) -> Dashboard {
        let longest = periods.map(\.days).max() ?? 0
        mdb_txn_renew(txn)
        defer { mdb_txn_reset(txn) }
        var cursor: OpaquePointer?
        mdb_cursor_open(txn, dbi, &cursor)
        defer { mdb_cursor_close(cursor) }
        var rows: [DailySummary] = []
        rows.reserveCapacity(longest)
        var start = (today - (longest - 1)).encodedKey
        let end = today.dayNumber
        var key = MDB_val(), value = MDB_val()
        var rc = start.withUnsafeMutableBytes { s -> Int32 in
            key = MDB_val(mv_size: s.count, mv_data: s.baseAddress)
            return mdb_cursor_get(cursor, &key, &value, MDB_SET_RANGE)
        }
        while rc == MDB_SUCCESS {
            let summary = UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size).loadUnaligned(as: DailySummary.self)
            if summary.dayNumber > end { break }
            rows.append(summary)
            rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
        }
        var accumulator = Streak.Accumulator()
        rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
        while rc == MDB_SUCCESS {
            accumulator.add(LogicalDay(dayNumber: UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size).loadUnaligned(as: DailySummary.self).dayNumber))
            rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
        }
        return Dashboard(periods: periods.map { period in
            let first = today.dayNumber - Int32(period.days - 1)
            let start = rows.firstIndex { $0.dayNumber >= first } ?? rows.count
            return DashboardPeriodResult(period, summaries: rows[start...])
        }, streak: accumulator.streak)
    }
}
