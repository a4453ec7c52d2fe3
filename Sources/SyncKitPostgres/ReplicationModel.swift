#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

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
    /// Quarantined changes dropped to keep the quarantine within its bounds (oldest first).
    var quarantineEvicted: Int?
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
    /// True when the key was queued by a resync or after history was purged (its clock is the
    /// requeue's, not a write's): the server keeps its own equal value then, rather than take the
    /// same value again. Absent (nil) in keys queued by a write, and in state written before.
    var requeued: Bool? = nil
}

/// A change pulled from the server that this device could not apply, kept with its raw bytes and the
/// reason in `_sync.quarantine` (key: its sequence number) instead of stopping the pull: a value
/// written by a newer version of the app, a row no replicator writes, or a clock further ahead than
/// ``Replicator/Options/maxClockSkew``. The cursor moves past it and later changes apply;
/// ``Replicator/retryQuarantined()`` (`kvtool sync quarantine retry`) applies the ones that now
/// can be, after an app upgrade or once the clocks agree. While a key has a quarantined change, this
/// device's own writes of it wait (`pendingChanges`) rather than go over the server's newer value.
public struct QuarantinedChange: Codable, Hashable, Sendable, CustomStringConvertible {
    /// The server's sequence number of the change.
    public var sequence: Int64
    /// `collection` or `defaults`, as the server's row spells it (or whatever a bad row holds).
    public var kind: String
    public var name: String
    public var key: [UInt8]
    /// The value's bytes (`nil` for a delete, or when the value was over the size limit and was not
    /// read).
    public var value: [UInt8]?
    /// Whether `value` was read: false when it was over ``Replicator/Options/maxValueBytes``.
    public var valueKept: Bool
    public var clock: UInt64
    /// The device that sent it.
    public var device: String
    public var token: UInt64
    /// Why it was not applied, in one line.
    public var reason: String
    public var quarantinedAt: Date

    /// The collection or suite it belongs to, if its kind is one a replicator writes.
    public var target: Mutation.Target? { Mutation.Target(kindName: kind, name: name) }

    enum CodingKeys: String, CodingKey {
        case sequence, kind, name, key, value, valueKept, clock, device, token, reason, quarantinedAt
    }

    public init(sequence: Int64, kind: String, name: String, key: [UInt8], value: [UInt8]?, valueKept: Bool, clock: UInt64,
                device: String, token: UInt64, reason: String, quarantinedAt: Date) {
        self.sequence = sequence
        self.kind = kind
        self.name = name
        self.key = key
        self.value = value
        self.valueKept = valueKept
        self.clock = clock
        self.device = device
        self.token = token
        self.reason = reason
        self.quarantinedAt = quarantinedAt
    }

    // Bytes are stored as byte strings (`Data`), not as arrays of numbers: a value of megabytes
    // decodes with one copy.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        sequence = try container.decode(Int64.self, forKey: .sequence)
        kind = try container.decode(String.self, forKey: .kind)
        name = try container.decode(String.self, forKey: .name)
        key = [UInt8](try container.decode(Data.self, forKey: .key))
        value = try container.decodeIfPresent(Data.self, forKey: .value).map { [UInt8]($0) }
        valueKept = try container.decode(Bool.self, forKey: .valueKept)
        clock = try container.decode(UInt64.self, forKey: .clock)
        device = try container.decode(String.self, forKey: .device)
        token = try container.decode(UInt64.self, forKey: .token)
        reason = try container.decode(String.self, forKey: .reason)
        quarantinedAt = try container.decode(Date.self, forKey: .quarantinedAt)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(sequence, forKey: .sequence)
        try container.encode(kind, forKey: .kind)
        try container.encode(name, forKey: .name)
        try container.encode(Data(key), forKey: .key)
        try container.encodeIfPresent(value.map { Data($0) }, forKey: .value)
        try container.encode(valueKept, forKey: .valueKept)
        try container.encode(clock, forKey: .clock)
        try container.encode(device, forKey: .device)
        try container.encode(token, forKey: .token)
        try container.encode(reason, forKey: .reason)
        try container.encode(quarantinedAt, forKey: .quarantinedAt)
    }

    /// One printable line: what another device sent has its control characters escaped.
    public var description: String {
        func shown(_ text: some StringProtocol) -> String { Escaping.escape(String(text), quoting: false, shortForms: true, style: .swift) }
        return "change \(sequence) to \(target.map(\.description).map(shown) ?? "'\(shown(kind.prefix(40)))'") key \(Hex.encode(Array(key.prefix(64)))) from \(shown(device.prefix(64))): \(shown(reason))"
    }
}

/// What ``Replicator/retryQuarantined()`` did.
public struct QuarantineRetryReport: Hashable, Sendable, Codable {
    /// Quarantined changes now applied (or settled as conflicts).
    public var applied = 0
    /// Quarantined changes dropped because a newer version of their key had already been applied.
    public var superseded = 0
    /// Changes still quarantined.
    public var remaining = 0
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
    /// A change from another device could not be applied and was quarantined
    /// (``QuarantinedChange``): the pull went on past it.
    case quarantined(QuarantinedChange)
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
    /// Other devices' changes quarantined in this round (``QuarantinedChange``).
    public var quarantined = 0
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
    /// Changes from other devices held in quarantine (``QuarantinedChange``).
    public var quarantined: Int = 0
}
#endif
