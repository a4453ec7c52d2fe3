#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

/// The change history of a store, in the spirit of Core Data's persistent history: every committed
/// write to a history-enabled collection or defaults suite appends one ``HistoryEntry`` per mutation,
/// in the same transaction, whichever process wrote.
///
/// ```swift
/// let history = try History.attach(to: container)       // once per process, before writing
/// try history.enable(.collection("dailyRecords"))        // once, from any process
/// try container.store.write(author: "app") { tx in try records.put(record, forKey: day, in: tx) }
///
/// // A widget, in another process:
/// let feed = try history.consumer(named: "widget")
/// if case .changes(let transactions, let next) = try feed.pendingChanges() {
///     … ; try feed.acknowledge(through: next)
/// }
/// ```
///
/// Enabling history records a requirement in the store, so from then on every process must attach a
/// `History` before writing to that collection: a process that did not would fail to write
/// (`KVStoreError.observerRequired`) rather than make changes the history never sees.
///
/// Entries live in the collection `_history` (key: the token), the purge point and the clock a remote
/// stamp moved in `_history.state`, and consumers in `_history.consumers`, so `kvtool` can show all of
/// them. A commit writes its entries and nothing else: the last token is the last entry's key and the
/// clock the last entry's stamp, so a save dirties one B-tree of history, not two (a purge that removes
/// entries records both in `_history.state`, which stores written before issue 39 also kept there).
/// A `History` is safe to use from any thread.
public final class History: WriteObserver, Sendable {
    /// The store whose history this is.
    public let store: Store
    /// Posts a cross-process notification after every commit that changed something, if set.
    public let notifier: ChangeNotifier?
    let entries: KVCollection<UInt64, HistoryEntry>
    let state: KVCollection<String, UInt64>
    let consumerRecords: KVCollection<String, ConsumerRecord>

    /// The observer kind recorded as the requirement of history-enabled collections.
    public static let kind = "history"
    public var observerKind: String? { Self.kind }

    /// The collection of history entries.
    package static let entriesName = "_history"
    /// The collection of history's state (last token, purge point).
    package static let stateName = "_history.state"
    /// The collection of history's consumers.
    package static let consumersName = "_history.consumers"
    static let lastTokenKey = "lastToken"
    static let purgedThroughKey = "purgedThrough"
    static let clockKey = "clock"

    private let wallClock = Locked<@Sendable () -> Date>({ Date() })

    /// The last token and clock that this process's last recording commit left, with that commit's
    /// transaction ID; and those of the transaction now committing, kept until it has committed.
    ///
    /// LMDB numbers write transactions one after the other, whichever process commits, so the next
    /// write transaction can trust `committed` only when its own ID is the very next one: then no
    /// commit of any process came between, and reading the last entry again would find the same
    /// token and clock. Otherwise, or when the transaction itself touches history's collections, it
    /// reads them from the store (``lastTokenAndClock(in:)``). This saves a commit the cursor's descent
    /// and the decoding of the last entry.
    private let recordedTail = Locked<(committed: RecordedTail?, pending: RecordedTail?)>((nil, nil))

    struct RecordedTail {
        var transactionID: Int
        var token: UInt64
        var clock: UInt64
    }

    /// Makes this process stamp the transactions it records from `clock` instead of the system's
    /// wall clock: a seam for tests that give a machine a wrong clock (a replicator takes its own in
    /// its options). Every stamp still follows the last one.
    public func setWallClock(_ clock: @escaping @Sendable () -> Date) {
        wallClock.withLock { $0 = clock }
    }

    /// The history of `store`, registered in its write path. Attaching again returns the same object,
    /// until the store is closed.
    ///
    /// Call it in every process before it writes, and before any `read { }` or `write { }`.
    /// - Parameter notifier: posts a notification after each commit that changed something.
    public static func attach(to store: Store, notifier: ChangeNotifier? = nil) throws -> History {
        // The store keeps it, among its write observers, for as long as the store is open; a closed
        // store (``KVStore/Store/close()``) lets go of it, and no map of histories outlives either.
        guard let history = try store.observer(ofKind: kind, orAdding: History(store: store, notifier: notifier)) as? History else {
            throw SyncError.corruptHistory("another write observer of kind \(kind) is registered in this process")
        }
        return history
    }

