import KVStore

extension ChecklistSummaries {
    /// The streak over every record in the store, as `transaction` sees it, from the month aggregates
    /// (each month's runs at its ends and within it): a dozen reads for a year. A store whose months
    /// have not been computed yet is read day by day.
    ///
    /// ```swift
    /// let streak = try store.read { tx in try checklist.streak(in: tx) }   // current 2, longest 16
    /// ```
    ///
    /// Valid only inside the transaction's closure.
    ///
    /// - Throws: `KVStoreError.corruptValue` for a month no write could give; LMDB errors.
    public func streak(in transaction: ReadTransaction) throws -> Streak {
        let all = try monthAggregates(in: transaction)
        if all.isEmpty, try summaries.count(in: transaction) > 0 { return try streakDayByDay(in: transaction) }
        var runs = RunsAccumulator()
        for month in all { runs.add(month) }
        return runs.streak
    }

    /// The streak from one scan of `dailySummaries`, keys only, without collecting them: what
    /// ``streak(in:)`` gives, the long way.
    ///
    /// - Throws: ``KVStore/KVStoreError/invalidKey(collection:reason:)`` for a key that is not a day;
    ///   ``KVStore/LMDBError`` if the scan fails.
    public func streakDayByDay(in transaction: ReadTransaction) throws -> Streak {
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
