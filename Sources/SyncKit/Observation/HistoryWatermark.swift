import KVStore

/// Reads ``History``'s entries to tell whether commits since a token touched a ``ReadSet``, without
/// attaching a `History` to the store (which would hook this process's writes).
struct HistoryWatermark: Sendable {
    let entries: KVCollection<UInt64, HistoryEntry>
    let state: KVCollection<String, UInt64>

    /// `nil` if the store has no history (yet). Call it outside every transaction.
    init?(store: Store) throws {
        guard try store.catalogEntry(forCollection: History.entriesName) != nil,
              try store.catalogEntry(forCollection: History.stateName) != nil else { return nil }
        entries = try store.collection(History.entriesName, key: UInt64.self, value: HistoryEntry.self)
        state = try store.collection(History.stateName, key: String.self, value: UInt64.self)
    }

    /// The token of the last entry recorded.
    func lastToken(in transaction: ReadTransaction) throws -> UInt64 {
        try History.lastToken(entries: entries, state: state, in: transaction)
    }

    /// Whether an entry after `token` names a target of `reads` (or the entries after `token` are
    /// purged, or `token` is ahead of the history, as after a restore: then anything may have
    /// changed), and the last token.
    func scan(since token: UInt64, affecting reads: ReadSet,
              in transaction: ReadTransaction) throws -> (changed: Bool, last: UInt64) {
        let last = try lastToken(in: transaction)
        let purged = try state.get(History.purgedThroughKey, in: transaction) ?? 0
        if token < purged || token > last { return (true, last) }
        var changed = false
        if token < last {
            try entries.forEach((token + 1)..., in: transaction) { _, entry in
                changed = reads.isAffected(by: entry.target)
                return !changed
            }
        }
        return (changed, last)
    }
}
