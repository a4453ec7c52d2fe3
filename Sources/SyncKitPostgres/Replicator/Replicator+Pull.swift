#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

extension Replicator {
    // MARK: - Pull

    /// Pulls pages until the log's end. Each page moves the cursor forward (a page that would not is
    /// refused), and the call starts over once at most: a rebase on a server that forgot, or a resync
    /// after a prune, or a rebase and the resync it leads to (a restored server whose log was pruned).
    /// Starting over again, whatever the server holds or answers, ends the round with an error rather
    /// than going round for good (issue 46: rows planted past the log's end made every round start
    /// over, about 30 times a second, for good).
    func pull(_ server: any ReplicationServer, report: inout SyncReport) async throws -> Int {
        var pulled = 0
        var (rebased, resynced): (String?, String?) = (nil, nil)
        func startOver(because reason: String, resync: Bool) throws {
            if let first = resynced ?? (resync ? nil : rebased) {
                throw ReplicationError.server("the server made this device start over twice in one round (\(first); then \(reason)): the round stops here, and the next one starts again")
            }
            if resync { resynced = reason } else { rebased = reason }
        }
        while true {
            let (cursor, mark) = try currentCursor()
            let page = try await server.changes(group: group, after: cursor, limit: options.batchSize)
            // The log no longer holds what this device followed: a server restored from an older
            // backup, or its tables recreated.
            if cursor > page.lastSequence || (cursor > page.prunedThrough && mark != nil && page.atCursor != mark) {
                try startOver(because: cursor > page.lastSequence
                    ? "its log ends at \(page.lastSequence), before this device's cursor \(cursor)"
                    : "its log holds another change at this device's cursor \(cursor)", resync: false)
                try await onWriter { try rebaseOnForgetfulServer() }
                continue
            }
            if cursor < page.prunedThrough {
                try startOver(because: "it pruned its log through \(page.prunedThrough), past this device's cursor \(cursor)", resync: true)
                try await resynchronize(server, report: &report)
                continue
            }
            let changes = page.changes
            if changes.isEmpty { break }
            // Every change after the cursor, within the log, in order: else the cursor could stay or
            // go back, and the loop never end (a server's own statement never answers so; a gateway
            // that lies might).
            var previous = cursor
            for change in changes {
                guard change.sequence > previous, change.sequence <= page.lastSequence else {
                    throw ReplicationError.server("the server answered change \(change.sequence) after change \(previous) in a page after cursor \(cursor) of a log that ends at \(page.lastSequence)")
                }
                previous = change.sequence
            }
            let outcome = try await onWriter { try apply(changes, newCursor: changes[changes.count - 1].sequence, stage: .pull, pulled: &pulled) }
            report.conflicts += outcome.events.count(where: \.isConflict)
            report.quarantined += outcome.events.count(where: \.isQuarantine)
            for event in outcome.events {
                if case .applied(let targets, _) = event { manifestArrived(targets) }
                self.events(event)
            }
        }
        return pulled
    }

    func currentCursor() throws -> (Int64, CursorMark?) {
        try collections.store.read { tx in
            let state = try collections.state.get(Replication.stateKey, in: tx)
            return (state?.cursor ?? 0, state?.cursorMark)
        }
    }

    /// What ``apply(_:newCursor:stage:pulled:)`` did.
    struct ApplyOutcome {
        var events: [SyncEvent] = []
        var applied = 0
        /// Quarantined changes dropped because a newer version of their key was applied.
        var superseded = 0
    }

    /// A change that failed after part of it was written (an index key too long, say): the transaction
    /// is abandoned and done again with the change quarantined.
    private struct ChangeFailed: Error {
        var sequence: Int64
        var reason: String
    }

    /// Applies other devices' changes and moves the cursor to `newCursor` (if given), in one
    /// transaction. A change that cannot be applied is quarantined and the others apply: nothing of
    /// it is written, and the cursor moves past it.
    func apply(_ changes: [ServerChange], newCursor: Int64?, stage: ConflictEvent.Stage,
               pulled: inout Int) throws -> ApplyOutcome {
        var failed: [Int64: String] = [:]
        while true {
            do {
                let outcome = try applyOnce(changes, newCursor: newCursor, stage: stage, failed: failed)
                pulled += outcome.applied
                return outcome
            } catch let failure as ChangeFailed {
                // Each attempt quarantines one more change, so this ends within `changes.count` attempts.
                guard failed.updateValue(failure.reason, forKey: failure.sequence) == nil else {
                    throw ReplicationError.malformedServerRow(sequence: failure.sequence, reason: failure.reason)
                }
            }
        }
    }

