#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

extension Replicator {
    // MARK: - Push

    /// What a round did with the container's files so far (``push(_:report:files:)``).
    struct RoundFiles {
        /// Whether the files waiting to upload were uploaded (tried) in this round.
        var uploadedWaiting = false
        /// The paths whose upload this round tried: each once a round.
        var tried: Set<String> = []
    }

    struct PendingKey: Hashable {
        var target: Mutation.Target
        var key: [UInt8]

        /// The key's bytes hashed in one call: `[UInt8]`'s own hashing combines them one at a time, and
        /// hashing keys was a third of the device's CPU in collecting a push (issue 51, profiled).
        func hash(into hasher: inout Hasher) {
            hasher.combine(target)
            key.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }

    struct PushItem: Sendable {
        var change: OutgoingChange
        var target: Mutation.Target
        var dirtyIDs: [UInt64]
        /// The clock of the latest write of the key this item sends (a history entry or a key queued
        /// by a conflict), nil when it was only requeued: when the server already has the same value
        /// from an earlier write, this write is sent again so that the log keeps the later clock.
        var writeClock: UInt64?
    }

    func push(_ server: any ReplicationServer, report: inout SyncReport, files: inout RoundFiles) async throws -> Int {
        var pushed = 0
        // The files' bytes before the manifest rows that name them (once a round).
        if !files.uploadedWaiting {
            files.tried.formUnion(try await uploadWaitingFiles(server, report: &report))
            files.uploadedWaiting = true
        }
        // Manifest rows the server answered `missing_blob`, by key: they wait for their files.
        var waiting = Set<PendingKey>()
        defer { report.waitingForFiles = waiting.count }
        // Bounded: a key that keeps losing races to another device is left for the next round.
        for _ in 0..<10 {
            if try consumer.isExpired() { try await onWriter { try requeueEverything() } }
            var sent = false
            // Whether every change sent in this pass was answered `missing_blob` again: then what is
            // left waits for its files, and sending it again now would only be answered the same.
            var onlyWaiting = true
            let waitingBefore = waiting
            let end = try await pipelined(server) { outcomes, batch in
                sent = true
                pushed += try record(outcomes, of: batch, report: &report)
                for (item, outcome) in zip(batch, outcomes) {
                    let key = PendingKey(target: item.target, key: item.change.key)
                    if outcome == .missingBlob {
                        waiting.insert(key)
                        if !waitingBefore.contains(key) { onlyWaiting = false }
                    } else {
                        if !waiting.isEmpty { waiting.remove(key) }
                        onlyWaiting = false
                    }
                }
            }
            if !end.held.isEmpty { try await onWriter { try holdBack(end.held) } }
            if let next = end.next {
                try await onWriter { try acknowledgePushed(through: next) }
                ownership.posted()
            }
            // Until nothing is left: a round reads at most `transactionsPerRound` history transactions.
            if try !sent && !hasDirtyKeys() { break }
            // Rows whose files were not on the server: upload them (each once a round), and the next
            // pass sends the rows again.
            if try await uploadMissingBlobs(waiting, server: server, tried: &files.tried, report: &report) { continue }
            if sent && onlyWaiting { break }
        }
        return pushed
    }

    /// What a round's collection gives besides its batches.
    struct CollectedEnd: Sendable {
        var held: [QueuedKey] = []
        var next: ChangeToken?
    }

    enum CollectedPiece: Sendable {
        case batch([PushItem])
        case end(CollectedEnd)
    }

