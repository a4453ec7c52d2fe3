import Foundation
import KVStore
import Synchronization
import Testing
import TestSupport
import Workloads

private func day(_ text: String) -> LogicalDay { LogicalDay(text)! }
private func days(_ texts: String...) -> [LogicalDay] { texts.map(day) }

private let t0 = Date(timeIntervalSince1970: 1_760_000_000)
private let t1 = Date(timeIntervalSince1970: 1_760_100_000)
private let t2 = Date(timeIntervalSince1970: 1_760_200_000)

private func netflix(id: UUID = UUID(uuidString: "d4000000-0000-4000-8000-000000000001")!) -> Subscription {
    Subscription(id: id, name: "Netflix", amount: 1200, currency: "JPY", status: .active, category: "entertainment",
                 firstBillingDate: day("2025-01-31"), billingCycle: .monthly(interval: 1), memo: "",
                 createdAt: t0, updatedAt: t0)
}

/// Records the mutations of each committed write transaction.
private final class CommitLog: WriteObserver {
    let commits = Mutex<[CommittedTransaction]>([])
    func transactionDidCommit(_ commit: CommittedTransaction) { commits.withLock { $0.append(commit) } }
}

@Suite struct SubscriptionStoreTests {
    let dir = TemporaryDirectory()
    let range = day("2025-01-01")...day("2025-06-30")

    @Test func savingStoresTheSubscriptionAndItsProjectedEventsInOneTransaction() throws {
        let store = try dir.store()
        let tracker = try SubscriptionStore(store: store)
        let log = CommitLog()
        store.addObserver(log)
        let result = try tracker.save(netflix(), regeneratingIn: range, now: t1, author: "app")
        #expect(result == SubscriptionStore.Regeneration(created: 6))

        let commits = log.commits.withLock { $0 }
        #expect(commits.count == 1)
        let targets = commits.first.map { $0.mutations.map(\.target.name) } ?? []
        #expect(targets.filter { $0 == "subscriptions" }.count == 1)
        #expect(targets.filter { $0 == "billingEvents" }.count == 6)
        #expect(commits.first?.author == "app")

        #expect(try tracker.subscriptions.get(netflix().id) == netflix())
        let events = try tracker.events(of: netflix().id)
        #expect(events.map(\.billedAt) == days("2025-01-31", "2025-02-28", "2025-03-31", "2025-04-30", "2025-05-31", "2025-06-30"))
        #expect(events.allSatisfy { $0.eventType == .projected && $0.amount == 1200 && $0.createdAt == t1 })
    }