    /// The history of the container's store, posting notifications in its `Notify/` directory.
    public static func attach(to container: SharedContainer) throws -> History {
        try attach(to: container.store, notifier: ChangeNotifier(container: container))
    }

    private init(store: Store, notifier: ChangeNotifier?) throws {
        self.store = store
        self.notifier = notifier
        entries = try store.collection(Self.entriesName, key: UInt64.self, codec: HistoryEntry.codec)
        state = try store.collection(Self.stateName, key: String.self, value: UInt64.self)
        consumerRecords = try store.collection(Self.consumersName, key: String.self, value: ConsumerRecord.self)
    }

    // MARK: - Opting in

    /// Records history for `target` from the next transaction on, in every process.
    public func enable(_ target: Mutation.Target) throws {
        try store.write { tx in try store.requireObserver(kind: Self.kind, for: target, in: tx) }
    }

    /// Stops recording history for `target`. Entries already recorded stay until purged.
    public func disable(_ target: Mutation.Target) throws {
        try store.write { tx in try store.removeObserverRequirement(for: target, in: tx) }
    }

    /// Whether changes to `target` are recorded.
    public func isEnabled(_ target: Mutation.Target) throws -> Bool {
        try store.read { tx in try store.observerRequirement(for: target, in: tx) == Self.kind }
    }

    // MARK: - Reading

    /// The token of the last entry recorded so far (``ChangeToken/zero`` if none ever was).
    public func currentToken() throws -> ChangeToken {
        try store.read { try currentToken(in: $0) }
    }

    /// The last token purged: tokens below it are expired.
    public func purgedThrough() throws -> ChangeToken {
        try store.read { ChangeToken(rawValue: try state.get(Self.purgedThroughKey, in: $0) ?? 0) }
    }

    /// ``currentToken()`` inside a transaction you hold (with, say, its ``KVStore/ReadTransaction/transactionID``).
    public func currentToken(in transaction: ReadTransaction) throws -> ChangeToken {
        ChangeToken(rawValue: try Self.lastToken(entries: entries, state: state, in: transaction))
    }

    /// The last token: the last entry's key, or what `_history.state` records if that is further.
    static func lastToken(entries: KVCollection<UInt64, HistoryEntry>, state: KVCollection<String, UInt64>,
                          in transaction: ReadTransaction) throws -> UInt64 {
        var lastKey: UInt64 = 0
        try entries.forEachBytes(UInt64(0)..., reverse: true, in: transaction) { keyBytes, _ in
            lastKey = try UInt64.decodeKey(keyBytes)
            return false
        }
        return max(lastKey, try state.get(Self.lastTokenKey, in: transaction) ?? 0)
    }

    /// The last token and the clock, as a commit continues from them: the last entry's token and
    /// stamp, or what `_history.state` records when that is further (after a purge that removed every
    /// entry, after ``observeClock(_:now:maxSkew:in:)``, or in a store written before issue 39, whose
    /// commits recorded both there).
    func lastTokenAndClock(in transaction: ReadTransaction) throws -> (token: UInt64, clock: UInt64) {
        var lastKey: UInt64 = 0, lastClock: UInt64 = 0
        var skipped = 0
        // The bytes of the last entry, straight from the map (`last(in:)` would build a generic array
        // of tuples, whose metadata another module looks up at run time on every commit). An entry
        // that does not decode, or names another token than its key (a co-tenant's garbage), is
        // passed over, so that it stops readers, who report it, and not every writer of the group;
        // at most 64 of them, then history is corrupt.
        try entries.forEachBytes(UInt64(0)..., reverse: true, in: transaction) { keyBytes, valueBytes in
            if let key = try? UInt64.decodeKey(keyBytes),
               let entry = HistoryEntry.decodedDirectly(from: valueBytes)
                   ?? (try? entries.decodeStoredValue(Array(valueBytes), key: Array(keyBytes))),
               entry.token.rawValue == key {
                lastKey = key
                lastClock = entry.clock?.rawValue ?? 0
                return false
            }
            skipped += 1
            guard skipped < 64 else {
                throw SyncError.corruptHistory("the last 64 entries of \(Self.entriesName) are not entries SyncKit writes")
            }
            return true
        }
        let token = max(lastKey, try state.get(Self.lastTokenKey, in: transaction) ?? 0)
        let clock = max(lastClock, try state.get(Self.clockKey, in: transaction) ?? 0)
        return (token, clock)
    }

