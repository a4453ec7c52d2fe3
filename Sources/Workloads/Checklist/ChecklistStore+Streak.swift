import KVStore

extension ChecklistStore {
    /// The streak over every record in the store, as `transaction` sees it: one scan of
    /// `dailySummaries`, keys only, without collecting them.
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
        try summaries.forEachBytes(LogicalDay(dayNumber: .min)..., in: transaction) { key, _ in
            do {
                accumulator.add(try LogicalDay.decodeKey(key))
            } catch {
                throw KVStoreError.invalidKey(collection: summaries.name, reason: "stored key does not decode as a day: \(error)")
            }
            return true
        }
        return accumulator.streak
    }
}
