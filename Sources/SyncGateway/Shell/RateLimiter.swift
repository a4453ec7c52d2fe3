#if PostgreSQL
import Foundation
import KVStore
import NIOCore

/// A token bucket per key (`perSecond`, up to `burst`), the keys held in a ``BoundedLRU``.
final class RateLimiter<Key: Hashable & Sendable>: Sendable {
    private struct Bucket {
        var tokens: Double
        var at: ContinuousClock.Instant
    }
    let perSecond: Double
    let burst: Double
    private let buckets: Locked<BoundedLRU<Key, Bucket>>

    init(perSecond: Double, burst: Double, capacity: Int) {
        self.perSecond = perSecond
        self.burst = max(burst, 1)
        buckets = Locked(BoundedLRU(capacity: capacity))
    }

    /// Takes one token for `key`: `nil` if there was one, else how many seconds until there is.
    func admit(_ key: Key, now: ContinuousClock.Instant = .now) -> Int? {
        take(key, now: now, cost: 1)
    }

    /// Whether `key` has a token left, without taking it: `nil` if so, else how long to wait.
    func check(_ key: Key, now: ContinuousClock.Instant = .now) -> Int? {
        take(key, now: now, cost: 0)
    }

    private func take(_ key: Key, now: ContinuousClock.Instant, cost: Double) -> Int? {
        let (perSecond, burst) = (self.perSecond, self.burst)
        return buckets.withLock { buckets in
            buckets.withValue(for: key, make: { Bucket(tokens: burst, at: now) }) { bucket in
                let elapsed = now - bucket.at
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                bucket.tokens = min(burst, bucket.tokens + max(0, seconds) * perSecond)
                bucket.at = now
                guard bucket.tokens >= 1 else { return max(1, Int(((1 - bucket.tokens) / perSecond).rounded(.up))) }
                bucket.tokens -= cost
                return nil
            }
        }
    }

    var remembered: Int { buckets.withLock { $0.count } }
}
#endif