    /// The transactions recorded after `token`, oldest first, read in one transaction: no gap, no
    /// duplicate, and no transaction cut in two. A token older than the purge point (or newer than
    /// anything recorded, as after restoring an older copy of the store) answers
    /// ``HistoryChanges/expired(purgedThrough:)``.
    ///
    /// - Throws: ``KVStore/KVStoreError/corruptValue(collection:key:reason:underlying:)`` for an entry that does not
    ///   decode, ``SyncError/corruptHistory(_:)`` for one SyncKit never writes (another token than its
    ///   key, an unknown kind, an invalid name, a time that is not finite).
    public func changes(since token: ChangeToken, matching filter: HistoryFilter = .all) throws -> HistoryChanges {
        try store.read { try changes(since: token, matching: filter, in: $0) }
    }

    /// ``changes(since:matching:)`` inside a transaction you hold.
    public func changes(since token: ChangeToken, matching filter: HistoryFilter = .all,
                        in transaction: ReadTransaction) throws -> HistoryChanges {
        if let purged = try expiry(of: token, in: transaction) { return .expired(purgedThrough: purged) }
        let last = try currentToken(in: transaction)
        var collector = TransactionCollector(filter: filter, next: token)
        if token < last {
            try entries.forEach((token.rawValue + 1)..., in: transaction) { key, entry in
                // An entry SyncKit never wrote (another process's garbage) is an error, not news.
                if let problem = entry.problem(storedAt: key) {
                    throw SyncError.corruptHistory("entry \(key) in \(Self.entriesName): \(problem)")
                }
                return collector.add(entry)
            }
        }
        collector.finish()
        return .changes(collector.transactions, next: collector.next)
    }

    /// Where history was purged through, if that is past `token` (or `token` is ahead of history's
    /// last: another store's): the changes after `token` are gone. Reads no entry.
    func expiry(of token: ChangeToken, in transaction: ReadTransaction) throws -> ChangeToken? {
        let purged = try state.get(Self.purgedThroughKey, in: transaction) ?? 0
        let last = try currentToken(in: transaction)
        return token.rawValue < purged || token > last ? ChangeToken(rawValue: purged) : nil
    }

    // MARK: - Clock

    /// The last hybrid logical clock stamp recorded (``HybridTimestamp/zero`` if none).
    public func clock() throws -> HybridTimestamp {
        try store.read { HybridTimestamp(rawValue: try lastTokenAndClock(in: $0).clock) }
    }

    /// How far ahead of local wall-clock time a remote stamp may be and still be adopted: 60 s.
    public static let defaultMaxClockSkew: Duration = .seconds(60)

    /// Moves the clock past `remote`, a stamp from another machine, inside `transaction`: every
    /// transaction recorded from then on is stamped after it, so a write made after seeing a remote
    /// change orders after that change everywhere.
    ///
    /// The clock never moves past `now + maxSkew`: a stamp further ahead than that (a machine whose
    /// clock is wrong, or a planted row) is not adopted at all, so that one fast clock cannot drag
    /// every other machine's clock forward for good ("HLC poisoning"; Kulkarni et al. bound the
    /// drift by ε, CockroachDB by its maximum offset).
    ///
    /// - Returns: whether `remote` is within the bound (adopted, or already behind the clock).
    @discardableResult
    public func observeClock(_ remote: HybridTimestamp, now: Date = Date(), maxSkew: Duration = History.defaultMaxClockSkew,
                             in transaction: WriteTransaction) throws -> Bool {
        guard !remote.isAhead(of: now, by: maxSkew) else { return false }
        let current = try lastTokenAndClock(in: transaction).clock
        guard remote.rawValue > current else { return true }
        // The clock this process remembers is behind from now on (a transaction of this process that
        // commits after this one reads the clock from the store again).
        recordedTail.withLock { $0 = (nil, nil) }
        try transaction.unrecorded { try state.put(remote.rawValue, forKey: Self.clockKey, in: transaction) }
        return true
    }

    // MARK: - WriteObserver

