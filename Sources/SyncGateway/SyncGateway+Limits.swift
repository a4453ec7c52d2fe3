#if PostgreSQL
import Foundation
import KVStore
import NIOCore

/// A map that holds `capacity` entries at most, forgetting the least recently used one to make room
/// for a new one: what a limiter remembers of its keys is bounded, and a flood of new keys evicts
/// only keys that were not used since, one at a time (never everything at once).
struct BoundedLRU<Key: Hashable, Value> {
    private struct Node {
        var key: Key
        var value: Value
        var newer: Int
        var older: Int
    }

    let capacity: Int
    private var index: [Key: Int] = [:]
    private var nodes: [Node] = []
    /// The most and least recently used slots (-1 when empty).
    private var newest = -1
    private var oldest = -1

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    var count: Int { index.count }

    /// The value of `key`, marked as just used, or `make()`'s (the oldest entry evicted if full).
    mutating func withValue<R>(for key: Key, make: () -> Value, _ body: (inout Value) -> R) -> R {
        let slot: Int
        if let found = index[key] {
            slot = found
            unlink(slot)
        } else if nodes.count < capacity {
            slot = nodes.count
            nodes.append(Node(key: key, value: make(), newer: -1, older: -1))
            index[key] = slot
        } else {
            slot = oldest
            unlink(slot)
            index[nodes[slot].key] = nil
            nodes[slot] = Node(key: key, value: make(), newer: -1, older: -1)
            index[key] = slot
        }
        linkAsNewest(slot)
        return body(&nodes[slot].value)
    }

    /// The value of `key` without marking it used.
    func peek(_ key: Key) -> Value? { index[key].map { nodes[$0].value } }

    private mutating func unlink(_ slot: Int) {
        let (newer, older) = (nodes[slot].newer, nodes[slot].older)
        if newer >= 0 { nodes[newer].older = older } else { newest = older }
        if older >= 0 { nodes[older].newer = newer } else { oldest = newer }
        nodes[slot].newer = -1
        nodes[slot].older = -1
    }

    private mutating func linkAsNewest(_ slot: Int) {
        nodes[slot].older = newest
        nodes[slot].newer = -1
        if newest >= 0 { nodes[newest].newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
    }
}

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

/// Tokens verified in the last seconds, by their SHA-256: what a push's head is admitted on before its
/// body, without a database round trip of its own (the push's transaction verifies the token again).
/// Only verified tokens enter, in an LRU: unknown ones cost a lookup, limited by their address.
final class RecentlyVerified: Sendable {
    private let entries: Locked<BoundedLRU<[UInt8], (principal: SyncGateway.Principal, at: ContinuousClock.Instant)>>
    let lifetime: Duration

    init(capacity: Int, lifetime: Duration) {
        entries = Locked(BoundedLRU(capacity: capacity))
        self.lifetime = lifetime
    }

    func remember(_ hash: [UInt8], _ principal: SyncGateway.Principal, now: ContinuousClock.Instant = .now) {
        entries.withLock { entries in entries.withValue(for: hash, make: { (principal, now) }) { $0 = (principal, now) } }
    }

    /// The principal of `hash`, if verified within ``lifetime`` and not expired since.
    func recent(_ hash: [UInt8], now: ContinuousClock.Instant = .now) -> SyncGateway.Principal? {
        guard let found = entries.withLock({ $0.peek(hash) }), now - found.at < lifetime else { return nil }
        if let expiry = found.principal.expiresAt, expiry <= Date() { return nil }
        return found.principal
    }
}

/// At most `permits` holders at once; the others wait in order, without a thread.
final class AsyncSemaphore: Sendable {
    private let state: Locked<(permits: Int, waiting: [CheckedContinuation<Void, Never>])>

    init(permits: Int) { state = Locked((permits, [])) }

    func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = state.withLock { state -> Bool in
                guard state.permits > 0 else {
                    state.waiting.append(continuation)
                    return false
                }
                state.permits -= 1
                return true
            }
            if granted { continuation.resume() }
        }
    }

    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiting.isEmpty else {
                state.permits += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}

/// Where a request came from, as the failed-authentication limit counts it: an IPv4 address, or an
/// IPv6 address's /64 (what one host or one home network holds), or a Unix socket's path.
struct SourceAddress: Hashable, Sendable, CustomStringConvertible {
    let bytes: [UInt8]

    init(_ address: SocketAddress?) {
        switch address {
        case .v4(let v4)?:
            bytes = withUnsafeBytes(of: v4.address.sin_addr) { [4] + Array($0) }
        case .v6(let v6)?:
            bytes = withUnsafeBytes(of: v6.address.sin6_addr) { [6] + Array($0.prefix(8)) }
        default:
            bytes = [0]
        }
    }

    var description: String {
        switch bytes.first {
        case 4: bytes.dropFirst().map(String.init).joined(separator: ".")
        case 6: stride(from: 1, to: bytes.count, by: 2).map { Hex.encode(Array(bytes[$0..<min($0 + 2, bytes.count)])) }
            .joined(separator: ":") + "::/64"
        default: "local"
        }
    }
}
#endif
