import CLMDB
import KVStore
import Workloads

/// The year in raw LMDB: each day's `DailySummary` (its 56 bytes) under the day's key in `summaries`
/// and, for the savers, each record's CBOR (KVStore's bytes) in `records` and each month's
/// `ChecklistMonth` in `months`, which a save computes again from the month's summaries, as KVStore does.
extension RawLMDB {
    private static let reading = Result { () throws -> RawLMDB in
        let raw = try RawLMDB.checklist("raw", flags: 0, withRecords: false)
        Dataset.check(try raw.dashboard(DashboardPeriod.allCases, today: Dataset.today), "raw LMDB")
        return raw
    }
    private static let durable = Result { try RawLMDB.checklist("raw-save", flags: 0, withRecords: true) }
    private static let noMetaSync = Result { try RawLMDB.checklist("raw-save", flags: UInt32(MDB_NOMETASYNC), withRecords: true) }

    /// The summaries the dashboard reads.
    static func shared() throws -> RawLMDB { try reading.get() }
    /// A saver with the same sync flags as KVStore's `durability`, seeded with the whole year (records
    /// and summaries), as KVStore's saver is.
    static func saver(_ durability: Durability) throws -> RawLMDB {
        try (durability == .durable ? durable : noMetaSync).get()
    }

    private static func checklist(_ name: String, flags: UInt32, withRecords: Bool) throws -> RawLMDB {
        let raw = try RawLMDB(name, databases: ["summaries", "records", "months"], flags: flags)
        let encoder = CBOREncoder()
        try raw.write { txn in
            for record in Dataset.records {
                if withRecords {
                    try raw.put(try encoder.encode(record), DailySummary(record), day: record.day, in: txn)
                } else {
                    var summary = DailySummary(record)
                    let key = record.day.encodedKey
                    try key.withUnsafeBytes { k in
                        try withUnsafeBytes(of: &summary) { v in try put(txn, raw.database("summaries"), k, v) }
                    }
                }
            }
        }
        return raw
    }

    /// Puts a record's bytes and its summary under the day's key in one committed transaction.
    func save(_ bytes: [UInt8], _ summary: DailySummary, day: LogicalDay) throws {
        try write { txn in try put(bytes, summary, day: day, in: txn) }
    }

    func put(_ bytes: [UInt8], _ summary: DailySummary, day: LogicalDay, in txn: OpaquePointer) throws {
        let key = day.encodedKey
        var summary = summary
        try key.withUnsafeBytes { k in
            try bytes.withUnsafeBytes { v in try Self.put(txn, database("records"), k, v) }
            try withUnsafeBytes(of: &summary) { v in try Self.put(txn, database("summaries"), k, v) }
        }
        try refreshMonth(of: day, in: txn)
    }

    /// Computes the month of `day` again from its summaries (one cursor scan) and puts it.
    private func refreshMonth(of day: LogicalDay, in txn: OpaquePointer) throws {
        let days = day.daysOfMonth
        var cursor: OpaquePointer?
        try Self.check(mdb_cursor_open(txn, database("summaries"), &cursor))
        defer { mdb_cursor_close(cursor) }
        var month = ChecklistMonth()
        var key = MDB_val(), value = MDB_val()
        let start = days.lowerBound.encodedKey
        var rc = start.withUnsafeBytes { s -> Int32 in
            key = MDB_val(mv_size: s.count, mv_data: UnsafeMutableRawPointer(mutating: s.baseAddress))
            return mdb_cursor_get(cursor, &key, &value, MDB_SET_RANGE)
        }
        while rc == MDB_SUCCESS {
            let summary = try Self.summary(value)
            if summary.dayNumber > days.upperBound.dayNumber { break }
            month.add(summary, on: LogicalDay(dayNumber: summary.dayNumber))
            rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
        }
        guard rc == MDB_SUCCESS || rc == MDB_NOTFOUND else { throw LMDBError(rawValue: rc) }
        let monthKey = days.lowerBound.encodedKey
        try monthKey.withUnsafeBytes { k in
            try withUnsafeBytes(of: &month) { v in try Self.put(txn, database("months"), k, v) }
        }
    }

    /// The same computation as KVStore's, from `mdb_cursor_get` over the summaries, each read from the
    /// memory map.
    func dashboard(_ periods: [DashboardPeriod], today: LogicalDay) throws -> Dashboard {
        let longest = periods.map(\.days).max() ?? 0
        let dbi = database("summaries")
        return try read { txn in
            var cursor: OpaquePointer?
            try Self.check(mdb_cursor_open(txn, dbi, &cursor))
            defer { mdb_cursor_close(cursor) }
            var rows: [DailySummary] = []
            rows.reserveCapacity(longest)
            let start = (today - (longest - 1)).encodedKey
            let end = today.dayNumber
            var key = MDB_val(), value = MDB_val()
            var rc = start.withUnsafeBytes { s -> Int32 in
                key = MDB_val(mv_size: s.count, mv_data: UnsafeMutableRawPointer(mutating: s.baseAddress))
                return mdb_cursor_get(cursor, &key, &value, MDB_SET_RANGE)
            }
            while rc == MDB_SUCCESS {
                let summary = try Self.summary(value)
                if summary.dayNumber > end { break }
                rows.append(summary)
                rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
            }
            guard rc == MDB_SUCCESS || rc == MDB_NOTFOUND else { throw LMDBError(rawValue: rc) }
            var accumulator = Streak.Accumulator()
            rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
            while rc == MDB_SUCCESS {
                accumulator.add(LogicalDay(dayNumber: try Self.summary(value).dayNumber))
                rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
            }
            guard rc == MDB_NOTFOUND else { throw LMDBError(rawValue: rc) }
            return Dashboard(periods: periods.map { period in
                let first = today.dayNumber - Int32(period.days - 1)
                let start = rows.firstIndex { $0.dayNumber >= first } ?? rows.count
                return DashboardPeriodResult(period, summaries: rows[start...])
            }, streak: accumulator.streak)
        }
    }

    private static func summary(_ value: MDB_val) throws -> DailySummary {
        guard value.mv_size == MemoryLayout<DailySummary>.size else { throw LMDBError(rawValue: MDB_CORRUPTED) }
        return UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size).loadUnaligned(as: DailySummary.self)
    }
}