    public func transactionWillCommit(_ transaction: WriteTransaction) throws {
        // Whatever an earlier transaction of this ID left pending did not commit (LMDB gives an
        // aborted transaction's ID to the next one).
        let remembered = recordedTail.withLock { tail -> RecordedTail? in
            tail.pending = nil
            return tail.committed
        }
        let mutations = transaction.mutations
        guard !mutations.isEmpty else { return }
        var tracked: [Mutation.Target: Bool] = [:]
        var last: UInt64?
        var clock: HybridTimestamp?
        var recorded: (token: UInt64, clock: UInt64)?
        let now = wallClock.withLock { $0 }()
        try transaction.unrecorded {
            for mutation in mutations {
                let isTracked: Bool
                if let known = tracked[mutation.target] {
                    isTracked = known
                } else {
                    isTracked = try store.observerRequirement(for: mutation.target, in: transaction) == Self.kind
                    tracked[mutation.target] = isTracked
                }
                guard isTracked else { continue }
                if recorded == nil {
                    if let remembered, remembered.transactionID == transaction.transactionID - 1,
                       !mutations.contains(where: { Self.isBookkeeping($0.target) }) {
                        recorded = (remembered.token, remembered.clock)
                    } else {
                        recorded = try lastTokenAndClock(in: transaction)
                    }
                }
                let previous = last ?? recorded!.token
                // Only garbage written by something else can bring the counter this far: refuse to
                // wrap around (a trap) or to reuse tokens.
                guard previous < UInt64.max else {
                    throw SyncError.corruptHistory("the last token is \(previous); no token can follow it")
                }
                let token = previous + 1
                last = token
                if clock == nil {
                    clock = HybridTimestamp.next(after: HybridTimestamp(rawValue: recorded!.clock),
                                                 now: now)
                }
                // Each token sorts after every entry: appended (a co-tenant's garbage key further on
                // sends it down `put`'s path).
                try entries.append(HistoryEntry(
                    token: ChangeToken(rawValue: token), transactionID: transaction.transactionID,
                    author: transaction.author, timestamp: now, target: mutation.target,
                    key: mutation.key, operation: mutation.operation, clock: clock), forKey: token, in: transaction)
            }
            // Nothing else: the entries carry the last token and the clock (see `lastTokenAndClock`).
        }
        if let last, let clock {
            let pending = RecordedTail(transactionID: transaction.transactionID, token: last, clock: clock.rawValue)
            recordedTail.withLock { $0.pending = pending }
        }
    }

    public func transactionDidCommit(_ commit: CommittedTransaction) {
        recordedTail.withLock { tail in
            if let pending = tail.pending, pending.transactionID == commit.transactionID {
                tail = (pending, nil)
            }
        }
        guard let notifier, commit.mutations.contains(where: { !Self.isBookkeeping($0.target) }) else { return }
        // A failed post loses nothing: observers also find changes by reading history.
        try? notifier.post()
    }

    /// The collections History keeps its entries, state and consumers in.
    public static let collectionNames: Set<String> = [entriesName, stateName, consumersName]

    /// SyncKit's own collections, whose changes are not news to anyone.
    static func isBookkeeping(_ target: Mutation.Target) -> Bool {
        if case .collection(let name) = target { return collectionNames.contains(name) }
        return false
    }
}

/// Groups entries into transactions while applying a filter, remembering how far it read.
struct TransactionCollector {
    let filter: HistoryFilter
    private(set) var next: ChangeToken
    private(set) var transactions: [HistoryTransaction] = []
    private var current: (id: Int, kept: [HistoryEntry], last: ChangeToken)?

    init(filter: HistoryFilter, next: ChangeToken) {
        self.filter = filter
        self.next = next
    }

    /// Adds the next entry; returns `false` once the transaction limit is reached.
    mutating func add(_ entry: HistoryEntry) -> Bool {
        if let open = current, open.id != entry.transactionID {
            close()
            if let limit = filter.transactionLimit, transactions.count >= limit { return false }
        }
        if current == nil { current = (entry.transactionID, [], entry.token) }
        current!.last = entry.token
        if filter.includes(entry) { current!.kept.append(entry) }
        return true
    }

    mutating func finish() { close() }

    private mutating func close() {
        guard let open = current else { return }
        current = nil
        next = open.last
        if let first = open.kept.first {
            transactions.append(HistoryTransaction(transactionID: open.id, author: first.author,
                                                   timestamp: first.timestamp, entries: open.kept))
        }
    }
}
