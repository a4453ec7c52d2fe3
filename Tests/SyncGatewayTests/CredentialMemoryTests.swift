#if PostgreSQL
import Foundation
@testable import SyncGateway
import Testing

/// What the gateway remembers of credentials between requests, at a clock the test moves:
/// ``KnownCredentials`` (which failures are not counted against an address) and ``RecentlyVerified``
/// (what a push's head is admitted on), each for its lifetime and under its capacity.
@Suite struct CredentialMemoryTests {
    static func principal(expiresAt: Date? = nil) -> SyncGateway.Principal {
        SyncGateway.Principal(id: 7, group: "g", device: "d", readOnly: false, expiresAt: expiresAt, key: "device g\u{0}d")
    }

    @Test func aKnownCredentialIsKnownForItsLifetimeUntilForgotten() {
        let known = KnownCredentials(capacity: 10, lifetime: .seconds(60))
        let start = ContinuousClock.now
        let (a, b) = ([UInt8](repeating: 1, count: 32), [UInt8](repeating: 2, count: 32))
        #expect(!known.contains(a, now: start))
        known.remember(a, now: start)
        #expect(known.contains(a, now: start + .seconds(59)))
        #expect(!known.contains(a, now: start + .seconds(60)))
        #expect(!known.contains(b, now: start))
        // Remembered again, its lifetime starts again; forgotten, it is gone at once.
        known.remember(a, now: start + .seconds(50))
        #expect(known.contains(a, now: start + .seconds(100)))
        known.forget(a)
        #expect(!known.contains(a, now: start + .seconds(50)))
        // Forgetting one never known adds nothing.
        known.forget(b)
        #expect(!known.contains(b))
    }

    @Test func knownCredentialsStayUnderTheirCapacity() {
        let known = KnownCredentials(capacity: 2)
        let hashes = (0..<3).map { [UInt8](repeating: $0, count: 32) }
        for hash in hashes { known.remember(hash) }
        #expect(!known.contains(hashes[0]) && known.contains(hashes[1]) && known.contains(hashes[2]))
    }

    @Test func aVerifiedPrincipalIsReusedForItsLifetimeAndNotPastItsExpiry() throws {
        let verified = RecentlyVerified(capacity: 10, lifetime: .seconds(5))
        let start = ContinuousClock.now
        let hash = [UInt8](repeating: 9, count: 32)
        #expect(verified.recent(hash, now: start) == nil)
        verified.remember(hash, Self.principal(), now: start)
        let found = try #require(verified.recent(hash, now: start + .seconds(4)))
        #expect(found.id == 7 && found.group == "g" && found.device == "d")
        #expect(verified.recent(hash, now: start + .seconds(5)) == nil)
        // A credential that expired is never reused, however recently it was verified.
        let expired = [UInt8](repeating: 8, count: 32)
        verified.remember(expired, Self.principal(expiresAt: Date(timeIntervalSinceNow: -1)), now: start)
        #expect(verified.recent(expired, now: start) == nil)
    }
}
#endif
