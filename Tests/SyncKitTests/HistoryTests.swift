import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport

@Suite struct HistoryTests {
    let dir = TemporaryDirectory()

    struct Fixture {
        let container: SharedContainer
        let history: History
        let notes: KVCollection<Int, String>
        let other: KVCollection<Int, String>
        let defaults: SharedDefaults
    }

    func fixture(_ group: String = "group.com.example.history") throws -> Fixture {
        let container = try dir.container(group)
        let history = try History.attach(to: container)
        let notes = try container.store.collection("notes", key: Int.self, value: String.self)
        let other = try container.store.collection("other", key: Int.self, value: String.self)
        try history.enable(.collection("notes"))
        try history.enable(.defaults(group))
        return Fixture(container: container, history: history, notes: notes, other: other,
                       defaults: try container.defaults())
    }

    func entries(_ changes: HistoryChanges) -> [HistoryEntry] {
        (changes.transactions ?? []).flatMap(\.entries)
    }

    @Test func committedChangesToEnabledTargetsAreRecordedInTheirTransaction() throws {
        let f = try fixture()
        let store = f.container.store
        try store.write(author: "app") { tx in
            try f.notes.put("a", forKey: 1, in: tx)
            try f.other.put("not recorded", forKey: 1, in: tx)
            try f.defaults.set("v", forKey: "k", in: tx)
            try f.notes.put("b", forKey: 2, in: tx)
        }
        try store.write(author: "widget") { tx in _ = try f.notes.delete(1, in: tx) }
        // An aborted transaction leaves no history.
        struct Abort: Error {}
        _ = try? store.write(author: "app") { tx in try f.notes.put("x", forKey: 9, in: tx); throw Abort() }
        // Nor does a transaction that only touches untracked collections.
        try f.other.put("y", forKey: 2)

        let changes = try f.history.changes(since: .zero)
        guard case .changes(let transactions, let next) = changes else { Issue.record("expired"); return }
        #expect(transactions.count == 2)
        #expect(transactions.map(\.author) == ["app", "widget"])
        #expect(transactions[0].transactionID < transactions[1].transactionID)
        let all = transactions.flatMap(\.entries)
        #expect(all.map(\.token.rawValue) == [1, 2, 3, 4])
        #expect(all.map(\.target) == [.collection("notes"), .defaults(f.container.groupIdentifier.rawValue),
                                      .collection("notes"), .collection("notes")])
        #expect(all.map(\.operation) == [.put, .put, .put, .delete])
        #expect(try all.filter { $0.target == .collection("notes") }.map { try $0.decodeKey(as: Int.self) } == [1, 2, 1])
        #expect(all[1].key == Array("k".utf8))
        #expect(next == ChangeToken(rawValue: 4))
        #expect(try f.history.currentToken() == next)
        #expect(try f.history.changes(since: next) == .changes([], next: next))
    }

    @Test func aWriterWithoutHistoryCannotWriteToAnEnabledCollection() throws {
        let f = try fixture()
        // Another Store object on the same environment, as another library in the process might open,
        // without History attached.
        let bare = try Store(directory: f.container.storeDirectory)
        let notes = try bare.collection("notes", key: Int.self, value: String.self)
        #expect(throws: KVStoreError.observerRequired(target: "collection 'notes'", kind: "history")) {
            try notes.put("sneaky", forKey: 7)
        }
        #expect(try f.notes.get(7) == nil)
        #expect(entries(try f.history.changes(since: .zero)).isEmpty)
        // Disabling lifts the requirement.
        try f.history.disable(.collection("notes"))
        try notes.put("fine", forKey: 7)
        #expect(entries(try f.history.changes(since: .zero)).isEmpty)
        #expect(try f.history.isEnabled(.collection("notes")) == false)
    }

    @Test func filtersAndLimitsNeverCutATransactionAndMovePastWhatTheySkip() throws {
        let f = try fixture()
        for i in 0..<6 {
            try f.container.store.write(author: i % 2 == 0 ? "app" : "widget") { tx in
                try f.notes.put("n\(i)", forKey: i, in: tx)
                try f.notes.put("m\(i)", forKey: 100 + i, in: tx)
            }
        }
        // Tokens 1…12, two per transaction.
        let limited = try f.history.changes(since: .zero, matching: HistoryFilter(transactionLimit: 2))
        #expect(limited.transactions?.map { $0.entries.count } == [2, 2])
        #expect(limited == .changes(limited.transactions ?? [], next: ChangeToken(rawValue: 4)))
        let rest = try f.history.changes(since: ChangeToken(rawValue: 4))
        #expect(entries(rest).map(\.token.rawValue) == Array(5...12))

        let notMine = try f.history.changes(since: .zero, matching: HistoryFilter(excludingAuthor: "app"))
        #expect(notMine.transactions?.map(\.author) == ["widget", "widget", "widget"])
        if case .changes(_, let next) = notMine { #expect(next == ChangeToken(rawValue: 12)) }

        // A limit counts transactions kept, and `next` moves past the ones filtered out.
        let oneWidget = try f.history.changes(since: .zero, matching: HistoryFilter(excludingAuthor: "app", transactionLimit: 1))
        #expect(oneWidget == .changes(oneWidget.transactions ?? [], next: ChangeToken(rawValue: 4)))
        #expect(entries(oneWidget).map(\.token.rawValue) == [3, 4])

        let otherTarget = try f.history.changes(since: .zero, matching: HistoryFilter(targets: [.collection("other")]))
        #expect(otherTarget == .changes([], next: ChangeToken(rawValue: 12)))
    }

    @Test func consumersKeepTheirTokenAndSkipTheirOwnWrites() throws {
        let f = try fixture()
        try f.notes.put("before", forKey: 0, author: "app")
        let widget = try f.history.consumer(named: "widget", author: "widget")
        let archivist = try f.history.consumer(named: "archivist", startingAt: .oldest)
        #expect(try widget.token() == ChangeToken(rawValue: 1))
        #expect(try archivist.token() == .zero)

        try f.notes.put("app", forKey: 1, author: "app")
        try f.notes.put("own", forKey: 2, author: "widget")
        guard case .changes(let seen, let next) = try widget.pendingChanges() else { Issue.record("expired"); return }
        #expect(seen.flatMap(\.entries).map(\.author) == ["app"])
        #expect(next == ChangeToken(rawValue: 3))
        try widget.acknowledge(through: next)
        #expect(try widget.pendingChanges() == .changes([], next: next))
        // Tokens only move forward, and never past the end.
        try widget.acknowledge(through: ChangeToken(rawValue: 1))
        #expect(try widget.token() == next)
        #expect(throws: SyncError.tokenFromTheFuture(token: ChangeToken(rawValue: 99), current: next)) {
            try widget.acknowledge(through: ChangeToken(rawValue: 99))
        }
        // Registering again keeps the stored token; the list shows both.
        #expect(try f.history.consumer(named: "widget").token() == next)
        #expect(try f.history.consumers().map(\.name) == ["archivist", "widget"])
        #expect(entries(try archivist.pendingChanges()).count == 3)
        let ghost = try f.history.consumer(named: "ghost")
        #expect(try f.history.removeConsumer(named: "ghost"))
        #expect(throws: SyncError.unknownConsumer("ghost")) { try ghost.token() }
        #expect(throws: SyncError.invalidConsumerName("")) { try f.history.consumer(named: "") }
    }

    @Test func purgeRespectsTheSlowestLiveConsumerAndExpiresTheGoneOnes() throws {
        let f = try fixture()
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let fast = try f.history.consumer(named: "fast", now: start)
        let slow = try f.history.consumer(named: "slow", now: start)
        for i in 1...10 { try f.notes.put("v\(i)", forKey: i) }
        try fast.acknowledge(through: ChangeToken(rawValue: 10), now: start)
        try slow.acknowledge(through: ChangeToken(rawValue: 4), now: start)

        // Both are live: only what the slow one acknowledged goes.
        var report = try f.history.purge(retaining: RetentionPolicy(maxAge: 3600), now: start + 60)
        #expect(report.removed == 4 && report.purgedThrough == ChangeToken(rawValue: 4) && report.goneConsumers.isEmpty)
        #expect(entries(try slow.pendingChanges()).map(\.token.rawValue) == Array(5...10))
        #expect(try f.history.changes(since: ChangeToken(rawValue: 3)) == .expired(purgedThrough: ChangeToken(rawValue: 4)))

        // The slow one goes quiet for longer than maxAge: history is purged past it, and it is told.
        try fast.acknowledge(through: ChangeToken(rawValue: 10), now: start + 7200)
        report = try f.history.purge(retaining: RetentionPolicy(maxAge: 3600), now: start + 7200)
        #expect(report.removed == 6 && report.purgedThrough == ChangeToken(rawValue: 10) && report.goneConsumers == ["slow"])
        #expect(try slow.pendingChanges() == .expired(purgedThrough: ChangeToken(rawValue: 10)))
        // After reloading, it resumes from the end, and tokens carry on where they were.
        #expect(try slow.resynchronized() == ChangeToken(rawValue: 10))
        try f.notes.put("after", forKey: 11)
        #expect(entries(try slow.pendingChanges()).map(\.token.rawValue) == [11])

        // A consumer that lags more than maxLag entries counts as gone too.
        for i in 12...20 { try f.notes.put("v\(i)", forKey: i) }
        try fast.acknowledge(through: ChangeToken(rawValue: 20))
        report = try f.history.purge(retaining: RetentionPolicy(maxLag: 5))
        #expect(report.goneConsumers == ["slow"])
        #expect(report.purgedThrough == ChangeToken(rawValue: 20))
        // Nothing left to purge is not an error.
        #expect(try f.history.purge().removed == 0)
        #expect(try f.history.purgedThrough() == ChangeToken(rawValue: 20))
    }

    /// A commit records its entries and nothing else (one B-tree of history dirtied a save): the last
    /// token and the clock are the last entry's. A purge that removes every entry records both in
    /// `_history.state`, so tokens and the clock carry on; a remote stamp `observeClock` adopted is
    /// followed too; and the integrity check finds nothing wrong in any of these states.
    @Test func tokensAndTheClockCarryOnFromTheEntriesAndThroughAPurgeOfEveryEntry() throws {
        let f = try fixture()
        let state = try f.container.store.collection("_history.state", key: String.self, value: UInt64.self)
        for i in 1...3 { try f.notes.put("v\(i)", forKey: i) }
        #expect(try state.count() == 0)
        #expect(try f.history.currentToken() == ChangeToken(rawValue: 3))
        let third = try f.history.clock()
        #expect(third > HybridTimestamp.zero)
        guard case .changes(let transactions, _) = try f.history.changes(since: .zero) else { Issue.record("expired"); return }
        #expect(transactions.last?.entries.last?.clock == third)
        #expect(try f.history.checkIntegrity().isEmpty)

        // No consumer: the purge removes everything, and records where tokens and the clock were.
        #expect(try f.history.purge().removed == 3)
        #expect(try f.history.currentToken() == ChangeToken(rawValue: 3))
        #expect(try f.history.clock() == third)
        #expect(try f.history.checkIntegrity().isEmpty)
        try f.notes.put("v4", forKey: 4)
        #expect(try f.history.currentToken() == ChangeToken(rawValue: 4))
        let fourth = try f.history.clock()
        #expect(fourth > third)

        // A remote stamp 30 s ahead (within the skew bound) moves the clock, and the next commit is
        // stamped after it though the last entry says less.
        let remote = HybridTimestamp(date: Date().addingTimeInterval(30))
        #expect(try f.container.store.write { tx in try f.history.observeClock(remote, in: tx) })
        #expect(try f.history.clock() == remote)
        try f.notes.put("v5", forKey: 5)
        #expect(try f.history.clock() > remote)
        #expect(try f.history.currentToken() == ChangeToken(rawValue: 5))
        #expect(try f.history.checkIntegrity().isEmpty)
    }

    /// An entry SyncKit never wrote, planted at the end of `_history` by a co-tenant: readers report
    /// it, but writers carry on after the last entry SyncKit wrote (the last token comes from the
    /// entries), and once it is gone history reads whole again.
    @Test func garbageAtTheEndOfHistoryStopsItsReadersNotItsWriters() throws {
        let f = try fixture()
        let store = f.container.store
        try f.notes.put("v1", forKey: 1)
        let database = try #require(try store.rawDatabase(named: "c/_history"))
        let garbage = UInt64(1_000_000)
        try store.write { tx in try tx.rawPut(database, garbage.encodedKey, Array("not an entry".utf8)) }
        try f.notes.put("v2", forKey: 2)
        #expect(throws: (any Error).self) { try f.history.changes(since: .zero) }
        #expect(try f.history.checkIntegrity().contains { $0.key == String(garbage) })
        #expect(try store.write { tx in try tx.rawDelete(database, garbage.encodedKey) })
        try f.notes.put("v3", forKey: 3)
        guard case .changes(let transactions, let next) = try f.history.changes(since: .zero) else { Issue.record("expired"); return }
        #expect(transactions.flatMap(\.entries).map(\.token.rawValue) == [1, 2, 3])
        #expect(next == ChangeToken(rawValue: 3))
        #expect(try f.history.checkIntegrity().isEmpty)
    }

    /// A write observer that runs after History and fails the commit when told to.
    final class FailingObserver: WriteObserver, @unchecked Sendable {
        let armed = Locked(false)
        struct Refused: Error {}
        func transactionWillCommit(_ transaction: WriteTransaction) throws {
            if armed.withLock({ $0 }) { throw Refused() }
        }
        func transactionDidCommit(_ commit: CommittedTransaction) {}
    }

    /// A commit starts from the token and clock this process's last commit left, without reading
    /// them, only when no commit came between: a transaction aborted after History recorded its
    /// entries (its ID goes to the next one) leaves no token behind, and a remote clock observed in
    /// the same transaction is not passed over.
    @Test func theTokenAndClockRememberedFromTheLastCommitAreUsedOnlyWhenNothingCameBetween() throws {
        let f = try fixture()
        let store = f.container.store
        try f.notes.put("v1", forKey: 1)
        try f.notes.put("v2", forKey: 2)
        let failing = FailingObserver()
        store.addObserver(failing)
        failing.armed.withLock { $0 = true }
        #expect(throws: FailingObserver.Refused.self) { try f.notes.put("lost", forKey: 3) }
        failing.armed.withLock { $0 = false }
        // The aborted transaction's ID goes to this one, which records nothing.
        try f.other.put("untracked", forKey: 1)
        try f.notes.put("v3", forKey: 3)
        #expect(try f.history.currentToken() == ChangeToken(rawValue: 3))
        guard case .changes(let transactions, _) = try f.history.changes(since: .zero) else { Issue.record("expired"); return }
        let entries = transactions.flatMap(\.entries)
        #expect(entries.map(\.token.rawValue) == [1, 2, 3])
        #expect(entries.map(\.key) == [1, 2, 3].map { $0.encodedKey })
        #expect(try f.notes.get(3) == "v3")

        // A remote stamp observed in the transaction that writes: its entry is stamped after it.
        let remote = HybridTimestamp(date: Date().addingTimeInterval(30))
        try store.write { tx in
            #expect(try f.history.observeClock(remote, in: tx))
            try f.notes.put("v4", forKey: 4, in: tx)
        }
        guard case .changes(let after, _) = try f.history.changes(since: ChangeToken(rawValue: 3)) else { Issue.record("expired"); return }
        let stamped = try #require(after.first?.entries.first?.clock)
        #expect(stamped > remote)
        try f.notes.put("v5", forKey: 5)
        #expect(try f.history.clock() > stamped)
        #expect(try f.history.checkIntegrity().isEmpty)
        store.removeObserver(failing)
    }

    @Test func aCommitWakesObserversOfTheContainer() async throws {
        let f = try fixture()
        let notifier = ChangeNotifier(directory: f.container.notifyDirectory)
        var wakes = try notifier.notifications().makeAsyncIterator()
        try f.notes.put("hello", forKey: 1, author: "app")
        let woke: Void? = await wakes.next()
        #expect(woke != nil)
        #expect(entries(try f.history.changes(since: .zero)).count == 1)
        #expect(throws: SyncError.invalidNotificationName("../x")) { try notifier.post("../x") }
    }
}
