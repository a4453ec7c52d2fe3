#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

/// What ``Replicator/retryQuarantined()`` did.
public struct QuarantineRetryReport: Hashable, Sendable, Codable {
    /// Quarantined changes now applied (or settled as conflicts).
    public var applied = 0
    /// Quarantined changes dropped because a newer version of their key had already been applied.
    public var superseded = 0
    /// Changes still quarantined.
    public var remaining = 0
}
#endif
