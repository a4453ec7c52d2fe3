extension KVCollection {
    /// A lazy cursor over the entries in `range`, in key order or reverse order. See ``KVCursor``.
    ///
    /// ```swift
    /// let latest = try store.read { tx in try records.cursor(reverse: true, in: tx).next() }
    /// ```
    ///
    /// The cursor is valid only inside `transaction`'s closure; using it afterwards throws
    /// ``KVStoreError/transactionEnded``.
    public func cursor(_ range: some KeyRangeExpression<Key>, reverse: Bool = false,
                       in transaction: ReadTransaction) throws -> KVCursor<Key, Value> {
        try cursor(range.keyRange.bytes, reverse: reverse, in: transaction)
    }

    /// A lazy cursor over every entry, in key order or reverse order. See ``KVCursor``.
    public func cursor(reverse: Bool = false, in transaction: ReadTransaction) throws -> KVCursor<Key, Value> {
        try cursor(.all, reverse: reverse, in: transaction)
    }

    func cursor(_ range: ByteRange, reverse: Bool, in transaction: ReadTransaction) throws -> KVCursor<Key, Value> {
        try transaction.checkActive()
        let cursor = try resolvedDatabase(in: transaction).map { database in
            try transaction.openCursor(database, range, reverse: reverse)
        }
        return KVCursor(collection: self, transaction: transaction, cursor: cursor)
    }
}
