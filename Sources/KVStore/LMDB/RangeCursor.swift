internal import CLMDB

/// An LMDB cursor that steps through a ``ByteRange`` one entry at a time: the step-by-step form of
/// ``ByteRange/scan(_:_:reverse:_:)``, for ``KVCursor``.
///
/// Valid only inside the transaction that opened it. That transaction closes it when it ends (see
/// ``ReadTransaction/end()``), before LMDB frees or resets the transaction, and every later step
/// throws ``KVStoreError/transactionEnded``.
final class RangeCursor {
    private var pointer: OpaquePointer?
    private let range: ByteRange
    private let reverse: Bool
    private var started = false
    private var finished = false

    typealias Entry = (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)

    init(transaction: OpaquePointer, database: DatabaseHandle, range: ByteRange, reverse: Bool) throws {
        var cursor: OpaquePointer?
        try LMDBError.check(mdb_cursor_open(transaction, database.dbi, &cursor))
        guard let cursor else { throw LMDBError.invalid }
        pointer = cursor
        self.range = range
        self.reverse = reverse
    }

    deinit { close() }

    var isClosed: Bool { pointer == nil }

    /// `mdb_cursor_close`; it must run before the transaction ends (a write transaction's cursors are
    /// freed with it).
    func close() {
        if let pointer { mdb_cursor_close(pointer) }
        pointer = nil
    }

    /// The next entry in the range, or `nil` past its end. The buffers are valid until the next step,
    /// a write in the transaction, or the end of the transaction.
    func next() throws -> Entry? {
        guard let pointer else { throw KVStoreError.transactionEnded }
        if finished { return nil }
        let entry: Entry?
        if started {
            entry = try get(pointer, reverse ? MDB_PREV : MDB_NEXT)
        } else {
            started = true
            entry = try position(pointer)
        }
        guard let entry, reverse ? range.aboveLower(entry.key) : range.belowUpper(entry.key) else {
            finished = true
            return nil
        }
        return entry
    }

    /// The first entry of the range in the cursor's direction, as ``ByteRange/scan(_:_:reverse:_:)``
    /// finds it; the caller checks the far bound.
    private func position(_ pointer: OpaquePointer) throws -> Entry? {
        if !reverse {
            var entry = try range.lower.map { try seek(pointer, atOrAfter: $0) } ?? get(pointer, MDB_FIRST)
            if let current = entry, !range.aboveLower(current.key) { entry = try get(pointer, MDB_NEXT) }
            return entry
        }
        guard let upper = range.upper, let current = try seek(pointer, atOrAfter: upper) else {
            return try get(pointer, MDB_LAST)
        }
        return range.belowUpper(current.key) ? current : try get(pointer, MDB_PREV)
    }

    private func seek(_ pointer: OpaquePointer, atOrAfter key: [UInt8]) throws -> Entry? {
        if key.isEmpty { return try get(pointer, MDB_FIRST) }
        return try get(pointer, MDB_SET_RANGE, seek: key)
    }

    private func get(_ pointer: OpaquePointer, _ op: MDB_cursor_op, seek: [UInt8]? = nil) throws -> Entry? {
        try Cursor.step(pointer, op, seek: seek)
    }
}
