import Foundation
import GRDB
import KVStore
import Workloads
/// The year in GRDB.swift 7.10.0 on SQLite in WAL mode, idiomatic: a table with the cache fields as
/// columns, read with range queries.
final class SQLiteChecklist: @unchecked Sendable {
    /// The one the read workloads share (synchronous = NORMAL), checked and vacuumed.
    private static let reading = Result { () throws -> SQLiteChecklist in
        let directory = try Dataset.temporaryDirectory("sqlite")
        let path = directory + "/checklist.sqlite"
        let sqlite = try SQLiteChecklist(path: path, synchronous: "NORMAL")
        Dataset.check(try sqlite.dashboard(DashboardPeriod.allCases, today: Dataset.today), "GRDB")
        try sqlite.pool.writeWithoutTransaction { db in try db.execute(sql: "VACUUM; PRAGMA wal_checkpoint(TRUNCATE)") }
        let size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        try DiskSizes.record("sqlite", bytes: size)
        return sqlite
    }
    /// The savers, one per `synchronous` mode, each with a database of its own.
    private static let full = Result { try SQLiteChecklist(path: try Dataset.temporaryDirectory("sqlite-save") + "/checklist.sqlite", synchronous: "FULL") }
    private static let normal = Result { try SQLiteChecklist(path: try Dataset.temporaryDirectory("sqlite-save") + "/checklist.sqlite", synchronous: "NORMAL") }

    static func shared() throws -> SQLiteChecklist { try reading.get() }
    static func saver(synchronous: String) throws -> SQLiteChecklist { try (synchronous == "FULL" ? full : normal).get() }

    let pool: DatabasePool

    /// A new database at `path` holding the year.
    private init(path: String, synchronous: String) throws {
        pool = try DatabasePool(path: path)  // WAL
        // DatabasePool sets synchronous = NORMAL on its writer after `prepareDatabase` has run, so a
        // `prepareDatabase` pragma would be overridden: set it on the writer (the connection that
        // commits) once the pool is open, and check that it holds.
        let level = try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
            return try Int.fetchOne(db, sql: "PRAGMA synchronous")
        }
        precondition(level == ["OFF": 0, "NORMAL": 1, "FULL": 2][synchronous], "SQLite did not take synchronous = \(synchronous)")
        try pool.write { db in
            try db.create(table: SQLiteRecord.databaseTableName, ifNotExists: true) { t in
                t.primaryKey("day", .integer)
                t.column("scores", .jsonText).notNull()
                t.column("memos", .jsonText).notNull()
                for c in ["perceive", "think", "execute", "engage", "sustain"] { t.column(c, .double) }
                t.column("totalAverage", .double).notNull()
                t.column("inputCount", .integer).notNull()
            }
            for r in Dataset.records { try SQLiteRecord(r).upsert(db) }
        }
    }

    func save(_ record: DailyRecord) throws {
        try pool.write { db in try SQLiteRecord(record).upsert(db) }
    }

    /// The days `range` covers, full records, in day order.
    func records(_ range: ClosedRange<LogicalDay>) throws -> [SQLiteRecord] {
        try pool.read { db in
            try SQLiteRecord.filter(Column("day") >= range.lowerBound.dayNumber && Column("day") <= range.upperBound.dayNumber)
                .order(Column("day")).fetchAll(db)
        }
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
