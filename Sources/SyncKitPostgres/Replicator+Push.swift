#if PostgreSQL
import Foundation
import KVStore
import SyncKit

extension Replicator {
    // MARK: - Push

    struct PendingKey: Hashable {
        var target: Mutation.Target
        var key: [UInt8]
    }

    struct PushItem {
        var change: OutgoingChange
        var target: Mutation.Target
        var dirtyIDs: [UInt64]
        /// The clock of the latest write of the key this item sends (a history entry or a key queued
        /// by a conflict), nil when it was only requeued: when the server already has the same value
        /// from an earlier write, this write is sent again so that the log keeps the later clock.
        var writeClock: UInt64?
    }

    func push(_ server: any ReplicationServer, report: inout SyncReport) async throws -> Int {
        var pushed = 0
        // Bounded: a key that keeps losing races to another device is left for the next round.
        for _ in 0..<10 {
            if case .expired = try consumer.pendingChanges(matching: HistoryFilter(transactionLimit: 1)) {
                try requeueEverything()
            }
            let (items, held, next) = try collectPending()
            if !held.isEmpty { try holdBack(held) }
            if !items.isEmpty {
                // Pipelined: the next batch is on its way (encoded, sent, applied by the server) while
                // this device records the answers to the last one. The batches hold distinct keys, and
                // a batch applied whose predecessor's answers were never recorded (a crash between)
                // is answered `duplicate` when sent again, as any batch sent twice is.
                let batches = stride(from: 0, to: items.count, by: options.batchSize).map {
                    Array(items[$0..<min($0 + options.batchSize, items.count)])
                }
                let (group, device, skew) = (group, device, options.maxClockSkew)
                func send(_ batch: [PushItem]) -> Task<[PushOutcome], any Error> {
                    let changes = batch.map(\.change)
                    return Task.detached {
                        try await server.push(group: group, device: device, changes: changes, maxClockSkew: skew)
                    }
                }
                var inFlight = send(batches[0])
                for (index, batch) in batches.enumerated() {
                    let outcomes = try await withTaskCancellationHandler {
                        try await inFlight.value
                    } onCancel: { [inFlight] in inFlight.cancel() }
                    if index + 1 < batches.count { inFlight = send(batches[index + 1]) }
                    do {
                        try record(outcomes, of: batch, report: &report)
                    } catch {
                        inFlight.cancel()
                        _ = try? await inFlight.value   // not left running past this push
                        throw error
                    }
                    pushed += outcomes.count { if case .applied = $0 { true } else { false } }
                }
            }
            if let next { try consumer.acknowledge(through: next) }
            // Until nothing is left: a round reads at most `transactionsPerRound` history transactions.
            if try items.isEmpty && !hasDirtyKeys() { break }
        }
        return pushed
    }

    /// Keys with a quarantined change from another device: their writes wait as dirty keys (sent
    /// once the quarantine is cleared), never over the server's newer value.
    func holdBack(_ held: [QueuedKey]) throws {
        try container.store.write(author: Replication.author) { tx in
            var state = try collections.replicaState(in: tx)
            try queueToSendAgain(held, state: &state, in: tx)
            try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
        }
    }

    /// Whether a dirty key waits to be sent (one whose key has a quarantined change waits for the
    /// quarantine, not for a push).
    func hasDirtyKeys() throws -> Bool {
        try collections.store.read { tx in
            guard try collections.dirty.first(in: tx) != nil else { return false }
            let held = try quarantinedKeys(in: tx)
            var found = false
            try collections.dirty.forEach(in: tx) { _, dirty in
                guard let target = Mutation.Target(kindName: dirty.kind, name: dirty.name), targets[target] != nil else { return true }
                found = held[PendingKey(target: target, key: dirty.key)] == nil
                return !found
            }
            return found
        }
    }

