internal import CLMDB

/// An LMDB cursor over one named database, valid only inside the transaction that opened it.
/// Internal: collections use it through ``ByteRange`` scans.
struct Cursor: ~Copyable {
    let pointer: OpaquePointer

    init(transaction: OpaquePointer, database: DatabaseHandle) throws {
        var cursor: OpaquePointer?
        try LMDBError.check(mdb_cursor_open(transaction, database.dbi, &cursor))
        guard let cursor else { throw LMDBError.invalid }
        pointer = cursor
    }

    deinit { mdb_cursor_close(pointer) }

    typealias Entry = (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)

    /// Runs a cursor operation. Returns `nil` at either end (`MDB_NOTFOUND`).
    private func get(_ op: MDB_cursor_op, seek: [UInt8]? = nil) throws -> Entry? {
        try Self.step(pointer, op, seek: seek)
    }

    /// Runs a cursor operation that takes no key (`MDB_NEXT`, `MDB_PREV`…): what a scan does once per
    /// entry, without the seek key's optional array.
    @inline(__always)
    static func step(_ pointer: OpaquePointer, _ op: MDB_cursor_op) throws -> Entry? {
        var key = MDB_val()
        var value = MDB_val()
        let rc = mdb_cursor_get(pointer, &key, &value, op)
        if rc == MDB_SUCCESS { return (key.buffer, value.buffer) }
        if rc == MDB_NOTFOUND { return nil }
        throw LMDBError(rawValue: rc)
    }

    /// Runs the cursor operation `op` on the LMDB cursor at `pointer` (for ``Cursor`` and
    /// ``RangeCursor``). Returns `nil` at either end (`MDB_NOTFOUND`).
    static func step(_ pointer: OpaquePointer, _ op: MDB_cursor_op, seek: [UInt8]? = nil) throws -> Entry? {
        var key = MDB_val()
        var value = MDB_val()
        let rc: Int32
        if let seek {
            rc = seek.withUnsafeBytes { buffer in
                key = MDB_val(mv_size: buffer.count, mv_data: UnsafeMutableRawPointer(mutating: buffer.baseAddress))
                return mdb_cursor_get(pointer, &key, &value, op)
            }
        } else {
            rc = mdb_cursor_get(pointer, &key, &value, op)
        }
        if rc == MDB_NOTFOUND { return nil }
        try LMDBError.check(rc)
        return (key.buffer, value.buffer)
    }

    func first() throws -> Entry? { try get(MDB_FIRST) }
    func last() throws -> Entry? { try get(MDB_LAST) }
    @inline(__always)
    func next() throws -> Entry? { try Self.step(pointer, MDB_NEXT) }
    @inline(__always)
    func previous() throws -> Entry? { try Self.step(pointer, MDB_PREV) }
    /// Positions at the first key greater than or equal to `key`.
    func seek(atOrAfter key: [UInt8]) throws -> Entry? {
        if key.isEmpty { return try first() }
        return try get(MDB_SET_RANGE, seek: key)
    }
}

extension MDB_val {
    /// The bytes LMDB points at; valid only inside the transaction.
    var buffer: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: mv_data, count: mv_size) }
}

/// Lexicographic comparison of stored bytes with a bound, as LMDB's default comparator does.
@inline(__always)
func compareBytes(_ a: UnsafeRawBufferPointer, _ b: [UInt8]) -> Int {
    b.withUnsafeBytes { b in
        let n = min(a.count, b.count)
        if n > 0, let pa = a.baseAddress, let pb = b.baseAddress {
            let c = memcmp(pa, pb, n)
            if c != 0 { return Int(c) }
        }
        return a.count - b.count
    }
}

#if canImport(Glibc)
import Glibc
#endif