    private func applyOnce(_ changes: [ServerChange], newCursor: Int64?, stage: ConflictEvent.Stage,
                           failed: [Int64: String]) throws -> ApplyOutcome {
        let now = options.clock()
        // What the run that commits did: the store runs this body again when the map grows, and
        // counts kept outside it counted a page once per run.
        let (committed, touched) = try container.store.write(author: Replication.author) { tx in
            var outcome = ApplyOutcome()
            var touched = Set<Mutation.Target>()
            var state = try collections.replicaState(in: tx)
            var pending = try pendingLocalClocks(in: tx)
            var quarantined = try quarantinedKeys(in: tx)
            var conflicts = 0
            func hold(_ change: ServerChange, _ reason: String) throws {
                outcome.events.append(.quarantined(try quarantine(change, reason: reason, state: &state, keys: &quarantined, in: tx)))
            }
            for change in changes {
                if let reason = failed[change.sequence] ?? problem(of: change, retrying: newCursor == nil) {
                    try hold(change, reason)
                    continue
                }
                guard let targetID = Mutation.Target(kindName: change.kind, name: change.name) else { continue }   // checked
                let pendingKey = PendingKey(target: targetID, key: change.key)
                if change.device == device && stage == .pull {
                    // This device's own change: already here. Its version is the key's base, unless
                    // a later one is known.
                    if let versions = versions[targetID],
                       try (versions.get(ByteKey(change.key), in: tx)?.version ?? 0) < change.sequence {
                        try tx.unrecorded {
                            try versions.put(KeyVersion(version: change.sequence, clock: change.clock, device: device),
                                             forKey: ByteKey(change.key), in: tx)
                        }
                        outcome.superseded += try supersedeQuarantined(pendingKey, through: change.sequence, keys: &quarantined, in: tx)
                    }
                    continue
                }
                guard let target = targets[targetID] else { continue }   // not replicated here
                // A stamp too far ahead of this device's clock: neither applied nor adopted.
                if let reason = clockProblem(change.clock) {
                    try hold(change, reason)
                    continue
                }
                // Older than a version this device already has (its own change that won a conflict
                // after this one, say): superseded, not news.
                if stage == .pull, let known = try versions[targetID]?.get(ByteKey(change.key), in: tx), known.version >= change.sequence {
                    outcome.superseded += try supersedeQuarantined(pendingKey, through: change.sequence, keys: &quarantined, in: tx)
                    continue
                }
                do {
                    if let localClock = pending[pendingKey] {
                        if let event = try resolve(local: try target.read(change.key, tx), localClock: localClock, remote: change,
                                                   target: target, stage: stage, state: &state, in: tx) {
                            // Once the remote value is in, no local write of the key is left pending.
                            if event.resolution == .tookRemote || event.resolution == .rejectedLocal { pending[pendingKey] = nil }
                            outcome.events.append(.conflict(event))
                            conflicts += 1
                        }
                    } else {
                        if try target.read(change.key, tx) != change.value { try target.write(change.key, change.value, tx) }
                        try tx.unrecorded {
                            try versions[targetID]?.put(KeyVersion(version: change.sequence, clock: change.clock, device: change.device),
                                                        forKey: ByteKey(change.key), in: tx)
                        }
                    }
                    try history.observeClock(HybridTimestamp(rawValue: change.clock), now: now, maxSkew: options.maxClockSkew, in: tx)
                    _ = try supersedeQuarantined(pendingKey, through: change.sequence, keys: &quarantined, in: tx)
                    // SyncKit's replicated catalog is bookkeeping: not counted, nor announced.
                    if targetID != Replication.catalogTarget {
                        outcome.applied += 1
                        touched.insert(targetID)
                    }
                } catch let error as UnreadableChange {
                    try hold(change, error.reason)   // thrown before anything of it was written
                } catch where Self.isChangeProblem(error) {
                    throw ChangeFailed(sequence: change.sequence, reason: "\(error)")
                }
            }
            if let newCursor {
                state.cursor = newCursor
                // After a resync the cursor is the server's last sequence, not a change seen here; and
                // a row whose device id could not be read marks nothing.
                let last = changes.last
                if stage == .pull, let last, last.sequence == newCursor, !last.device.isEmpty, last.device.utf8.count <= 200 {
                    state.cursorMark = CursorMark(device: last.device, token: last.token)
                } else {
                    state.cursorMark = nil
                }
            }
            state.pulled += outcome.applied
            state.conflicts += conflicts
            try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
            return (outcome, touched)
        }
        var outcome = committed
        if !touched.isEmpty { outcome.events.append(.applied(targets: touched, changes: outcome.applied)) }
        return outcome
    }
}
#endif
