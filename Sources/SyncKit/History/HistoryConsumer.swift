#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

/// What the store keeps about a consumer.
struct ConsumerRecord: Codable, Hashable, Sendable {
    var token: ChangeToken
    var updatedAt: Date
    var author: String?
}

/// A named reader of the history whose position (its token) is kept in the store, so it survives
/// restarts and is visible to ``History/purge(retaining:now:)``, which never removes what a live
/// consumer has not acknowledged.
///
/// ```swift
/// let widget = try history.consumer(named: "widget", author: "widget")
/// switch try widget.pendingChanges() {
/// case .changes(let transactions, let next):
///     refresh(from: transactions)
///     try widget.acknowledge(through: next)
/// case .expired:
///     reloadEverything()
///     try widget.resynchronized()
/// }
/// ```
public struct HistoryConsumer: Sendable {
    /// The consumer's name, unique in the store.
    public let name: String
    /// Entries written by this author are left out of ``pendingChanges(matching:)``: a process does not
    /// need to hear about its own writes.
    public let author: String?
    public let history: History

    /// The last token this consumer acknowledged.
    public func token() throws -> ChangeToken {
        guard let record = try history.consumerRecords.get(name) else { throw SyncError.unknownConsumer(name) }
        return record.token
    }

    /// The last token this consumer acknowledged, as `transaction` sees it.
    public func token(in transaction: ReadTransaction) throws -> ChangeToken {
        guard let record = try history.consumerRecords.get(name, in: transaction) else { throw SyncError.unknownConsumer(name) }
        return record.token
    }

    /// The changes after this consumer's token, without its own author's entries.
    public func pendingChanges(matching filter: HistoryFilter = .all) throws -> HistoryChanges {
        try history.store.read { tx in
            guard let record = try history.consumerRecords.get(name, in: tx) else { throw SyncError.unknownConsumer(name) }
            var filter = filter
            filter.excludingAuthor = filter.excludingAuthor ?? author
            return try history.changes(since: record.token, matching: filter, in: tx)
        }
    }

    /// Whether history was purged past this consumer's token, so that ``pendingChanges(matching:)``
    /// answers `.expired`: found without reading a single entry.
    public func isExpired() throws -> Bool {
        try history.store.read { tx in
            guard let record = try history.consumerRecords.get(name, in: tx) else { throw SyncError.unknownConsumer(name) }
            return try history.expiry(of: record.token, in: tx) != nil
        }
    }

    /// Records that everything through `token` has been handled. Tokens only move forward: an older
    /// token than the one stored changes nothing but the consumer's last-seen time.
    public func acknowledge(through token: ChangeToken, now: Date = Date()) throws {
        try history.store.write(author: author) { tx in try acknowledge(through: token, now: now, in: tx) }
    }

    /// ``acknowledge(through:now:)`` inside a write transaction of the consumer's store, with what
    /// else the caller records in it.
    package func acknowledge(through token: ChangeToken, now: Date = Date(), in tx: WriteTransaction) throws {
        guard var record = try history.consumerRecords.get(name, in: tx) else { throw SyncError.unknownConsumer(name) }
        let current = try history.currentToken(in: tx)
        guard token <= current else { throw SyncError.tokenFromTheFuture(token: token, current: current) }
        record.token = max(record.token, token)
        record.updatedAt = now
        try history.consumerRecords.put(record, forKey: name, in: tx)
    }

    /// After an ``HistoryChanges/expired(purgedThrough:)`` answer and a full reload: moves the token to
    /// the current end of the history and returns it.
    @discardableResult
    public func resynchronized(now: Date = Date()) throws -> ChangeToken {
        try history.store.write(author: author) { tx in
            let current = try history.currentToken(in: tx)
            try history.consumerRecords.put(ConsumerRecord(token: current, updatedAt: now, author: author),
                                            forKey: name, in: tx)
            return current
        }
    }
}

/// Where a new consumer starts reading.
public enum ConsumerStart: Sendable {
    /// After everything recorded so far: it hears of changes made from now on.
    case now
    /// At the oldest entry still kept.
    case oldest
}

/// A registered consumer, as ``History/consumers()`` lists them.
public struct ConsumerInfo: Hashable, Sendable {
    public var name: String
    public var token: ChangeToken
    public var updatedAt: Date
    public var author: String?
}

extension History {
    /// The consumer `name`, registered now if it is new.
    ///
    /// - Parameters:
    ///   - author: its own writes are left out of what it reads.
    ///   - start: where a new consumer starts; an existing one keeps its token.
    public func consumer(named name: String, author: String? = nil, startingAt start: ConsumerStart = .now,
                         now: Date = Date()) throws -> HistoryConsumer {
        guard !name.isEmpty, name.utf8.count <= 200 else {
            throw SyncError.invalidConsumerName(name)
        }
        if try consumerRecords.get(name) == nil {
            try store.write(author: author) { tx in
                guard try consumerRecords.get(name, in: tx) == nil else { return }
                let token = switch start {
                case .now: try currentToken(in: tx)
                case .oldest: ChangeToken(rawValue: try state.get(Self.purgedThroughKey, in: tx) ?? 0)
                }
                try consumerRecords.put(ConsumerRecord(token: token, updatedAt: now, author: author), forKey: name, in: tx)
            }
        }
        return HistoryConsumer(name: name, author: author, history: self)
    }

    /// Every registered consumer, by name.
    public func consumers() throws -> [ConsumerInfo] {
        try consumerRecords.entries().map {
            ConsumerInfo(name: $0.key, token: $0.value.token, updatedAt: $0.value.updatedAt, author: $0.value.author)
        }
    }

    /// Forgets a consumer, so that it no longer holds history back. Returns whether it existed.
    @discardableResult
    public func removeConsumer(named name: String) throws -> Bool {
        try store.write { tx in try consumerRecords.delete(name, in: tx) }
    }
}