    /// Sends one round's batches as they are collected, and hands each batch's answers to `record`.
    ///
    /// Pipelined: a thread of the process's blocking pool reads the round (``collectPending(batchSize:maxBytes:emit:)``, in
    /// one read transaction) and hands over each batch as soon as its values are read, so the first
    /// batch is on its way while later values are still being read; and ``batchesInFlight`` batches
    /// are on their way (encoded, sent, applied by the server) while this device records the answers
    /// to an earlier one. The thread never waits for the sending side: its read transaction would hold
    /// off a write that grows the map (recording an answer), which waits for readers. The batches hold
    /// distinct keys, and a batch applied whose predecessor's answers were never recorded (a crash
    /// between) is answered `duplicate` when sent again, as any batch sent twice is.
    func pipelined(_ server: any ReplicationServer,
                   record: ([PushOutcome], [PushItem]) throws -> Void) async throws -> CollectedEnd {
        let (pieces, continuation) = AsyncThrowingStream<CollectedPiece, any Error>.makeStream()
        let stop = Locked(false)
        let exit = ThreadExit()
        let (batchSize, maxBytes) = (options.batchSize, options.maxBatchBytes)
        let job = Locked<(@Sendable () -> Void)?>({ [self] in
            do {
                let end = try collectPending(batchSize: batchSize, maxBytes: maxBytes) { batch in
                    continuation.yield(.batch(batch))
                    return !stop.withLock { $0 }
                }
                continuation.yield(.end(end))
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        })
        BlockingPool.shared.submit {
            // The work lets go of the replicator before it signals its end.
            var work = job.withLock { job in
                defer { job = nil }
                return job
            }
            work?()
            work = nil
            exit.signal()
        }
        let (group, device, skew) = (group, device, options.maxClockSkew)
        func send(_ batch: [PushItem]) -> Task<[PushOutcome], any Error> {
            let changes = batch.map(\.change)
            return Task.detached {
                try await server.push(group: group, device: device, changes: changes, maxClockSkew: skew)
            }
        }
        // The oldest first; at most `batchesInFlight`.
        var inFlight: [(batch: [PushItem], task: Task<[PushOutcome], any Error>)] = []
        do {
            var end = CollectedEnd()
            for try await piece in pieces {
                switch piece {
                case .batch(let batch):
                    guard inFlight.count == Self.batchesInFlight else {
                        inFlight.append((batch, send(batch)))
                        continue
                    }
                    let oldest = inFlight.removeFirst()
                    let outcomes = try await answers(oldest.task)
                    inFlight.append((batch, send(batch)))
                    try await onWriter { try record(outcomes, oldest.batch) }
                case .end(let collected):
                    end = collected
                }
            }
            // A cancelled task's stream ends early: that is no end of the round.
            try Task.checkCancellation()
            while !inFlight.isEmpty {
                let oldest = inFlight.removeFirst()
                let outcomes = try await answers(oldest.task)
                try await onWriter { try record(outcomes, oldest.batch) }
            }
            await exit.wait()
            return end
        } catch {
            // Neither the collecting thread (and its read transaction) nor a batch is left running
            // past this push: the container may be closed once it returns.
            stop.withLock { $0 = true }
            for (_, task) in inFlight {
                task.cancel()
                _ = try? await task.value
            }
            await exit.wait()
            throw error
        }
    }

    /// Signalled once, by work of the blocking pool as it returns; awaited without blocking a thread (and without
    /// regard to cancellation: what it waits for is short, and must end first).
    final class ThreadExit: Sendable {
        private let state = Locked<(done: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

        func signal() {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                state.done = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }

        func wait() async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let done = state.withLock { state -> Bool in
                    if !state.done { state.waiter = continuation }
                    return state.done
                }
                if done { continuation.resume() }
            }
        }
    }

    /// Batches sent before the answers to the first are in: the server applies one while the next is
    /// on its way (through a gateway, on a connection of its own, so the two may be applied in either
    /// order: their keys are distinct, and their tokens are checked either way).
    static let batchesInFlight = 2