    /// What to send: the latest pending history entry of each replicated key (unless a later entry
    /// is a replicator's own: another device's value that won), plus the dirty keys; with each key's
    /// current value, read in the same transaction as the history.
    func collectPending() throws -> (send: [PushItem], hold: [QueuedKey], next: ChangeToken?) {
        let token = try consumer.token()
        let store = container.store
        return try store.read { tx in
            let quarantined = try quarantinedKeys(in: tx)
            var held: [QueuedKey] = []
            var latest: [PendingKey: HistoryEntry] = [:]
            var order: [PendingKey] = []
            var next: ChangeToken?
            let filter = HistoryFilter(targets: Set(targets.keys), transactionLimit: options.transactionsPerRound)
            switch try history.changes(since: token, matching: filter, in: tx) {
            case .expired:
                next = nil   // requeueEverything() just ran; a purge in between is caught next round
            case .changes(let transactions, let through):
                next = through
                for transaction in transactions {
                    for entry in transaction.entries {
                        let pending = PendingKey(target: entry.target, key: entry.key)
                        if latest.updateValue(entry, forKey: pending) == nil { order.append(pending) }
                    }
                }
            }
            var items: [PushItem] = []
            var index: [PendingKey: Int] = [:]
            for pending in order {
                guard let entry = latest[pending], entry.author != Replication.author,
                      let target = targets[pending.target] else { continue }
                let clock = entry.clock ?? HybridTimestamp(date: entry.timestamp)
                if quarantined[pending] != nil {
                    held.append(QueuedKey(target: pending.target, key: pending.key, clock: clock.rawValue))
                    continue
                }
                index[pending] = items.count
                items.append(PushItem(
                    change: try outgoing(target, key: pending.key, clock: clock.rawValue, token: entry.token.rawValue, in: tx),
                    target: pending.target, dirtyIDs: [], writeClock: clock.rawValue))
            }
            try collections.dirty.forEach(in: tx) { id, dirty in
                guard let target = Mutation.Target(kindName: dirty.kind, name: dirty.name), let replicated = targets[target] else {
                    return true
                }
                let pending = PendingKey(target: target, key: dirty.key)
                if quarantined[pending] != nil { return true }
                let writeClock = dirty.requeued == true ? nil : dirty.clock
                if let at = index[pending] {
                    items[at].dirtyIDs.append(id)
                    if let writeClock { items[at].writeClock = max(items[at].writeClock ?? 0, writeClock) }
                    if dirty.clock > items[at].change.clock {
                        items[at].change.clock = dirty.clock
                        items[at].change.token = dirty.token
                    }
                } else {
                    index[pending] = items.count
                    items.append(PushItem(
                        change: try outgoing(replicated, key: dirty.key, clock: dirty.clock, token: dirty.token, in: tx),
                        target: target, dirtyIDs: [id], writeClock: writeClock))
                }
                return true
            }
            return (items, held, next)
        }
    }

    /// After history was purged past the replicator's token (what was pending there is gone from
    /// history): every key of every target is queued to be sent again, and the token moves to the end.
    /// The server keeps what it has; keys it has newer are settled as conflicts.
    func requeueEverything() throws {
        try container.store.write(author: Replication.author) { tx in
            var state = try collections.replicaState(in: tx)
            let clock = HybridTimestamp.next(after: .zero, now: Date()).rawValue
            var queued: [QueuedKey] = []
            for (target, replicated) in targets {
                for key in try replicated.keys(tx) { queued.append(QueuedKey(target: target, key: key, clock: clock, requeued: true)) }
            }
            try queueToSendAgain(queued, state: &state, in: tx)
            try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
        }
        try consumer.resynchronized()
    }

    struct QueuedKey {
        var target: Mutation.Target
        var key: [UInt8]
        var clock: UInt64
        /// Queued by a resync rather than by a write (see ``DirtyKey/requeued``).
        var requeued = false
    }

    /// Queues keys to be sent although no pending history entry says so (`_sync.dirty`), each under a
    /// token of its own from ``ReplicaState/nextExtraToken``.
    func queueToSendAgain(_ keys: [QueuedKey], state: inout ReplicaState, in tx: WriteTransaction) throws {
        var id = (try collections.dirty.last(in: tx)?.key ?? 0) + 1
        for queued in keys {
            let dirty = DirtyKey(kind: queued.target.kindName, name: queued.target.name, key: queued.key,
                                 clock: queued.clock, token: state.nextExtraToken, requeued: queued.requeued ? true : nil)
            try tx.unrecorded { try collections.dirty.put(dirty, forKey: id, in: tx) }
            id += 1
            state.nextExtraToken += 1
        }
    }

