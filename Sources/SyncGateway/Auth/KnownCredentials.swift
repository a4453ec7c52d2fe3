#if PostgreSQL
import Foundation
import KVStore

/// Credentials that verified in the last ``lifetime`` (10 minutes), by the SHA-256 of their text:
/// a request that presents one is served whatever the failed logins of its address, which other
/// clients behind it (a NAT, a proxy) may have spent. Only a credential that verified enters, and one
/// refused since (revoked, expired) leaves at that refusal, so that a flood of unknown credentials
/// never reaches it. Being known admits a request to be checked, never more: a token is looked up
/// again in the request's own transaction, a JWT's signature checked again.
final class KnownCredentials: Sendable {
    private let entries: Locked<BoundedLRU<[UInt8], ContinuousClock.Instant>>
    let lifetime: Duration

    init(capacity: Int, lifetime: Duration = .seconds(600)) {
        entries = Locked(BoundedLRU(capacity: capacity))
        self.lifetime = lifetime
    }

    func remember(_ hash: [UInt8], now: ContinuousClock.Instant = .now) {
        entries.withLock { entries in entries.withValue(for: hash, make: { now }) { $0 = now } }
    }

    /// Whether `hash` verified within ``lifetime`` and was not refused since.
    func contains(_ hash: [UInt8], now: ContinuousClock.Instant = .now) -> Bool {
        guard let at = entries.withLock({ $0.peek(hash) }) else { return false }
        return now - at < lifetime
    }

    /// Forgets `hash`: it was refused (revoked, expired, unknown now).
    func forget(_ hash: [UInt8]) {
        entries.withLock { entries in
            // The LRU has no removal: an entry made old enough to be out of ``lifetime`` is as gone.
            guard entries.peek(hash) != nil else { return }
            entries.withValue(for: hash, make: { .now }) { $0 = .now - .seconds(86_400 * 365) }
        }
    }
}
#endif