    private func answers(_ task: Task<[PushOutcome], any Error>) async throws -> [PushOutcome] {
        try await withTaskCancellationHandler {
            try await task.value
        } onCancel: { task.cancel() }
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

    /// Moves the push consumer to `next` and, in the same transaction, the container's acknowledged
    /// token (unless keys still wait to be sent): requests learn of the push before the round's pull.
    func acknowledgePushed(through next: ChangeToken) throws {
        try container.store.write(author: consumer.author) { tx in
            try consumer.acknowledge(through: next, in: tx)
            // Keys held behind a quarantined change wait alone: everything else is acknowledged.
            let (waiting, held) = try dirtyKeys(in: tx)
            try ownership.recordAcknowledged(consumerToken: next, complete: waiting == held, held: try heldKeysRecord(in: tx), in: tx)
        }
    }

    /// The dirty keys of replicated targets in `tx`: how many wait to be sent, and how many of those
    /// are held back behind a quarantined change of the same key.
    func dirtyKeys(in tx: ReadTransaction) throws -> (waiting: Int, held: Int) {
        guard try collections.dirty.first(in: tx) != nil else { return (0, 0) }
        let quarantined = try heldKeys(in: tx)
        var (waiting, held) = (0, 0)
        try collections.dirty.forEach(in: tx) { _, dirty in
            guard let target = Mutation.Target(kindName: dirty.kind, name: dirty.name), targets[target] != nil else { return true }
            waiting += 1
            if quarantined[PendingKey(target: target, key: dirty.key)] != nil { held += 1 }
            return true
        }
        return (waiting, held)
    }

    /// Whether a dirty key waits to be sent (one whose key has a quarantined change waits for the
    /// quarantine, not for a push).
    func hasDirtyKeys() throws -> Bool {
        try collections.store.read { tx in
            guard try collections.dirty.first(in: tx) != nil else { return false }
            let held = try heldKeys(in: tx)
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
    /// current value, read in the same transaction as the history. Hands them to `emit` in batches of
    /// `batchSize`, or fewer whose keys and values reach `maxBytes` (one change at least), as their
    /// values are read; stops early when `emit` returns false.
    func collectPending(batchSize: Int, maxBytes: Int, emit: ([PushItem]) -> Bool) throws -> CollectedEnd {
        let token = try consumer.token()
        let store = container.store
        return try store.read { tx in
            let heldChanges = try heldChanges(in: tx)
            let quarantined = heldChanges.mapValues(\.ids)
            var end = CollectedEnd()
            // Each key's latest entry, in the order the keys first appear: one lookup an entry.
            var keys: [PendingKey] = []
            var latest: [HistoryEntry] = []
            let filter = HistoryFilter(targets: Set(targets.keys), transactionLimit: options.transactionsPerRound)
            switch try history.changes(since: token, matching: filter, in: tx) {
            case .expired:
                end.next = nil   // requeueEverything() just ran; a purge in between is caught next round
            case .changes(let transactions, let through):
                end.next = through
                let count = transactions.reduce(0) { $0 + $1.entries.count }
                var position: [PendingKey: Int] = [:]
                position.reserveCapacity(count)
                keys.reserveCapacity(count)
                latest.reserveCapacity(count)
                for transaction in transactions {
                    for entry in transaction.entries {
                        let pending = PendingKey(target: entry.target, key: entry.key)
                        let next = latest.count
                        // The key's place, given the next one if it has none yet (a single lookup).
                        let index = { (slot: inout Int) in slot }(&position[pending, default: next])
                        if index == next {
                            keys.append(pending)
                            latest.append(entry)
                        } else {
                            latest[index] = entry
                        }
                    }
                }
            }
            // The dirty keys first (few, and each may fold into a history key's item), then the items
            // in history order, handed over a batch at a time.
            struct Dirty { var ids: [UInt64] = []; var writeClock: UInt64?; var clock: UInt64; var token: UInt64 }
            var dirtyKeys: [PendingKey: Dirty] = [:]
            var dirtyOrder: [PendingKey] = []
            var heldDirty: [PendingKey: [UInt64]] = [:]
            try collections.dirty.forEach(in: tx) { id, dirty in
                guard let target = Mutation.Target(kindName: dirty.kind, name: dirty.name), targets[target] != nil else {
                    return true
                }
                let pending = PendingKey(target: target, key: dirty.key)
                if quarantined[pending] != nil {
                    heldDirty[pending, default: []].append(id)
                    return true
                }
                let writeClock = dirty.requeued == true ? nil : dirty.clock
                if var known = dirtyKeys[pending] {
                    known.ids.append(id)
                    if let writeClock { known.writeClock = max(known.writeClock ?? 0, writeClock) }
                    if dirty.clock > known.clock { (known.clock, known.token) = (dirty.clock, dirty.token) }
                    dirtyKeys[pending] = known
                } else {
                    dirtyKeys[pending] = Dirty(ids: [id], writeClock: writeClock, clock: dirty.clock, token: dirty.token)
                    dirtyOrder.append(pending)
                }
                return true
            }
            var batch: [PushItem] = []
            var bytes = 0
            batch.reserveCapacity(min(batchSize, 4_096))
            func add(_ item: PushItem) -> Bool {
                batch.append(item)
                bytes += item.change.key.count + (item.change.value?.count ?? 0)
                guard batch.count == batchSize || bytes >= maxBytes else { return true }
                defer {
                    batch.removeAll(keepingCapacity: true)
                    bytes = 0
                }
                return emit(batch)
            }
            for (pending, entry) in zip(keys, latest) where entry.author != Replication.author {
                guard let target = targets[pending.target] else { continue }
                let clock = entry.clock ?? HybridTimestamp(date: entry.timestamp)
                if !heldChanges.isEmpty, let held = heldChanges[pending] {
                    // A write made after this device quarantined the key's change is the user's newer
                    // word on the key: it goes over that change's version (seen, if not read), stamped
                    // later than it, and takes the writes that waited with it. One from before waits
                    // until the user settles the key (issue 47: it never reached the server).
                    guard let after = held.writesAfter, entry.token.rawValue > after else {
                        end.held.append(QueuedKey(target: pending.target, key: pending.key, clock: clock.rawValue))
                        continue
                    }
                    var change = try outgoing(target, key: pending.key, clock: clock.rawValue, token: entry.token.rawValue, in: tx)
                    change.base = max(change.base, held.sequence)
                    change.clock = self.clock(over: held, local: change.clock)
                    guard add(PushItem(change: change, target: pending.target, dirtyIDs: heldDirty[pending] ?? [],
                                       writeClock: change.clock)) else { return end }
                    continue
                }
                var item = PushItem(
                    change: try outgoing(target, key: pending.key, clock: clock.rawValue, token: entry.token.rawValue, in: tx),
                    target: pending.target, dirtyIDs: [], writeClock: clock.rawValue)
                if !dirtyKeys.isEmpty, let dirty = dirtyKeys.removeValue(forKey: pending) {
                    item.dirtyIDs = dirty.ids
                    if let writeClock = dirty.writeClock { item.writeClock = max(item.writeClock ?? 0, writeClock) }
                    if dirty.clock > item.change.clock { (item.change.clock, item.change.token) = (dirty.clock, dirty.token) }
                }
                guard add(item) else { return end }
            }
            for pending in dirtyOrder {
                guard let dirty = dirtyKeys[pending], let replicated = targets[pending.target] else { continue }
                let item = PushItem(
                    change: try outgoing(replicated, key: pending.key, clock: dirty.clock, token: dirty.token, in: tx),
                    target: pending.target, dirtyIDs: dirty.ids, writeClock: dirty.writeClock)
                guard add(item) else { return end }
            }
            if !batch.isEmpty { _ = emit(batch) }
            return end
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

    struct QueuedKey: Sendable {
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
    /// resolution of every conflict. Returns how many of this container's changes it newly learned the
    /// server has (``SyncReport/pushed``).
    ///
    /// A change is counted once, when this container first records that the server has it. The
    /// server answers a change it already had (a batch sent again by a standby that took over from an
    /// owner killed before it acknowledged the push, or after an answer lost on the way) with the
    /// version it gave it then: where this container recorded that version already, the change was
    /// counted then and is not again; where it never did (the owner died before recording it), it is
    /// counted now, once. SyncKit's replicated catalog is bookkeeping: never counted.
    ///
    /// The count, the events and the targets changed come out of the transaction that committed:
    /// ``KVStore/Store/write(author:_:)`` runs its body again when the map grows, and a count kept
    /// outside it counted a batch's keys once per run (a device that pushed 50,000 keys was told
    /// 54,278, its log holding 50,000).
    @discardableResult
    func record(_ outcomes: [PushOutcome], of batch: [PushItem], report: inout SyncReport) throws -> Int {
        let (events, changed, newlyPushed) = try container.store.write(author: Replication.author) { tx in
            var events: [SyncEvent] = []
            var changed = Set<Mutation.Target>()
            var newlyPushed = 0
            var state = try collections.replicaState(in: tx)
            var quarantined = try quarantinedKeys(in: tx)
            for (item, outcome) in zip(batch, outcomes) {
                guard let versions = versions[item.target], let target = targets[item.target] else { continue }
                let key = ByteKey(item.change.key)
                switch outcome {
                case .applied(let version):
                    // Recorded before: the server answers a batch sent again with the versions it gave.
                    let known = try versions.get(key, in: tx).map { $0.version >= version } ?? false
                    try tx.unrecorded {
                        try versions.put(KeyVersion(version: version, clock: item.change.clock, device: device), forKey: key, in: tx)
                        for id in item.dirtyIDs { try collections.dirty.delete(id, in: tx) }
                    }
                    // This write went over what was quarantined of the key (a write made after it).
                    _ = try supersedeQuarantined(PendingKey(target: item.target, key: item.change.key), through: version,
                                                 keys: &quarantined, in: tx)
                    if !known && item.target != Replication.catalogTarget {
                        state.pushed += 1
                        newlyPushed += 1
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
                case .missingBlob:
                    // A manifest row whose file's bytes the server has not got: not applied, and not
                    // an error. It stays pending (its dirty entries, or one queued now for a change
                    // read from history, which the round acknowledges), to go again once the file
                    // is uploaded; the rest of the batch is recorded as usual.
                    if item.dirtyIDs.isEmpty {
                        try queueToSendAgain([QueuedKey(target: item.target, key: item.change.key, clock: item.change.clock,
                                                        requeued: item.writeClock == nil)],
                                             state: &state, in: tx)
                    }
                case .rejected(let reason, let version, let value, let clock, let remoteDevice, let problem):
                    // Refused by a validator of the collection (issue 50): the server's row goes back,
                    // the write is kept with the reason, and the batch goes on.
                    let server = version.map {
                        ServerChange(sequence: $0, device: remoteDevice ?? "", kind: item.change.kind, name: item.change.name,
                                     key: item.change.key, value: value, clock: clock, problem: problem, valueKept: problem == nil)
                    }
                    if try settleRejected(item, target: target, reason: reason, server: server, state: &state,
                                          quarantined: &quarantined, events: &events, in: tx) {
                        changed.insert(item.target)
                    }
                }
            }
            state.conflicts += events.count(where: \.isConflict)
            try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
            return (events, changed, newlyPushed)
        }
        report.conflicts += events.count(where: \.isConflict)
        report.quarantined += events.count(where: \.isQuarantine)
        report.rejected += events.count(where: \.isRejected)
        for event in events { self.events(event) }
        if !changed.isEmpty {
            manifestArrived(changed)
            self.events(.applied(targets: changed, changes: events.count(where: \.isConflict)))
        }
        return newlyPushed
    }
}
#endif
