#if PostgreSQL
import Foundation
import KVStore
import NIOCore

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
#endif
