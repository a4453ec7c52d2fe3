extension ReadTransaction {
    /// Opens a cursor that this transaction closes when it ends (see ``end()``), so that no LMDB
    /// cursor outlives its transaction whatever its owner keeps.
    func openCursor(_ database: DatabaseHandle, _ range: ByteRange, reverse: Bool) throws -> RangeCursor {
        try checkActive()
        let cursor = try RangeCursor(transaction: pointer, database: database, range: range, reverse: reverse)
        // Forget the cursors closed already (their owners were released), so that a long transaction
        // opening many cursors keeps only the live ones.
        if cursors.count >= 16 { cursors.removeAll { $0.isClosed } }
        cursors.append(cursor)
        return cursor
    }

    /// Closes the cursors opened in this transaction; ``end()`` calls it.
    func closeCursors() {
        for cursor in cursors { cursor.close() }
        cursors = []
    }
}
