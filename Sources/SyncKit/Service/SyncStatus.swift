#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Why the last sync round of a container failed, as its owner recorded it.
public struct SyncFailure: Codable, Hashable, Sendable, CustomStringConvertible {
    public enum Reason: String, Codable, Hashable, Sendable, CaseIterable {
        /// The server refused this device's changes: its clock is too far ahead.
        case clockSkew
        /// A gateway refused the credential (unknown, revoked, expired, or the device id taken).
        case credential
        /// What this device pushed was refused as malformed. (Keys held back behind a quarantined
        /// change no longer fail a round: ``SyncStatus/held`` names them.)
        case quarantine
        /// The server could not be reached (connection refused, no answer within the timeouts).
        case unreachable
        /// The gateway asked this device to slow down.
        case rateLimited
        /// Anything else the server or the store answered.
        case other

        /// Refusals stay until something changes (a clock, a credential, the data): a request
        /// reports them at once rather than waiting for its deadline.
        public var isRefusal: Bool { self == .clockSkew || self == .credential || self == .quarantine }
    }

    public var reason: Reason
    /// The error's one line.
    public var message: String
    public var at: Date

    public init(reason: Reason, message: String, at: Date = Date()) {
        self.reason = reason
        self.message = message
        self.at = at
    }

    public var description: String { message }
}

/// What a container's sync owner records in the container (`_sync.service`), for every process to
/// read: who owns sync, and how far the server has this container's history.
struct SyncServiceState: Codable, Hashable, Sendable {
    /// The last process that took ownership (possibly dead: ``SyncOwner/isAlive`` tells).
    var owner: SyncOwner?
    /// Every local change through this history token is on the server.
    var acknowledged: ChangeToken = .zero
    var lastSyncAt: Date?
    var lastError: SyncFailure?
    /// Successful rounds recorded, by every owner.
    var rounds: Int = 0
    /// The keys whose writes wait behind quarantined changes, as the last round left them (`nil`:
    /// none). ``acknowledged`` goes past their writes: everything else is on the server.
    var held: HeldKeys?
}

/// Where a container's sync stands, as any process of the container can read it
/// (``SyncService/status()``), and observe it (``SyncService/statusObservation``).
public struct SyncStatus: Codable, Hashable, Sendable {
    /// The live process that owns sync now; `nil` when none does.
    public var owner: SyncOwner?
    /// Every local change through this history token is on the server.
    public var acknowledged: ChangeToken
    /// The last history token written here.
    public var current: ChangeToken
    /// Local changes not yet on the server: the history entries of the targets that replicate that
    /// the replicator has not sent (changes pulled from other devices, and changes to collections that
    /// keep history but do not replicate, are not counted), plus the keys it queued to send again.
    /// Counted up to ``SyncService/maxPendingCounted`` (or the limit given to
    /// ``SyncService/status(countingUpTo:)``).
    public var pending: Int
    public var lastSyncAt: Date?
    /// The last round's failure; `nil` once a round succeeds.
    public var lastError: SyncFailure?
    /// The keys whose local writes wait behind other devices' quarantined changes (`nil`: none):
    /// ``acknowledged`` covers everything else.
    public var held: HeldKeys? = nil
    /// Whether a sync agent registration exists (`kvtool sync agent set`): a request starts the agent
    /// when no process owns sync, unless ``agentProblem`` says why it cannot.
    public var agentRegistered: Bool
    /// Why the registered agent cannot be started (its registration is a link, another user's,
    /// readable by others, or not a registration, or the only one is a `.sync-agent` in the container,
    /// which is never run: ``SyncError/invalidAgentRegistration(_:)``), with
    /// the command that registers a good one; `nil` when it can be, or none is registered.
    public var agentProblem: String? = nil

    /// Nothing written here waits for the server.
    public var isSynced: Bool { pending == 0 }
}
