#if PostgreSQL
import Foundation
import KVStore
import SyncKitPostgres

/// Where the directory placed each group when the gateway last read it (``SyncDirectory``), for
/// ``lifetime``: a group's requests read it once per lifetime, not once each. Past its lifetime, an
/// entry is still the answer while the home database does not answer (the directory cannot be read,
/// and the group's own database may well answer). At most `capacity` groups are remembered (the
/// least recently used is forgotten first), so that devices naming many groups cannot grow it.
final class DirectoryCache: Sendable {
    /// How long an entry is taken as current: a group placed elsewhere (`kvtool sync directory set`)
    /// is served from its new database by every gateway within this.
    static let lifetime: Duration = .seconds(5)

    private let entries: Locked<BoundedLRU<String, (place: SyncDirectory.Place, read: ContinuousClock.Instant)>>

    init(capacity: Int) {
        entries = Locked(BoundedLRU(capacity: capacity))
    }

    /// The place remembered for `group`, and whether it was read within ``lifetime``.
    func place(of group: String, now: ContinuousClock.Instant = .now) -> (place: SyncDirectory.Place, current: Bool)? {
        entries.withLock { entries in
            entries.peek(group).map { ($0.place, now - $0.read < Self.lifetime) }
        }
    }

    func remember(_ place: SyncDirectory.Place, of group: String, now: ContinuousClock.Instant = .now) {
        entries.withLock { entries in
            entries.withValue(for: group, make: { (place, now) }) { $0 = (place, now) }
        }
    }

    /// Whether `group` may be served from the database `name`: its remembered place, or any place when
    /// none is remembered (a revocation sweep then closes the group's streams rather than miss one).
    func mayBe(_ group: String, in name: String) -> Bool {
        guard let (place, _) = place(of: group) else { return true }
        switch place {
        case .home: return name == SyncDirectory.home
        case .named(let named): return named == name
        case .held: return true
        }
    }
}
#endif
