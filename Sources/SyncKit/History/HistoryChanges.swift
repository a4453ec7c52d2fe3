/// What ``History/changes(since:matching:)`` answers.
public enum HistoryChanges: Hashable, Sendable {
    /// The transactions recorded after the token, oldest first, with no gap and no duplicate. `next` is
    /// the token to ask from next time: it moves past entries a filter left out, so they are not read
    /// again.
    case changes([HistoryTransaction], next: ChangeToken)
    /// The history after the token was purged (`purgedThrough` is the last token removed). The consumer
    /// missed changes it can no longer read, and must resynchronise from the data itself or a snapshot,
    /// then continue from ``History/currentToken()``.
    case expired(purgedThrough: ChangeToken)

    /// The transactions, or `nil` if the token expired.
    public var transactions: [HistoryTransaction]? {
        if case .changes(let transactions, _) = self { return transactions }
        return nil
    }
}

/// Which history entries a reader wants.
public struct HistoryFilter: Hashable, Sendable {
    /// Only entries of these collections and suites; `nil` for all.
    public var targets: Set<Mutation.Target>?
    /// Leave out entries written by this author (a consumer's own writes, typically).
    public var excludingAuthor: String?
    /// At most this many transactions per answer; `nil` for no limit.
    public var transactionLimit: Int?

    public init(targets: Set<Mutation.Target>? = nil, excludingAuthor: String? = nil, transactionLimit: Int? = nil) {
        self.targets = targets
        self.excludingAuthor = excludingAuthor
        self.transactionLimit = transactionLimit
    }

    /// Every entry.
    public static let all = HistoryFilter()

    func includes(_ entry: HistoryEntry) -> Bool {
        if let targets, !targets.contains(entry.target) { return false }
        if let excludingAuthor, entry.author == excludingAuthor { return false }
        return true
    }
}

import KVStore
