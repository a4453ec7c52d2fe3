#if PostgreSQL
import Foundation
import KVStore
import SyncKit

/// What a replicator keeps about itself in the store (`_sync.state`), in the same transactions as the
/// changes it applies.
struct ReplicaState: Codable, Hashable, Sendable {
    /// This container's id on the server: random, made once, and again for a copy of the container.
    var device: String
    /// Where the device id was made: the machine's id and the store file's device and inode. A
    /// container copied elsewhere (or restored from a backup) differs, and takes a new device id, so
    /// that two containers never send changes under one id (the server would keep one of each token).
    var home: String?
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
}

/// Which change a sequence number held: its device and token, unique on the server.
struct CursorMark: Codable, Hashable, Sendable {
    var device: String
    var token: UInt64
}

/// What a replicator knows of one key: the server version it last saw (the base of its next change).
struct KeyVersion: Codable, Hashable, Sendable {
    var version: Int64
    var clock: UInt64
    var device: String
}

/// A key whose current value must reach the server although no pending history entry says so: the
/// result of a merge, or a local value that won a conflict.
struct DirtyKey: Codable, Hashable, Sendable {
    var kind: String
    var name: String
    var key: [UInt8]
    var clock: UInt64
    var token: UInt64
}

/// A replicated collection or suite, as `_sync.targets` records it.
struct TargetDeclaration: Codable, Hashable, Sendable {
    var kind: String
    var name: String
    var since: Date
}

extension Mutation.Target {
    /// `collection` or `defaults`, as the server's rows spell it.
    var kindName: String {
        switch self {
        case .collection: "collection"
        case .defaults: "defaults"
        }
    }

    init?(kindName: String, name: String) {
        switch kindName {
        case "collection": self = .collection(name)
        case "defaults": self = .defaults(name)
        default: return nil
        }
    }

    /// The key of `_sync.targets`, and the suffix of the target's versions collection.
    var declarationKey: String {
        switch self {
        case .collection(let name): "c." + name
        case .defaults(let name): "d." + name
        }
    }
}

/// How a conflict between this device's write and another's was settled.
public struct ConflictEvent: Hashable, Sendable, CustomStringConvertible {
    public enum Resolution: String, Hashable, Sendable {
        /// This device's value won (last-writer-wins) and was sent again on top of the server's.
        case keptLocal
        /// The other device's value won and replaced this device's.
        case tookRemote
        /// Both values were merged by the collection's merge function; the result is on both sides.
        case merged
        /// This device's write was refused (reject-and-report): the other device's value stands.
        case rejectedLocal
    }

    /// Where the conflict was found: sending this device's change, or applying another's.
    public enum Stage: String, Hashable, Sendable { case push, pull, resync }

    public var target: Mutation.Target
    /// The key's stored bytes.
    public var key: [UInt8]
    public var resolution: Resolution
    public var stage: Stage
    public var localClock: HybridTimestamp
    public var remoteClock: HybridTimestamp
    public var remoteDevice: String
    /// The server version of the other device's write.
    public var serverVersion: Int64

    public var description: String {
        "\(target) key \(Hex.encode(key)): \(resolution.rawValue) (\(stage.rawValue); local \(localClock), remote \(remoteClock) from \(remoteDevice))"
    }
}

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
    /// A sync round failed; it will be retried.
    case failed(String)
}

extension SyncEvent {
    var isConflict: Bool {
        if case .conflict = self { true } else { false }
    }
}

/// The figures of one ``Replicator/sync()`` round.
public struct SyncReport: Hashable, Sendable, Codable {
    /// Changes the server accepted (or already had).
    public var pushed = 0
    /// Other devices' changes applied here.
    public var pulled = 0
    /// Conflicts resolved in this round.
    public var conflicts = 0
    /// Whether the round reloaded from the server's state.
    public var resynchronized = false
    /// The cursor after the round.
    public var cursor: Int64 = 0
}

/// `kvtool sync status`: where a container's replication stands, read from the store alone.
public struct ReplicationStatus: Hashable, Sendable, Codable {
    public var device: String?
    public var cursor: Int64
    public var targets: [String]
    /// Local changes not yet on the server: entries after the replicator's history consumer plus
    /// values waiting to be sent again.
    public var pendingChanges: Int
    public var pushed: Int
    public var pulled: Int
    public var conflictsResolved: Int
    public var resyncs: Int
    public var lastSyncAt: Date?
    public var lastError: String?
    public var lastErrorAt: Date?
}
#endif
