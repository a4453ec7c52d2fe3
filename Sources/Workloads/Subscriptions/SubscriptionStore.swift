#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

/// The subscription tracker's data in a ``Store``: subscriptions by ID, and billing events by ID with
/// the index `bySubscription` on (subscriptionId, billedAt), so one subscription's events are one
/// cursor scan in date order.
///
/// ```swift
/// let tracker = try SubscriptionStore(store: container.store)   // opens both collections
/// let range = try HistoryRange.standard.days(around: today)
/// try tracker.save(netflix, regeneratingIn: range, now: Date(), author: "app")
/// let events = try tracker.events(of: netflix.id)                 // in date order
/// try tracker.confirmEvent(events[0].id, amount: 1590, now: Date(), author: "app")
/// ```
///
/// Open it (which opens the collections) before any `read { }` or `write { }`, never inside one.
/// The value is small and `Sendable`; keep it and share it between threads. Methods that take a
/// transaction are valid only inside that transaction's closure; the others run their own.
public struct SubscriptionStore: Sendable {
    /// Billing events by (subscriptionId, billedAt), then event ID.
    public static let bySubscription = SecondaryIndex<BillingEvent, Pair<UUID, LogicalDay>>("bySubscription") {
        Pair($0.subscriptionId, $0.billedAt)
    }

    public let store: Store
    /// `subscriptions`: UUID → ``Subscription``.
    public let subscriptions: KVCollection<UUID, Subscription>
    /// `billingEvents`: UUID → ``BillingEvent``, indexed by ``bySubscription``.
    public let billingEvents: KVCollection<UUID, BillingEvent>

    /// Opens (creating if needed) the two collections in `store`.
    ///
    /// - Throws: `KVStoreError` if the collections exist with other encodings, or an `LMDBError`.
    ///   Must not be called inside a transaction.
    public init(store: Store) throws {
        self.store = store
        subscriptions = try store.collection("subscriptions", key: UUID.self, value: Subscription.self)
        billingEvents = try store.collection("billingEvents", key: UUID.self, value: BillingEvent.self,
                                             indexes: [Self.bySubscription])
    }

    /// What a regeneration did to the projected events in its range.
    public struct Regeneration: Hashable, Sendable {
        /// New projected events.
        public var created = 0
        /// Projected events rewritten (a new amount or currency).
        public var updated = 0
        /// Projected events removed (their day left the schedule).
        public var deleted = 0
        /// Projected events already as they should be, left untouched.
        public var unchanged = 0

        public init(created: Int = 0, updated: Int = 0, deleted: Int = 0, unchanged: Int = 0) {
            self.created = created
            self.updated = updated
            self.deleted = deleted
            self.unchanged = unchanged
        }
    }

    // MARK: - Saving

    /// Validates `subscription`, stores it and regenerates its projected events in `range`, all in
    /// one write transaction: other processes see the old state or the new one, never a mixture.
    ///
    /// ```swift
    /// var netflix = try tracker.subscriptions.get(id)!
    /// netflix.amount = 1590
    /// try tracker.save(netflix, regeneratingIn: range, now: Date(), author: "app")
    /// ```
    ///
    /// The subscription is stored as given (its `createdAt`/`updatedAt` are the caller's); `now`
    /// stamps the events created or updated. See ``regenerateProjectedEvents(for:in:now:in:)``.
    ///
    /// - Throws: ``SubscriptionValidationError`` before anything is written, or a store error.
    @discardableResult
    public func save(_ subscription: Subscription, regeneratingIn range: ClosedRange<LogicalDay>, now: Date,
                     author: String? = nil) throws -> Regeneration {
        try subscription.validate()
        return try store.write(author: author) { tx in
            try save(subscription, regeneratingIn: range, now: now, in: tx)
        }
    }

    /// ``save(_:regeneratingIn:now:author:)`` inside a write transaction of yours.
    @discardableResult
    public func save(_ subscription: Subscription, regeneratingIn range: ClosedRange<LogicalDay>, now: Date,
                     in transaction: WriteTransaction) throws -> Regeneration {
        try subscription.validate()
        try subscriptions.put(subscription, forKey: subscription.id, in: transaction)
        return try regenerateProjectedEvents(for: subscription, in: range, now: now, in: transaction)
    }