    func outgoing(_ target: ReplicatedTarget, key: [UInt8], clock: UInt64, token: UInt64,
                          in tx: ReadTransaction) throws -> OutgoingChange {
        let base = try versions[target.target]?.get(ByteKey(key), in: tx)?.version ?? 0
        return OutgoingChange(kind: target.target.kindName, name: target.target.name, key: key,
                              value: try target.read(key, tx), clock: clock, base: base, token: token)
    }

    /// Records the server's answers in one transaction: the versions of what it took, and the
    /// resolution of every conflict.
    func record(_ outcomes: [PushOutcome], of batch: [PushItem], report: inout SyncReport) throws {
        var events: [SyncEvent] = []
        var changed = Set<Mutation.Target>()
        try container.store.write(author: Replication.author) { tx in
            var state = try collections.replicaState(in: tx)
            var quarantined = try quarantinedKeys(in: tx)
            for (item, outcome) in zip(batch, outcomes) {
                guard let versions = versions[item.target], let target = targets[item.target] else { continue }
                let key = ByteKey(item.change.key)
                switch outcome {
                case .applied(let version):
                    try tx.unrecorded {
                        try versions.put(KeyVersion(version: version, clock: item.change.clock, device: device), forKey: key, in: tx)
                        for id in item.dirtyIDs { try collections.dirty.delete(id, in: tx) }
                        state.pushed += 1
                    }
                case .conflict(let version, let value, let clock, let remoteDevice, let problem):
                    // Written again since it was collected: settled next round, with that value.
                    guard try target.read(item.change.key, tx) == item.change.value else { continue }
                    let remote = ServerChange(sequence: version, device: remoteDevice, kind: item.change.kind,
                                              name: item.change.name, key: item.change.key, value: value, clock: clock,
                                              problem: problem, valueKept: problem == nil)
                    // The server's value cannot be taken here (unreadable, or stamped too far ahead):
                    // it is quarantined, and this device's write waits rather than go over it.
                    var reason = problem ?? clockProblem(clock)
                    var resolution: ConflictEvent?
                    if reason == nil {
                        do {
                            resolution = try resolve(local: item.change.value, localClock: item.change.clock, remote: remote,
                                                     target: target, stage: .push, state: &state, in: tx)
                            try history.observeClock(HybridTimestamp(rawValue: clock), now: options.clock(),
                                                     maxSkew: options.maxClockSkew, in: tx)
                        } catch let error as UnreadableChange {
                            reason = error.reason
                        }
                    }
                    if let reason {
                        events.append(.quarantined(try quarantine(remote, reason: reason, state: &state, keys: &quarantined, in: tx)))
                        try queueToSendAgain([QueuedKey(target: item.target, key: item.change.key, clock: item.change.clock,
                                                        requeued: item.writeClock == nil)],
                                             state: &state, in: tx)
                    } else if resolution == nil, let writeClock = item.writeClock, (writeClock, device) > (clock, remoteDevice) {
                        // The server has the same value from an earlier write: this later write is
                        // sent again on that version, so that the log (and whoever compares clocks
                        // with it later) has the latest clock of the value, as last-writer-wins says.
                        try queueToSendAgain([QueuedKey(target: item.target, key: item.change.key, clock: writeClock)],
                                             state: &state, in: tx)
                    }
                    try tx.unrecorded {
                        for id in item.dirtyIDs { try collections.dirty.delete(id, in: tx) }
                    }
                    if let resolution {
                        events.append(.conflict(resolution))
                        if resolution.resolution != .keptLocal { changed.insert(item.target) }
                    }
                }
            }
            state.conflicts += events.count(where: \.isConflict)
            try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
        }
        report.conflicts += events.count(where: \.isConflict)
        report.quarantined += events.count(where: \.isQuarantine)
        for event in events { self.events(event) }
        if !changed.isEmpty { self.events(.applied(targets: changed, changes: events.count(where: \.isConflict))) }
    }
}
#endif
