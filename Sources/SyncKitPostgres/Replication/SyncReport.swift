#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

/// The figures of one ``Replicator/sync()`` round.
public struct SyncReport: Hashable, Sendable, Codable {
    /// Changes the server accepted (or already had).
    public var pushed = 0
    /// Other devices' changes applied here.
    public var pulled = 0
    /// Conflicts resolved in this round.
    public var conflicts = 0
    /// Other devices' changes quarantined in this round (``QuarantinedChange``).
    public var quarantined = 0
    /// Whether the round reloaded from the server's state.
    public var resynchronized = false
    /// The cursor after the round.
    public var cursor: Int64 = 0

    public init() {}

    /// Adds `round`'s figures to these (the cursor becomes `round`'s).
    public mutating func add(_ round: SyncReport) {
        pushed += round.pushed
        pulled += round.pulled
        conflicts += round.conflicts
        quarantined += round.quarantined
        resynchronized = resynchronized || round.resynchronized
        cursor = round.cursor
    }
}
#endif