    /// Regenerates the projected events of `subscription` in `range` (seed §5.3):
    ///
    /// 1. projected events in `range` whose day is no longer on the schedule are deleted;
    /// 2. the schedule's days (``Subscription/billingDates(in:)``) get projected events with the
    ///    subscription's current amount and currency;
    /// 3. confirmed events are never touched, and no projected event is made on a day that has a
    ///    confirmed one.
    ///
    /// Projected events keep their deterministic IDs, creation time and memo; one already as it
    /// should be is not rewritten. Events outside `range` are left alone.
    ///
    /// - Throws: ``SubscriptionValidationError`` for an invalid subscription, or a store error.
    @discardableResult
    public func regenerateProjectedEvents(for subscription: Subscription, in range: ClosedRange<LogicalDay>,
                                          now: Date, in transaction: WriteTransaction) throws -> Regeneration {
        try subscription.validate()
        let existing = try billingEvents.entries(
            in: Self.bySubscription,
            Pair(subscription.id, range.lowerBound)...Pair(subscription.id, range.upperBound),
            in: transaction).map(\.value)
        let confirmedDays = Set(existing.filter(\.isConfirmed).map(\.billedAt))
        let desired = subscription.projectedEvents(in: range, now: now).filter { !confirmedDays.contains($0.billedAt) }
        let desiredIDs = Set(desired.map(\.id))
        var existingProjected: [UUID: BillingEvent] = [:]
        var result = Regeneration()

        for event in existing where event.eventType == .projected {
            if desiredIDs.contains(event.id) {
                existingProjected[event.id] = event
            } else {
                try billingEvents.delete(event.id, in: transaction)
                result.deleted += 1
            }
        }
        for var event in desired {
            guard let old = existingProjected[event.id] else {
                try billingEvents.put(event, forKey: event.id, in: transaction)
                result.created += 1
                continue
            }
            event.createdAt = old.createdAt
            event.memo = old.memo
            event.updatedAt = old.updatedAt
            if event == old {
                result.unchanged += 1
            } else {
                event.updatedAt = now
                try billingEvents.put(event, forKey: event.id, in: transaction)
                result.updated += 1
            }
        }
        return result
    }

    /// Regenerates the stored subscription `id`'s projected events in `range`, in a write transaction
    /// of its own: for moving the window forward as days pass.
    ///
    /// - Throws: ``SubscriptionStoreError/subscriptionNotFound(_:)``, or as
    ///   ``regenerateProjectedEvents(for:in:now:in:)``.
    @discardableResult
    public func regenerateProjectedEvents(forSubscription id: UUID, in range: ClosedRange<LogicalDay>, now: Date,
                                          author: String? = nil) throws -> Regeneration {
        try store.write(author: author) { tx in
            guard let subscription = try subscriptions.get(id, in: tx) else {
                throw SubscriptionStoreError.subscriptionNotFound(id)
            }
            return try regenerateProjectedEvents(for: subscription, in: range, now: now, in: tx)
        }
    }

    // MARK: - Confirming

    /// Marks the event `id` as confirmed, optionally with an amount and a memo for this billing
    /// only, and returns it as stored.
    ///
    /// ```swift
    /// try tracker.confirmEvent(eventID, now: Date())                // the projected amount
    /// try tracker.confirmEvent(eventID, amount: 1590, now: Date())  // isAmountOverridden = true
    /// ```
    ///
    /// Giving an `amount` sets it and `isAmountOverridden`; without one the amount (and flag) stay.
    /// Giving a `memo` replaces the event's memo; without one it stays. Confirming a confirmed event
    /// again is allowed (to correct its amount). `updatedAt` becomes `now`.
    ///
    /// - Throws: ``SubscriptionStoreError/eventNotFound(_:)``; ``SubscriptionValidationError`` for a
    ///   negative or NaN amount (nothing is written); a store error.
    @discardableResult
    public func confirmEvent(_ id: UUID, amount: Decimal? = nil, memo: String? = nil, now: Date,
                             author: String? = nil) throws -> BillingEvent {
        try store.write(author: author) { tx in try confirmEvent(id, amount: amount, memo: memo, now: now, in: tx) }
    }

    /// ``confirmEvent(_:amount:memo:now:author:)`` inside a write transaction of yours.
    @discardableResult
    public func confirmEvent(_ id: UUID, amount: Decimal? = nil, memo: String? = nil, now: Date,
                             in transaction: WriteTransaction) throws -> BillingEvent {
        guard var event = try billingEvents.get(id, in: transaction) else {
            throw SubscriptionStoreError.eventNotFound(id)
        }
        event.eventType = .confirmed
        if let amount {
            event.amount = amount
            event.isAmountOverridden = true
        }
        if let memo { event.memo = memo }
        event.updatedAt = now
        try event.validate()
        try billingEvents.put(event, forKey: id, in: transaction)
        return event
    }

    // MARK: - Reading

    /// The events of subscription `id`, in billing-date order, read through the index.
    public func events(of id: UUID, in transaction: ReadTransaction) throws -> [BillingEvent] {
        try billingEvents.entries(in: Self.bySubscription, prefix: id, in: transaction).map(\.value)
    }

    /// The events of subscription `id` billed in `days`, in billing-date order.
    public func events(of id: UUID, billedIn days: ClosedRange<LogicalDay>,
                       in transaction: ReadTransaction) throws -> [BillingEvent] {
        try billingEvents.entries(in: Self.bySubscription, Pair(id, days.lowerBound)...Pair(id, days.upperBound),
                                  in: transaction).map(\.value)
    }

    /// The events of subscription `id`, in billing-date order, read in a transaction of their own.
    public func events(of id: UUID) throws -> [BillingEvent] {
        try store.read { tx in try events(of: id, in: tx) }
    }

    // MARK: - Deleting

    /// Deletes subscription `id` and all its billing events in one write transaction; returns whether
    /// the subscription existed.
    @discardableResult
    public func deleteSubscription(_ id: UUID, author: String? = nil) throws -> Bool {
        try store.write(author: author) { tx in
            for event in try events(of: id, in: tx) { try billingEvents.delete(event.id, in: tx) }
            return try subscriptions.delete(id, in: tx)
        }
    }
}
