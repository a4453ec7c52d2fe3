import KVStore

extension ChecklistStore {
    /// The streak over every record in the store, as `transaction` sees it: one scan of the day keys
    /// of `dailySummaries` (no value is decoded).
    ///
    /// ```swift
    /// let streak = try store.read { tx in try checklist.streak(in: tx) }   // current 2, longest 16
    /// ```
    ///
    /// Valid only inside the transaction's closure.
    ///
    /// - Throws: ``KVStore/KVStoreError/invalidKey(collection:reason:)`` for a key that is not a day;
    ///   ``KVStore/LMDBError`` if the scan fails.
    public func streak(in transaction: ReadTransaction) throws -> Streak {
        var accumulator = Streak.Accumulator()
        for day in try summaries.keys(in: transaction) { accumulator.add(day) }
        return accumulator.streak
    }
}
