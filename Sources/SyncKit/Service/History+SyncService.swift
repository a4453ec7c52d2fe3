import KVStore

extension History {
    /// The entries after `token` not written by `author`, of `targets` (of any target when `nil`),
    /// counted up to `limit`.
    func countEntries(after token: ChangeToken, notBy author: String, of targets: Set<Mutation.Target>? = nil, limit: Int,
                      in transaction: ReadTransaction) throws -> Int {
        guard limit > 0, token < (try currentToken(in: transaction)) else { return 0 }
        var count = 0
        try entries.forEach((token.rawValue + 1)..., in: transaction) { _, entry in
            if entry.author != author && targets.map({ $0.contains(entry.target) }) ?? true { count += 1 }
            return count < limit
        }
        return count
    }

    /// The last token of the unbroken run of entries by `author` right after `token` (`token` itself
    /// when the next entry is another author's), looking at most `limit` entries ahead.
    func lastEntry(after token: ChangeToken, whileBy author: String, limit: Int, in transaction: ReadTransaction) throws -> ChangeToken {
        var through = token
        guard token < (try currentToken(in: transaction)) else { return token }
        var seen = 0
        try entries.forEach((token.rawValue + 1)..., in: transaction) { key, entry in
            guard entry.author == author else { return false }
            through = ChangeToken(rawValue: key)
            seen += 1
            return seen < limit
        }
        return through
    }
}
