import Foundation
import KVStore
import SyncKit

/// Follows every commit of every process from now on: each new transaction ID, with the history
/// entries it recorded where history is on. `kvtool watch` prints them; `kvtool serve` streams them.
///
/// The last transaction ID and, only when there is a newer one, the history after the last token are
/// read in one snapshot, so no commit is counted twice or missed between the two.
struct CommitFollower: Sendable {
    /// One commit: its transaction ID, when it was seen, and its history entries (none if it recorded
    /// no history).
    struct Commit: Sendable {
        var transactionID: Int
        var seen: Date
        var entries: [HistoryEntry]
    }

    /// What one look found.
    enum Found: Sendable {
        case commits([Commit])
        /// The history was purged past the token while we were away; following resumes at the end.
        case purged(through: ChangeToken, commits: [Commit])
    }

    let store: Store
    private var history: History?
    private(set) var token: ChangeToken
    private(set) var transaction: Int

    /// Starts at the store's last commit.
    init(store: Store) throws {
        self.store = store
        history = Self.attachHistory(store)
        (token, transaction) = try store.read { [history] tx in (try history?.currentToken(in: tx) ?? .zero, tx.transactionID) }
    }

    /// The history, once it exists: a read-only process cannot create it, and another process may
    /// enable it later.
    static func attachHistory(_ store: Store) -> History? {
        guard (try? store.catalogEntry(forCollection: History.entriesName)) ?? nil != nil else { return nil }
        return try? History.attach(to: store)
    }

    /// The commits after the last one seen, if any.
    mutating func poll() throws -> Found {
        if history == nil { history = Self.attachHistory(store) }
        let (latest, fetched) = try store.read { [history, token, transaction] tx -> (Int, HistoryChanges?) in
            guard tx.transactionID > transaction else { return (tx.transactionID, nil) }
            return (tx.transactionID, try history?.changes(since: token, in: tx))
        }
        guard latest > transaction else { return .commits([]) }
        let seen = Date()
        var recorded: [Int: [HistoryEntry]] = [:]
        var purged: ChangeToken?
        switch fetched {
        case .expired(let through)?:
            purged = through
            token = try history?.currentToken() ?? token
        case .changes(let transactions, let next)?:
            for committed in transactions { recorded[committed.transactionID, default: []] += committed.entries }
            token = next
        case nil:
            break
        }
        let commits = ((transaction + 1)...latest).map { Commit(transactionID: $0, seen: seen, entries: recorded[$0] ?? []) }
        transaction = latest
        return purged.map { .purged(through: $0, commits: commits) } ?? .commits(commits)
    }
}
