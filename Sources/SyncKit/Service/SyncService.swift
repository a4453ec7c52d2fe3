#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// Sync as a service of the container: any process (an app, an extension, a widget, a command-line
/// tool) asks for what it wrote to reach the server, and learns when it has.
///
/// ```swift
/// let service = try SyncService(container: container)    // attaches history, before any write
/// try records.put(visit, forKey: id)                       // the write, recorded in history
/// switch try service.request(within: .seconds(2)) {
/// case .acknowledged: break                               // the server has it
/// case .refused(let failure): log(failure)                // a clock too far ahead, a revoked credential
/// case .notWithinDeadline(let shortfall): log(shortfall)  // it is still on its way
/// case .nothingSyncs(let shortfall): log(shortfall)       // nothing can take it: no owner, no agent
/// }
/// ```
///
/// One process at a time owns a container's sync (it holds the container's `.sync.lock`): an app's live
/// `Replicator` (SyncKitPostgres), `kvtool sync run`, or an agent a request started. A request wakes the
/// owner (a change notification), which pushes and records how far the server has this container's
/// history; the request returns when that covers everything written before it was made. When no
/// process owns sync, the request starts the container's registered agent
/// (``SyncAgentRegistration``), detached: it takes the lock, syncs, and exits. This type links no
/// networking: an extension or a widget asks, and the owner does the work.
public struct SyncService: Sendable {
    public let container: SharedContainer
    let history: History
    let states: KVCollection<String, SyncServiceState>
    /// What a replicator declared replicates, when one did (``pendingChanges(acknowledged:limit:in:)``).
    let declarations: Declarations?

    /// The author of the changes a replicator applies from other devices (never sent back).
    public static let replicationAuthor = "sync"
    /// The history consumer a replicator pushes from.
    public static let consumerName = "sync.push"
    /// Posted by a request: wakes the owner.
    public static let requestNotification = "sync.request"
    /// Posted by the owner after it records a round, or takes or gives up ownership.
    public static let statusNotification = "sync.status"
    /// ``SyncStatus/pending`` counts up to this many entries.
    public static let maxPendingCounted = 10_000
    static let collectionName = "_sync.service"
    static let stateKey = "state"

    /// - Throws: what opening the container's history throws.
    public init(container: SharedContainer) throws {
        self.container = container
        history = try History.attach(to: container)
        states = try container.store.collection(Self.collectionName, key: String.self, value: SyncServiceState.self)
        declarations = try Declarations(store: container.store)
    }

    // MARK: - Status

    /// Where the container's sync stands: its owner, how far the server has its history, what is
    /// pending (counted up to `limit`) and the last error.
    public func status(countingUpTo limit: Int = SyncService.maxPendingCounted) throws -> SyncStatus {
        try container.store.read { try status(in: $0, countingUpTo: limit) }
    }

    /// ``status(countingUpTo:)`` as `transaction` sees it.
    public func status(in transaction: ReadTransaction, countingUpTo limit: Int = SyncService.maxPendingCounted) throws -> SyncStatus {
        let state = try states.get(Self.stateKey, in: transaction) ?? SyncServiceState()
        let current = try history.currentToken(in: transaction)
        let pending = try pendingChanges(acknowledged: state.acknowledged, limit: limit, in: transaction)
        let registered = SyncAgentRegistration.exists(in: container)
        var problem: String?
        if registered {
            do {
                _ = try SyncAgentRegistration.load(from: container)
            } catch {
                problem = "\(error); \(SyncAgentRegistration.advice(for: container, replacing: true))"
            }
        }
        return SyncStatus(owner: state.owner.flatMap { $0.isAlive ? $0 : nil }, acknowledged: state.acknowledged,
                          current: current, pending: pending, lastSyncAt: state.lastSyncAt, lastError: state.lastError,
                          held: state.held, agentRegistered: registered, agentProblem: problem)
    }

    /// The live owner, from its record alone (no history is read): what a standby checks before it
    /// tries the lock.
    package func liveOwner() throws -> SyncOwner? {
        try container.store.read { try states.get(Self.stateKey, in: $0) }?.owner.flatMap { $0.isAlive ? $0 : nil }
    }

    /// The status, observed: a widget shows "synced" or "waiting" and follows it as owners record
    /// their rounds, in any process.
    ///
    /// ```swift
    /// for try await status in service.statusObservation.values(in: container) {
    ///     badge.text = status.isSynced ? "synced" : "waiting (\(status.pending))"
    /// }
    /// ```
    public var statusObservation: ValueObservation<SyncStatus> {
        let service = self
        return ValueObservation.tracking { try service.status(in: $0) }.removeDuplicates()
    }

    // MARK: - Requests

    /// Asks for everything written to the container so far to reach the server, and waits, blocking
    /// the calling thread, until the server has it, the owner is refused, nothing can take it there,
    /// or `timeout` passes.
    ///
    /// It is acknowledged only by what an owner recorded from a server: with nothing written, by an
    /// owner's round that reached one. It is answered ``SyncRequestOutcome/nothingSyncs(_:)`` at once
    /// when nothing of the container is enabled for sync (no replicator's history consumer is
    /// registered), and, when it may start the agent, as soon as no process owns sync and none can
    /// start: no agent is registered, its registration is refused, it could not start, or it exited.
    ///
    /// - Parameters:
    ///   - startingAgent: when no process owns sync, start the registered agent (an agent itself
    ///     waiting for another owner passes `false`, and waits for an owner until `timeout`).
    /// - Returns: ``SyncRequestOutcome``; a refusal is one recorded after this request was made.
    /// - Throws: errors of the store or the notification directory; never for the server's answers.
    public func request(within timeout: Duration, startingAgent: Bool = true) throws -> SyncRequestOutcome {
        var rounds = try SyncRequestRounds(service: self, timeout: timeout, startingAgent: startingAgent)
        defer { rounds.finish() }
        while true {
            if let outcome = try rounds.next() { return outcome }
            // Woken by the owner's record; the short bound notices an owner that died meanwhile.
            _ = rounds.updates.wait(timeout: rounds.pause)
        }
    }

