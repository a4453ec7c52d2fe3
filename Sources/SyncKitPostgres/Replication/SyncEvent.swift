#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

/// What a replicator tells the app as it works.
public enum SyncEvent: Hashable, Sendable {
    /// A conflict was resolved.
    case conflict(ConflictEvent)
    /// The server's log no longer reaches back to this device's cursor: the replicated targets were
    /// reloaded from the server's current state (history's `expired` contract).
    case resynchronized(cursor: Int64)
    /// The server is not the one this device synced with (another server, or the same one recreated
    /// or restored from an older backup: it has forgotten changes this device saw). The cursor went
    /// back to zero and every replicated key was queued to be sent again, with the clock of the version
    /// this device last knew; the server's keys arrive as a first sync's do.
    case serverChanged(server: String)
    /// Other devices' changes to `targets` were applied and committed (one pull batch, a resync or
    /// a merge): the moment to refresh what the app derives from them outside the store, such as a
    /// widget feed. (Indexes and derived collections were updated in the same transaction.) A resync
    /// ends with ``resynchronized(cursor:)`` instead, after which everything may have changed.
    case applied(targets: Set<Mutation.Target>, changes: Int)
    /// A change from another device could not be applied and was quarantined
    /// (``QuarantinedChange``): the pull went on past it.
    case quarantined(QuarantinedChange)
    /// The server refused a write of this device with a reason (``RejectedWrite``): its row of the key
    /// was put back here, the write was kept with the reason, and the push went on.
    case rejected(RejectedWrite)
    /// A sync round failed; it will be retried.
    case failed(String)
}

extension SyncEvent {
    var isConflict: Bool {
        if case .conflict = self { true } else { false }
    }
}
#endif
