#if PostgreSQL
import Foundation
import KVStore
import SyncKit

/// How this device's user settles a key held behind another device's change that this device cannot
/// apply (``Replicator/resolveQuarantined(sequence:as:)``, `kvtool sync quarantine drop|keep-mine`).
public enum QuarantineResolution: String, Hashable, Sendable, Codable, CaseIterable {
    /// Take nothing of the unreadable change, and follow the server from its version on; a local write
    /// that waited behind it is dropped.
    case drop
    /// Send this device's value of the key over it, stamped later: it becomes every device's value.
    case keepMine = "keep-mine"
}

/// What ``Replicator/resolveQuarantined(sequence:as:)`` did.
public struct QuarantineResolveReport: Hashable, Sendable {
    public var resolution: QuarantineResolution
    /// The key's bytes, and its collection or suite (`nil` for a kind no replicator writes).
    public var key: [UInt8]
    public var target: Mutation.Target?
    /// Quarantined changes of the key settled (removed from the quarantine).
    public var resolved = 0
    /// For ``QuarantineResolution/drop``: local writes of the key that waited and were dropped.
    public var droppedLocalWrites = 0
    /// For ``QuarantineResolution/keepMine``: whether the key is queued to be sent at the next sync.
    public var queued = false
}
#endif
