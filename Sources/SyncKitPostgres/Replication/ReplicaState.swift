#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

/// What a replicator keeps about itself in the store (`_sync.state`), in the same transactions as the
/// changes it applies.
struct ReplicaState: Codable, Hashable, Sendable {
    /// This container's id on the server: random, made once, and again for a copy of the container;
    /// through a sync gateway, the one its hello gives (the credential's device name and this
    /// container's install: ``install``).
    var device: String
    /// Where the device id was made: the machine's id and the store file's device and inode. A
    /// container copied elsewhere (or restored from a backup) differs, and takes a new device id and
    /// install id, so that two containers never send changes under one id (the server would keep one of
    /// each token).
    var home: String?
    /// This container's install id (`InstallID`): a secret, made once per container (and again for a
    /// copy), sent to a sync gateway with the credential so that a container under a device name used
    /// before (an app installed again, a token issued again) is a device id of its own. `nil` in state
    /// written before installs had ids, until the next replicator starts.
    var install: String?
    /// The last server sequence number applied (or skipped as this device's own).
    var cursor: Int64 = 0
    /// The id of the server the cursor and the known versions belong to (nil before the first sync,
    /// and in state written before servers had ids).
    var server: String?
    /// The change at the cursor, as this device applied it: if the server's log has another change
    /// there (or none, unpruned), the log is not the one this device followed.
    var cursorMark: CursorMark?
    var pushed: Int = 0
    var pulled: Int = 0
    var conflicts: Int = 0
    var resyncs: Int = 0
    var lastSyncAt: Date?
    var lastError: String?
    var lastErrorAt: Date?
    /// The next token for a change that is not a history entry (a merged value, a value re-sent after
    /// a conflict): tokens from 2^62 up never meet history's.
    var nextExtraToken: UInt64 = 1 << 62
    /// Quarantined changes dropped to keep the quarantine within its bounds (oldest first).
    var quarantineEvicted: Int?
    /// The number of the last write kept as rejected (``RejectedWrite/id``): numbers are never given twice.
    var lastRejectedID: UInt64?
    /// Rejected writes dropped to keep their records within their bounds (oldest first).
    var rejectedEvicted: Int?
}
#endif
