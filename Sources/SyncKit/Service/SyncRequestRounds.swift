#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

/// The rounds of one ``SyncService/request(within:startingAgent:)``: each reads the owner's record,
/// wakes the owner or starts the agent, and answers, or says how long to wait for the owner's record
/// (``pause``) before the next. The blocking request waits on its thread, the async one suspends on
/// the process's ``KVStore/Watcher``: one loop for both.
struct SyncRequestRounds {
    let service: SyncService
    let clock = ContinuousClock()
    let start: ContinuousClock.Instant
    let deadline: ContinuousClock.Instant
    let madeAt = Date()
    let startingAgent: Bool
    let target: ChangeToken
    let notifier: ChangeNotifier
    /// The owner's record's notification, subscribed before the first round.
    let updates: ChangeNotifier.Subscription
    /// How long to wait before the next round (set by a round that did not answer).
    private(set) var pause: Duration = .zero
    private var agent: StartedAgent?
    private var agentNote: String?
    private var woke = false

    init(service: SyncService, timeout: Duration, startingAgent: Bool) throws {
        self.service = service
        start = ContinuousClock.now
        deadline = start + timeout
        self.startingAgent = startingAgent
        target = try service.history.currentToken()
        notifier = ChangeNotifier(container: service.container)
        updates = try notifier.subscribe(SyncService.statusNotification)
    }

    /// The agent a round started is reaped when it exits, however the request ends.
    func finish() {
        agent?.reapWhenDone()
    }

    /// One round: the answer, or `nil` to wait ``pause`` for the owner's record and go again.
    mutating func next() throws -> SyncRequestOutcome? {
        // The owner's record alone: the pending count (history read) only for a shortfall.
        let (state, replicates) = try service.container.store.read { tx in
            (try service.states.get(SyncService.stateKey, in: tx) ?? SyncServiceState(), try service.history.consumerRecords.get(SyncService.consumerName, in: tx) != nil)
        }
        let owner = state.owner.flatMap { $0.isAlive ? $0 : nil }
        // Token 0 (nothing written) is acknowledged by a round that reached a server, not by default.
        if state.acknowledged >= target && (target > .zero || state.lastSyncAt != nil) {
            if let held = state.held, held.count > 0 {
                return .acknowledgedExceptHeld(through: target, after: clock.now - start, held: held)
            }
            return .acknowledged(through: target, after: clock.now - start)
        }
        if let failure = state.lastError, failure.at >= madeAt, failure.reason.isRefusal { return .refused(failure) }
        guard replicates else {
            return .nothingSyncs(try service.shortfall(owner: owner, agent: nil, replicates: false))
        }
        // The agent's fate was seen in the round before, and this round's record still shows no
        // owner and no acknowledgement: nothing will take the changes to a server.
        if owner == nil && startingAgent, let agentNote {
            return .nothingSyncs(try service.shortfall(owner: nil, agent: agentNote, replicates: true))
        }
        if !woke {
            try notifier.post(SyncService.requestNotification)
            woke = true
        }
        if owner == nil && startingAgent && agent == nil && agentNote == nil {
            do {
                if let registration = try SyncAgentRegistration.load(from: service.container) {
                    agent = try StartedAgent.start(registration, in: service.container)
                } else {
                    agentNote = "no sync agent is registered; \(SyncAgentRegistration.advice(for: service.container, replacing: false))"
                }
            } catch let error as SyncError {
                agentNote = "the sync agent could not start: \(error); \(SyncAgentRegistration.advice(for: service.container, replacing: true))"
            } catch {
                agentNote = "the sync agent could not start: \(error)"
            }
        }
        if agentNote == nil, agent?.hasExited() == true, let started = agent {
            agentNote = "the sync agent (pid \(started.pid)) exited with status \(started.exitStatus ?? -1)"
        }
        let now = clock.now
        guard now < deadline else {
            let status = try service.status()
            return .notWithinDeadline(SyncRequestShortfall(owner: status.owner, lastError: status.lastError,
                                                           pending: status.pending, agent: agentNote))
        }
        pause = min(deadline - now, .milliseconds(50))
        return nil
    }
}
