#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

/// When a consumer counts as gone, so that it stops holding history back.
///
/// Purging keeps every entry a live consumer has not acknowledged. A consumer that has not
/// acknowledged anything for ``maxAge``, or lags more than ``maxLag`` entries behind, is taken to have
/// gone away (an uninstalled widget, say): history is purged past it, and its next read answers
/// ``HistoryChanges/expired(purgedThrough:)``.
public struct RetentionPolicy: Hashable, Sendable {
    /// Seconds since a consumer's last acknowledgement after which it counts as gone; `nil`: never.
    public var maxAge: TimeInterval?
    /// Entries a consumer may lag behind before it counts as gone; `nil`: any number.
    public var maxLag: UInt64?

    public init(maxAge: TimeInterval? = nil, maxLag: UInt64? = nil) {
        self.maxAge = maxAge
        self.maxLag = maxLag
    }

    /// Seven days, or 100,000 entries behind.
    public static let `default` = RetentionPolicy(maxAge: 7 * 86_400, maxLag: 100_000)
}

/// What ``History/purge(retaining:now:)`` did.
public struct PurgeReport: Hashable, Sendable {
    /// Entries removed.
    public var removed: Int
    /// The last token removed, now and before.
    public var purgedThrough: ChangeToken
    /// Consumers the policy counted as gone, whose history was purged anyway.
    public var goneConsumers: [String]
}

extension History {
    /// Removes the entries every live consumer has acknowledged, in one transaction.
    ///
    /// With no live consumer, everything recorded so far is removed: history is for consumers.
    public func purge(retaining policy: RetentionPolicy = .default, now: Date = Date()) throws -> PurgeReport {
        try store.write(author: nil) { tx in
            let last = try currentToken(in: tx)
            let before = try state.get(Self.purgedThroughKey, in: tx) ?? 0
            var floor = last.rawValue
            var gone: [String] = []
            try consumerRecords.forEach(in: tx) { name, record in
                let stale = policy.maxAge.map { now.timeIntervalSince(record.updatedAt) > $0 } ?? false
                let behind = policy.maxLag.map { last.rawValue - min(record.token.rawValue, last.rawValue) > $0 } ?? false
                if stale || behind {
                    gone.append(name)
                } else {
                    floor = min(floor, record.token.rawValue)
                }
                return true
            }
            guard floor > before else {
                return PurgeReport(removed: 0, purgedThrough: ChangeToken(rawValue: before), goneConsumers: gone)
            }
            // The entries carry the last token and the clock: record both before the last entry may go.
            let recorded = try lastTokenAndClock(in: tx)
            let doomed = try entries.keys((before + 1)...floor, in: tx)
            for token in doomed { try entries.delete(token, in: tx) }
            try state.put(floor, forKey: Self.purgedThroughKey, in: tx)
            try state.put(recorded.token, forKey: Self.lastTokenKey, in: tx)
            try state.put(recorded.clock, forKey: Self.clockKey, in: tx)
            return PurgeReport(removed: doomed.count, purgedThrough: ChangeToken(rawValue: floor), goneConsumers: gone)
        }
    }
}
