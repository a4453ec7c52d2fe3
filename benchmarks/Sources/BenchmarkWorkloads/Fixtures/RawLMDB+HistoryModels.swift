import CLMDB
import KVStore
import Workloads

/// Three designs of history, built in plain C LMDB on top of the raw saver, so that what each one costs
/// a durable commit shows beside the raw put it is measured against (issue 39: the floor of a save with
/// history). Each appends, in the save's own transaction, one entry of the size KVStore writes for
/// this save (130 bytes, keyed by its 8-byte big-endian token), after reading the last token from the
/// database (as any process must, since another may have written since). None is KVStore; they
/// measure designs, not code.
enum HistoryModel: String, CaseIterable, Sendable {
    /// One B-tree of entries, as KVStore keeps `_history`: a commit dirties its last leaf and the
    /// branch above it.
    case bTree = "raw LMDB + history B-tree"
    /// A one-page "tail" database that commits append to, moved into the B-tree (with `MDB_APPEND`) by
    /// the commit that finds it holding ``tailCapacity`` entries.
    case tail = "raw LMDB + history tail"
    /// The tail kept in LMDB's main database, under keys that begin with a NUL byte (no database name
    /// can), next to the records of the named databases, which every commit rewrites anyway.
    case mainDatabase = "raw LMDB + history in the main DB"

    /// Entries the tail holds before a commit moves them: 24 of 130 bytes fill most of a 4 KiB page.
    static let tailCapacity = 24
    /// In the main database the tail shares its page with the names of the databases: 16 entries.
    static let mainCapacity = 16
    static let entrySize = 130
}

extension RawLMDB {
    private static let bTree = Result { try RawLMDB.historyModel(.bTree) }
    private static let tail = Result { try RawLMDB.historyModel(.tail) }
    private static let mainDatabase = Result { try RawLMDB.historyModel(.mainDatabase) }

    /// A durable saver that also records history the way `model` does, seeded with the year and with
    /// one entry per record (as KVStore's saver, whose seeding transaction records 343 entries).
    static func saver(_ model: HistoryModel) throws -> RawLMDB {
        switch model {
        case .bTree: try bTree.get()
        case .tail: try tail.get()
        case .mainDatabase: try mainDatabase.get()
        }
    }

    private static func historyModel(_ model: HistoryModel) throws -> RawLMDB {
        let raw = try RawLMDB("raw-history", databases: ["summaries", "records", "months", "history", "tail"], flags: 0)
        let encoder = CBOREncoder()
        try raw.write { txn in
            for record in Dataset.records {
                try raw.put(try encoder.encode(record), DailySummary(record), day: record.day, in: txn)
                try raw.appendHistory(model, in: txn)
            }
        }
        return raw
    }

    /// The record, its summary and month, and one history entry, in one durable commit.
    func save(_ bytes: [UInt8], _ summary: DailySummary, day: LogicalDay, history model: HistoryModel) throws {
        try write { txn in
            try put(bytes, summary, day: day, in: txn)
            try appendHistory(model, in: txn)
        }
    }

    private func appendHistory(_ model: HistoryModel, in txn: OpaquePointer) throws {
        let entry = [UInt8](repeating: 0xA9, count: HistoryModel.entrySize)
        switch model {
        case .bTree:
            let token = try Self.lastToken(txn, database("history")) + 1
            try Self.putEntry(txn, database("history"), key: Self.tokenKey(token), entry, flags: UInt32(MDB_APPEND))
        case .tail:
            let tail = database("tail")
            var stat = MDB_stat()
            try Self.check(mdb_stat(txn, tail, &stat))
            let last = stat.ms_entries > 0 ? try Self.lastToken(txn, tail) : try Self.lastToken(txn, database("history"))
            if stat.ms_entries >= HistoryModel.tailCapacity {
                try moveTail(from: tail, prefix: [], in: txn)
            }
            try Self.putEntry(txn, tail, key: Self.tokenKey(last + 1), entry, flags: UInt32(MDB_APPEND))
        case .mainDatabase:
            let main = MDB_dbi(1) // MAIN_DBI
            let (last, count) = try Self.mainTail(txn)
            let token = count > 0 ? last : try Self.lastToken(txn, database("history"))
            if count >= HistoryModel.mainCapacity {
                try moveTail(from: main, prefix: [0], in: txn)
            }
            try Self.putEntry(txn, main, key: [0] + Self.tokenKey(token + 1), entry, flags: 0)
        }
    }

    /// Moves every entry of the tail (keys beginning with `prefix` in `source`) to the end of the B-tree.
    private func moveTail(from source: MDB_dbi, prefix: [UInt8], in txn: OpaquePointer) throws {
        var moving: [(key: [UInt8], value: [UInt8])] = []
        var cursor: OpaquePointer?
        try Self.check(mdb_cursor_open(txn, source, &cursor))
        var key = MDB_val(), value = MDB_val()
        var rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
        while rc == MDB_SUCCESS {
            let keyBytes = [UInt8](UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size))
            guard keyBytes.starts(with: prefix) else { break }
            moving.append((keyBytes, [UInt8](UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size))))
            rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
        }
        mdb_cursor_close(cursor)
        guard rc == MDB_SUCCESS || rc == MDB_NOTFOUND else { throw LMDBError(rawValue: rc) }
        for (key, value) in moving {
            try Self.putEntry(txn, database("history"), key: Array(key.dropFirst(prefix.count)), value, flags: UInt32(MDB_APPEND))
            try key.withUnsafeBytes { k in
                var kv = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                try Self.check(mdb_del(txn, source, &kv, nil))
            }
        }
    }

    /// The main database's tail: its last token and how many entries it holds.
    private static func mainTail(_ txn: OpaquePointer) throws -> (last: UInt64, count: Int) {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(txn, MDB_dbi(1), &cursor))
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val(), value = MDB_val()
        var rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
        var last: UInt64 = 0, count = 0
        while rc == MDB_SUCCESS {
            let bytes = UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size)
            guard bytes.count == 9, bytes[0] == 0 else { break }
            last = bytes.dropFirst().reduce(0) { $0 << 8 | UInt64($1) }
            count += 1
            rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
        }
        guard rc == MDB_SUCCESS || rc == MDB_NOTFOUND else { throw LMDBError(rawValue: rc) }
        return (last, count)
    }

    private static func lastToken(_ txn: OpaquePointer, _ dbi: MDB_dbi) throws -> UInt64 {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(txn, dbi, &cursor))
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val(), value = MDB_val()
        let rc = mdb_cursor_get(cursor, &key, &value, MDB_LAST)
        if rc == MDB_NOTFOUND { return 0 }
        try check(rc)
        return UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size).reduce(0) { $0 << 8 | UInt64($1) }
    }

    private static func tokenKey(_ token: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: token >> (56 - 8 * $0)) }
    }

    private static func putEntry(_ txn: OpaquePointer, _ dbi: MDB_dbi, key: [UInt8], _ entry: [UInt8], flags: UInt32) throws {
        try key.withUnsafeBytes { k in
            try entry.withUnsafeBytes { v in
                var kv = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                var vv = MDB_val(mv_size: v.count, mv_data: UnsafeMutableRawPointer(mutating: v.baseAddress))
                try check(mdb_put(txn, dbi, &kv, &vv, flags))
            }
        }
    }
}
