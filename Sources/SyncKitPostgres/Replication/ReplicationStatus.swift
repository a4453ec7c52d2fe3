#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

/// `kvtool sync status`: where a container's replication stands, read from the store alone.
public struct ReplicationStatus: Hashable, Sendable, Codable {
    public var device: String?
    public var cursor: Int64
    public var targets: [String]
    /// Local changes not yet on the server: entries after the replicator's history consumer plus
    /// values waiting to be sent again. The same count as ``SyncKit/SyncStatus/pending`` (one function
    /// counts both), uncapped.
    public var pendingChanges: Int
    /// This container's changes the server has, each counted once (``SyncReport/pushed``, added up).
    public var pushed: Int
    public var pulled: Int
    public var conflictsResolved: Int
    public var resyncs: Int
    public var lastSyncAt: Date?
    public var lastError: String?
    public var lastErrorAt: Date?
    /// Changes from other devices held in quarantine (``QuarantinedChange``).
    public var quarantined: Int = 0
    /// This device's writes the server refused, kept with their reasons (``RejectedWrite``).
    public var rejected: Int = 0
    /// The container's files waiting to upload (issue 49), one line each with the reason the last
    /// upload stopped, if it did (`too_large`, `quota_exceeded` with the server's limit); `nil` when none
    /// waits. Their manifest rows stay pending until the server has their bytes.
    public var filesWaiting: [String]? = nil
}
#endif