    /// What a request that nothing can acknowledge knows, from the status now.
    func shortfall(owner: SyncOwner?, agent: String?, replicates: Bool) throws -> SyncRequestShortfall {
        let status = try status()
        return SyncRequestShortfall(owner: owner ?? status.owner, lastError: status.lastError, pending: status.pending, agent: agent,
                                    replicates: replicates)
    }

    /// ``request(within:startingAgent:)`` from async code: the wait suspends, holding no thread (the
    /// process's ``KVStore/Watcher`` wakes it for the owner's record, or after the round's short bound).
    public func request(within timeout: Duration, startingAgent: Bool = true) async throws -> SyncRequestOutcome {
        var rounds = try SyncRequestRounds(service: self, timeout: timeout, startingAgent: startingAgent)
        defer { rounds.finish() }
        while true {
            if let outcome = try rounds.next() { return outcome }
            let until = ContinuousClock.now + rounds.pause
            // Events that do not name the owner's record are read and waited past.
            while try await Watcher.shared.readable([rounds.updates.watch.inotify], until: until),
                  rounds.updates.watch.drain(naming: Array(rounds.updates.name.utf8)) == false {}
        }
    }
}

/// What became of a ``SyncService/request(within:startingAgent:)``.
public enum SyncRequestOutcome: Hashable, Sendable, CustomStringConvertible {
    /// The server has everything written before the request (through the history token), `after` it
    /// was made.
    case acknowledged(through: ChangeToken, after: Duration)
    /// The server has everything written before the request except the writes of `held`'s keys, which
    /// wait behind other devices' changes this device quarantined (a value it cannot read) until the
    /// user settles them (`kvtool sync quarantine drop|keep-mine`). Nothing else waits for them.
    case acknowledgedExceptHeld(through: ChangeToken, after: Duration, held: HeldKeys)
    /// The owner's round was refused; the changes wait here until what is refused changes.
    case refused(SyncFailure)
    /// The deadline passed first; what is known of why.
    case notWithinDeadline(SyncRequestShortfall)
    /// Nothing can take the changes to a server, known before the deadline: nothing of the container
    /// is enabled for sync (``SyncRequestShortfall/replicates`` is false), or no process owns sync and
    /// none can start (``SyncRequestShortfall/agent`` says why: no agent registered, its registration
    /// refused, or it exited).
    case nothingSyncs(SyncRequestShortfall)

    public var description: String {
        switch self {
        case .acknowledged(let token, let elapsed):
            "acknowledged: the server has every change through token \(token) (\(elapsed.wholeMilliseconds) ms)"
        case .acknowledgedExceptHeld(let token, let elapsed, let held):
            "acknowledged except held keys: the server has every change through token \(token) (\(elapsed.wholeMilliseconds) ms) but \(held)"
        case .refused(let failure): "refused (\(failure.reason.rawValue)): \(failure.message)"
        case .notWithinDeadline(let shortfall): "not within the deadline: \(shortfall)"
        case .nothingSyncs(let shortfall): "not acknowledged: \(shortfall.nothingSyncsDescription)"
        }
    }
}

/// What a request that ran out of time knows.
public struct SyncRequestShortfall: Hashable, Sendable, CustomStringConvertible {
    /// The live owner, or `nil` when no process owned sync at the deadline.
    public var owner: SyncOwner?
    /// The owner's last failure.
    public var lastError: SyncFailure?
    /// Local changes not yet on the server.
    public var pending: Int
    /// What became of the agent the request started, or why it started none.
    public var agent: String?
    /// Whether anything of the container is enabled for sync (a replicator's history consumer is
    /// registered: SyncKitPostgres's `Replication.enable` registers it).
    public var replicates: Bool

    public init(owner: SyncOwner?, lastError: SyncFailure?, pending: Int, agent: String?, replicates: Bool = true) {
        (self.owner, self.lastError, self.pending, self.agent, self.replicates) = (owner, lastError, pending, agent, replicates)
    }

    public var description: String {
        var parts = [owner.map { "\($0) owns sync" } ?? "no process owns sync", "\(pending) pending"]
        if let lastError { parts.append("last error (\(lastError.reason.rawValue)): \(lastError.message)") }
        if let agent { parts.append(agent) }
        return parts.joined(separator: "; ")
    }

    /// The rest of the line of ``SyncRequestOutcome/nothingSyncs(_:)``.
    var nothingSyncsDescription: String {
        guard replicates else {
            return "nothing in this container is enabled for sync (kvtool sync enable COLLECTION), so nothing of it goes to a server"
        }
        var parts = ["no process owns sync and none can start: \(agent ?? "no sync agent is registered (kvtool sync agent set)")",
                     "\(pending) pending"]
        if let lastError { parts.append("last error (\(lastError.reason.rawValue)): \(lastError.message)") }
        return parts.joined(separator: "; ")
    }
}