    @Test func anInvalidSubscriptionWritesNothing() throws {
        let store = try dir.store()
        let tracker = try SubscriptionStore(store: store)
        var bad = netflix()
        bad.name = ""
        #expect(throws: SubscriptionValidationError.emptyName) {
            try tracker.save(bad, regeneratingIn: range, now: t1)
        }
        #expect(try tracker.subscriptions.count() == 0)
        #expect(try tracker.billingEvents.count() == 0)
    }

    @Test func regenerationKeepsConfirmedEventsAndAppliesANewAmountToProjectedOnes() throws {
        let tracker = try SubscriptionStore(store: dir.store())
        var subscription = netflix()
        try tracker.save(subscription, regeneratingIn: range, now: t0)
        let february = try #require(try tracker.events(of: subscription.id).first { $0.billedAt == day("2025-02-28") })
        let confirmed = try tracker.confirmEvent(february.id, now: t1)
        #expect(confirmed.eventType == .confirmed && confirmed.amount == 1200 && !confirmed.isAmountOverridden)
        #expect(confirmed.updatedAt == t1 && confirmed.createdAt == t0)

        subscription.amount = 1490
        let result = try tracker.save(subscription, regeneratingIn: range, now: t2)
        #expect(result == SubscriptionStore.Regeneration(updated: 5))
        let events = try tracker.events(of: subscription.id)
        #expect(events.count == 6)
        for event in events {
            if event.billedAt == day("2025-02-28") {
                #expect(event == confirmed, "the confirmed event is untouched")
            } else {
                #expect(event.eventType == .projected)
                #expect(event.amount == 1490)
                #expect(event.createdAt == t0 && event.updatedAt == t2)
            }
        }
    }

    @Test func noProjectedEventIsCreatedOnAConfirmedEventsDay() throws {
        let tracker = try SubscriptionStore(store: dir.store())
        var subscription = netflix()
        try tracker.save(subscription, regeneratingIn: range, now: t0)
        let march = try #require(try tracker.events(of: subscription.id).first { $0.billedAt == day("2025-03-31") })
        try tracker.confirmEvent(march.id, now: t1)
        // Shift the schedule away and back: the confirmed day never gets a projected twin.
        subscription.firstBillingDate = day("2025-01-15")
        let shifted = try tracker.save(subscription, regeneratingIn: range, now: t2)
        #expect(shifted == SubscriptionStore.Regeneration(created: 6, deleted: 5))
        var events = try tracker.events(of: subscription.id)
        #expect(events.map(\.billedAt) == days("2025-01-15", "2025-02-15", "2025-03-15", "2025-03-31", "2025-04-15",
                                               "2025-05-15", "2025-06-15"))
        #expect(events.filter(\.isConfirmed).map(\.billedAt) == days("2025-03-31"))

        subscription.firstBillingDate = day("2025-01-31")
        try tracker.save(subscription, regeneratingIn: range, now: t2)
        events = try tracker.events(of: subscription.id)
        #expect(events.map(\.billedAt) == days("2025-01-31", "2025-02-28", "2025-03-31", "2025-04-30", "2025-05-31", "2025-06-30"))
        #expect(events.filter { $0.billedAt == day("2025-03-31") }.count == 1)
        #expect(events.first { $0.billedAt == day("2025-03-31") }?.eventType == .confirmed)
    }

    @Test func aConfirmedEventFromElsewhereAlsoBlocksItsDay() throws {
        let store = try dir.store()
        let tracker = try SubscriptionStore(store: store)
        let subscription = netflix()
        // A confirmed event with an ID of its own (imported, say) on a scheduled day.
        let imported = BillingEvent(id: UUID(uuidString: "d4000000-0000-4000-8000-0000000000aa")!,
                                    subscriptionId: subscription.id, billedAt: day("2025-04-30"), amount: 1100,
                                    currency: "JPY", eventType: .confirmed, createdAt: t0, updatedAt: t0)
        try tracker.billingEvents.put(imported, forKey: imported.id)
        let result = try tracker.save(subscription, regeneratingIn: range, now: t1)
        #expect(result == SubscriptionStore.Regeneration(created: 5))
        let april = try tracker.events(of: subscription.id).filter { $0.billedAt == day("2025-04-30") }
        #expect(april == [imported])
    }

    @Test func regeneratingAnUnchangedSubscriptionRewritesNothing() throws {
        let store = try dir.store()
        let tracker = try SubscriptionStore(store: store)
        try tracker.save(netflix(), regeneratingIn: range, now: t0)
        let before = try tracker.events(of: netflix().id)
        let log = CommitLog()
        store.addObserver(log)
        let result = try tracker.regenerateProjectedEvents(forSubscription: netflix().id, in: range, now: t2)
        #expect(result == SubscriptionStore.Regeneration(unchanged: 6))
        #expect(try tracker.events(of: netflix().id) == before)
        #expect(log.commits.withLock { $0.first?.mutations.count } == 0)
    }

    @Test func eventsOutsideTheRangeAreLeftAlone() throws {
        let tracker = try SubscriptionStore(store: dir.store())
        var subscription = netflix()
        try tracker.save(subscription, regeneratingIn: range, now: t0)
        subscription.amount = 1490
        try tracker.save(subscription, regeneratingIn: day("2025-04-01")...day("2025-06-30"), now: t1)
        let amounts = try tracker.events(of: subscription.id).map { "\($0.billedAt)=\($0.amount)" }
        #expect(amounts == ["2025-01-31=1200", "2025-02-28=1200", "2025-03-31=1200",
                            "2025-04-30=1490", "2025-05-31=1490", "2025-06-30=1490"])
    }

    @Test func cancellingRemovesProjectedEventsAfterTheCancellationDateButKeepsConfirmedOnes() throws {
        let tracker = try SubscriptionStore(store: dir.store())
        var subscription = netflix()
        try tracker.save(subscription, regeneratingIn: range, now: t0)
        let may = try #require(try tracker.events(of: subscription.id).first { $0.billedAt == day("2025-05-31") })
        try tracker.confirmEvent(may.id, amount: 1000, now: t1)
        subscription.status = .cancelled
        subscription.cancellationDate = day("2025-03-31")
        let result = try tracker.save(subscription, regeneratingIn: range, now: t2)
        #expect(result == SubscriptionStore.Regeneration(deleted: 2, unchanged: 3))
        let events = try tracker.events(of: subscription.id)
        #expect(events.map(\.billedAt) == days("2025-01-31", "2025-02-28", "2025-03-31", "2025-05-31"))
        #expect(events.last?.eventType == .confirmed)
        #expect(events.last?.amount == 1000)
    }

    @Test func confirmingWithAnOverriddenAmountAndMemo() throws {
        let tracker = try SubscriptionStore(store: dir.store())
        try tracker.save(netflix(), regeneratingIn: range, now: t0)
        let first = try #require(try tracker.events(of: netflix().id).first)
        let confirmed = try tracker.confirmEvent(first.id, amount: Decimal(string: "1350.5")!, memo: "tax, \"new\"", now: t1)
        #expect(confirmed.isAmountOverridden)
        #expect(confirmed.amount == Decimal(string: "1350.5")!)
        #expect(confirmed.memo == "tax, \"new\"")
        #expect(try tracker.billingEvents.get(first.id) == confirmed)
        // Confirming again without an amount keeps the override.
        let again = try tracker.confirmEvent(first.id, now: t2)
        #expect(again.amount == Decimal(string: "1350.5")! && again.isAmountOverridden && again.memo == "tax, \"new\"")
        #expect(again.updatedAt == t2)
    }

    @Test func confirmingRejectsABadAmountAndAnUnknownEventWithClearErrors() throws {
        let tracker = try SubscriptionStore(store: dir.store())
        try tracker.save(netflix(), regeneratingIn: range, now: t0)
        let first = try #require(try tracker.events(of: netflix().id).first)
        #expect(throws: SubscriptionValidationError.negativeAmount(field: "billing event amount", -1)) {
            try tracker.confirmEvent(first.id, amount: -1, now: t1)
        }
        #expect(try tracker.billingEvents.get(first.id) == first, "nothing was written")
        let missing = UUID(uuidString: "d4000000-0000-4000-8000-0000000000ff")!
        #expect(throws: SubscriptionStoreError.eventNotFound(missing)) { try tracker.confirmEvent(missing, now: t1) }
        #expect(SubscriptionStoreError.eventNotFound(missing).description
                == "no billing event with id d4000000-0000-4000-8000-0000000000ff")
        #expect(throws: SubscriptionStoreError.subscriptionNotFound(missing)) {
            try tracker.regenerateProjectedEvents(forSubscription: missing, in: range, now: t1)
        }
    }

    @Test func theIndexGivesEachSubscriptionsEventsInDateOrder() throws {
        let store = try dir.store()
        let tracker = try SubscriptionStore(store: store)
        let a = netflix(id: UUID(uuidString: "ffffffff-0000-4000-8000-000000000001")!)
        let b = netflix(id: UUID(uuidString: "00000000-0000-4000-8000-000000000002")!)
        // Events put by hand, out of date order, with random IDs: the index orders them by day.
        let shuffled = days("2025-05-01", "2025-01-01", "2025-03-01", "2025-02-01", "2025-04-01")
        try store.write { tx in
            for (i, d) in shuffled.enumerated() {
                for s in [a, b] {
                    let e = BillingEvent(id: UUID(), subscriptionId: s.id, billedAt: d, amount: Decimal(i),
                                         currency: "JPY", createdAt: t0, updatedAt: t0)
                    try tracker.billingEvents.put(e, forKey: e.id, in: tx)
                }
            }
        }
        try store.read { tx throws in
            let ordered = days("2025-01-01", "2025-02-01", "2025-03-01", "2025-04-01", "2025-05-01")
            #expect(try tracker.events(of: a.id, in: tx).map(\.billedAt) == ordered)
            #expect(try tracker.events(of: b.id, in: tx).map(\.billedAt) == ordered)
            #expect(try tracker.events(of: a.id, in: tx).allSatisfy { $0.subscriptionId == a.id })
            #expect(try tracker.events(of: a.id, billedIn: day("2025-02-01")...day("2025-04-01"), in: tx).map(\.billedAt)
                    == days("2025-02-01", "2025-03-01", "2025-04-01"))
            #expect(try tracker.events(of: UUID(), in: tx) == [])
        }
    }

    @Test func deletingASubscriptionDeletesItsEventsOnly() throws {
        let tracker = try SubscriptionStore(store: dir.store())
        let other = netflix(id: UUID(uuidString: "d4000000-0000-4000-8000-000000000002")!)
        try tracker.save(netflix(), regeneratingIn: range, now: t0)
        try tracker.save(other, regeneratingIn: range, now: t0)
        #expect(try tracker.deleteSubscription(netflix().id))
        #expect(try tracker.subscriptions.get(netflix().id) == nil)
        #expect(try tracker.events(of: netflix().id) == [])
        #expect(try tracker.events(of: other.id).count == 6)
        #expect(try tracker.billingEvents.count() == 6)
        #expect(try !tracker.deleteSubscription(netflix().id))
    }

    @Test func subscriptionsAndEventsRoundTripExactly() throws {
        let store = try dir.store()
        let tracker = try SubscriptionStore(store: store)
        var s = netflix()
        s.amount = Decimal(string: "12.99")!
        s.currency = "USD"
        s.memo = "line 1\nline 2, \"quoted\""
        s.category = nil
        s.createdAt = Date(timeIntervalSince1970: 1_760_000_000.123)
        try tracker.save(s, regeneratingIn: range, now: t0)
        // A second handle on the same directory reads what the first wrote.
        let again = try SubscriptionStore(store: Store(directory: store.directory))
        #expect(try again.subscriptions.get(s.id) == s)
        #expect(try again.events(of: s.id).first?.amount == Decimal(string: "12.99")!)
    }

    // MARK: - Sample data

    @Test func theSampleDataIsTheDocumentedOne() throws {
        let tracker = try SubscriptionStore(store: dir.store())
        try SubscriptionSampleData.populate(tracker)
        #expect(SubscriptionSampleData.range == day("2025-12-06")...day("2026-05-06"))
        #expect(try tracker.subscriptions.count() == 6)
        #expect(try tracker.billingEvents.count() == 17)
        func dates(_ id: UUID) throws -> [String] { try tracker.events(of: id).map(\.billedAt.description) }
        #expect(try dates(SubscriptionSampleData.netflixID) == ["2025-12-31", "2026-01-31", "2026-02-28", "2026-03-31", "2026-04-30"])
        #expect(try dates(SubscriptionSampleData.domainID) == ["2026-02-28"])
        #expect(try dates(SubscriptionSampleData.coffeeID) == ["2025-12-30", "2026-02-13", "2026-03-30"])
        #expect(try dates(SubscriptionSampleData.musicID) == ["2025-12-15", "2026-01-15", "2026-02-15", "2026-03-15", "2026-04-15"])
        #expect(try dates(SubscriptionSampleData.newsID) == ["2025-12-10", "2026-01-10"])
        #expect(try dates(SubscriptionSampleData.cloudID) == ["2026-02-20"])
        let confirmed = try tracker.billingEvents.entries().map(\.value).filter(\.isConfirmed)
        #expect(confirmed.count == 5)
        #expect(confirmed.filter(\.isAmountOverridden).map(\.amount) == [2680])
        for subscription in SubscriptionSampleData.subscriptions { try subscription.validate() }
        let memos = SubscriptionSampleData.subscriptions.compactMap(\.memo).joined()
        #expect(memos.contains(",") && memos.contains("\"") && memos.contains("\n") && memos.contains("\r\n"))
    }

    @Test func populatingTwiceGivesTheSameStore() throws {
        let first = try SubscriptionStore(store: dir.store("one"))
        let second = try SubscriptionStore(store: dir.store("two"))
        try SubscriptionSampleData.populate(first)
        try SubscriptionSampleData.populate(second)
        #expect(try first.billingEvents.entries().map(\.value) == second.billingEvents.entries().map(\.value))
        #expect(try first.subscriptions.entries().map(\.value) == SubscriptionSampleData.subscriptions)
    }
}
