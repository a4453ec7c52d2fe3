#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import KVStore

/// Follows every commit of every process from now on: each new transaction ID, with the history
/// entries it recorded where history is on. `kvtool watch` prints them; `kvtool serve` streams them.
///
/// ```swift
/// var follower = try CommitFollower(container: container)
/// while true {
///     if case .commits(let commits) = try follower.next() { for commit in commits { show(commit) } }
/// }
/// ```
///
/// ``next(waiting:)`` sleeps until the container's change notification (``ChangeNotifier``) or the
/// interval, whichever comes first: a process that commits without posting is still seen within it.
/// The last transaction ID and, only when there is a newer one, the history after the last token are
/// read in one snapshot, so no commit is counted twice or missed between the two.
public struct CommitFollower: Sendable {
    /// One commit: its transaction ID, when it was seen, and its history entries (none if it recorded
    /// no history).
    public struct Commit: Sendable {
        public var transactionID: Int
        public var seen: Date
        public var entries: [HistoryEntry]

        public init(transactionID: Int, seen: Date, entries: [HistoryEntry]) {
            self.transactionID = transactionID
            self.seen = seen
            self.entries = entries
        }
    }

    /// What one look found.
    public enum Found: Sendable {
        case commits([Commit])
        /// The history was purged past the token while we were away; following resumes at the end.
        case purged(through: ChangeToken, commits: [Commit])

        /// The commits found, purged or not.
        public var commits: [Commit] {
            switch self {
            case .commits(let commits), .purged(_, let commits): commits
            }
        }
    }

    public let store: Store
    private var history: History?
    private let changes: ChangeNotifier.Subscription?
    /// The history token followed from.
    public private(set) var token: ChangeToken
    /// The last transaction ID seen.
    public private(set) var transaction: Int

    /// Starts at the container's last commit, subscribed to its change notification.
    public init(container: SharedContainer) throws {
        try self.init(store: container.store, changes: try ChangeNotifier(container: container).subscribe())
    }

    /// Starts at the store's last commit; without `changes`, ``next(waiting:)`` looks at every interval.
    public init(store: Store, changes: ChangeNotifier.Subscription? = nil) throws {
        self.store = store
        self.changes = changes
        history = Self.attachHistory(store)
        (token, transaction) = try store.read { [history] tx in (try history?.currentToken(in: tx) ?? .zero, tx.transactionID) }
    }

    /// Waits for a change notification, at most `interval`, then ``poll()``s.
    public mutating func next(waiting interval: Duration = .milliseconds(50)) throws -> Found {
        if let changes {
            _ = changes.wait(timeout: interval)
        } else {
            usleep(UInt32(clamping: max(0, interval.wholeMilliseconds) * 1000))
        }
        return try poll()
    }

    /// The history, once it exists: a read-only process cannot create it, and another process may
    /// enable it later.
    public static func attachHistory(_ store: Store) -> History? {
        guard (try? store.catalogEntry(forCollection: History.entriesName)) ?? nil != nil else { return nil }
        return try? History.attach(to: store)
    }

    /// The commits after the last one seen, if any, without waiting.
    public mutating func poll() throws -> Found {
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
