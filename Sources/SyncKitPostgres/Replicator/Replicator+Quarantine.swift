#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

/// Quarantine: a change this device cannot apply is kept with its bytes and its reason, and the pull
/// goes on past it (PowerSync and CloudKit clients do the same with a record they cannot read). One
/// bad row, a value from a newer app or a clock that is wrong, never stops a device.
extension Replicator {
    /// Applies the quarantined changes that can now be applied: after an app upgrade that reads their
    /// values, or once this device's clock has caught up with theirs. A change whose key has since
    /// taken a newer version is dropped as superseded; the others stay. Conflicts with this device's
    /// pending writes are settled as in a pull, and reported. Needs no server.
    ///
    /// `kvtool sync quarantine retry` calls it.
    @discardableResult
    public func retryQuarantined() throws -> QuarantineRetryReport {
        let quarantined = try collections.store.read { tx in try collections.quarantine.entries(in: tx).map(\.value) }
        var report = QuarantineRetryReport()
        guard !quarantined.isEmpty else { return report }
        // What is wrong with the row itself stays wrong. (A change kept from the previous server has a
        // negative number of this device's making: ``apply`` takes it as older than any version of its
        // key, so one this device has since learned supersedes it. Any other number that is not
        // positive is the server's row's.)
        let changes = quarantined.map { row in
            ServerChange(sequence: row.sequence, device: row.device, kind: row.kind, name: row.name, key: row.key,
                         value: row.value, clock: row.clock, token: row.token,
                         problem: row.rowProblem
                            ?? (row.sequence > 0 || row.fromPreviousServer ? nil : "its sequence number is not positive")
                            ?? (row.valueKept ? nil : "its value was over the size limit and was not kept"),
                         valueKept: row.valueKept)
        }
        var pulled = 0
        let outcome = try apply(changes, newCursor: nil, stage: .pull, pulled: &pulled)
        report.applied = outcome.applied
        report.superseded = outcome.superseded
        report.remaining = try collections.store.read { tx in try collections.quarantine.count(in: tx) }
        for event in outcome.events where !event.isQuarantine { events(event) }
        return report
    }

    /// The keys with a quarantined change, and the ids of those changes.
    func quarantinedKeys(in tx: ReadTransaction) throws -> [PendingKey: [UInt64]] {
        try quarantinedKeys(in: tx, holding: false)
    }

    /// The keys whose writes wait behind a quarantined change of the server this device follows (one
    /// kept from a previous server holds nothing back: the server it was newer than is gone).
    func heldKeys(in tx: ReadTransaction) throws -> [PendingKey: [UInt64]] {
        try quarantinedKeys(in: tx, holding: true)
    }

    private func quarantinedKeys(in tx: ReadTransaction, holding: Bool) throws -> [PendingKey: [UInt64]] {
        var keys: [PendingKey: [UInt64]] = [:]
        try collections.quarantine.forEach(in: tx) { id, row in
            if let target = row.target, !(holding && row.fromPreviousServer) {
                keys[PendingKey(target: target, key: row.key), default: []].append(id)
            }
            return true
        }
        return keys
    }

    /// What holds a key back: its quarantined changes of the server this device follows.
    struct HeldChanges {
        var ids: [UInt64] = []
        var rows: [QuarantinedChange] = []
        /// The newest of them (the version a write of the key goes over).
        var sequence: Int64 = 0
        var clock: UInt64 = 0
        /// Local writes after this history token go over them (`nil`: a row quarantined before
        /// issue 47, behind which every write waits).
        var writesAfter: UInt64?
    }

    /// ``heldKeys(in:)`` with the rows.
    func heldChanges(in tx: ReadTransaction) throws -> [PendingKey: HeldChanges] {
        var keys: [PendingKey: HeldChanges] = [:]
        try collections.quarantine.forEach(in: tx) { id, row in
            guard let target = row.target, !row.fromPreviousServer else { return true }
            let pending = PendingKey(target: target, key: row.key)
            var held = keys[pending] ?? HeldChanges(writesAfter: row.heldThrough)
            held.ids.append(id)
            held.rows.append(row)
            held.sequence = max(held.sequence, row.sequence)
            held.clock = max(held.clock, row.clock)
            // The latest mark of them: a write before any of them was quarantined waits.
            held.writesAfter = held.writesAfter.flatMap { mark in row.heldThrough.map { max(mark, $0) } }
            keys[pending] = held
            return true
        }
        return keys
    }

    /// The keys whose local writes wait behind quarantined changes, in one line for a request
    /// (``SyncKit/HeldKeys``); `nil` when none waits.
    func heldKeysRecord(in tx: ReadTransaction) throws -> HeldKeys? {
        guard try collections.dirty.first(in: tx) != nil else { return nil }
        let held = try heldChanges(in: tx)
        guard !held.isEmpty else { return nil }
        var waiting: [PendingKey] = []
        var seen = Set<PendingKey>()
        try collections.dirty.forEach(in: tx) { _, dirty in
            guard let target = Mutation.Target(kindName: dirty.kind, name: dirty.name), targets[target] != nil else { return true }
            let pending = PendingKey(target: target, key: dirty.key)
            if held[pending] != nil && seen.insert(pending).inserted { waiting.append(pending) }
            return true
        }
        guard !waiting.isEmpty else { return nil }
        let shown = waiting.prefix(3).compactMap { held[$0]?.rows.max { $0.sequence < $1.sequence }?.description }
        let more = waiting.count > shown.count ? "; and \(waiting.count - shown.count) more" : ""
        let count = waiting.count
        return HeldKeys(count: count, message: "\(count) key\(count == 1 ? "" : "s") wait\(count == 1 ? "s" : "") behind other devices' changes this device cannot apply (settle with kvtool sync quarantine keep-mine|drop SEQUENCE): \(shown.joined(separator: "; "))\(more)")
    }

    /// The clock that a write of this device sent over `held` is stamped with: later than theirs
    /// (whoever compares clocks later sees this device's word as the last), unless theirs is further
    /// ahead than the bound (no server would take a stamp past it; its version alone is gone over).
    func clock(over held: HeldChanges, local: UInt64) -> UInt64 {
        guard local <= held.clock, clockProblem(held.clock) == nil else { return local }
        return HybridTimestamp.next(after: HybridTimestamp(rawValue: held.clock), now: options.clock()).rawValue
    }

    /// Settles a key held behind quarantined changes as this device's user decides, for the change
    /// `sequence` (the number ``Replication/quarantine(of:)`` and `kvtool sync quarantine` list) and
    /// every other quarantined change of its key. Needs no server; one transaction: a refusal changes
    /// nothing.
    ///
    /// - ``QuarantineResolution/drop``: this device takes nothing of them, and follows the server
    ///   from their version on (the next version of the key, from any device, applies here as usual).
    ///   A local write of the key that waited behind them is dropped too: the local value stays as it
    ///   is, and differs from the server's (unreadable) one until the key is written again.
    /// - ``QuarantineResolution/keepMine``: this device's value of the key (or its absence: a delete)
    ///   goes to the server over them at the next sync, stamped later than their clock, as the last
    ///   word on the key for every device.
    ///
    /// `kvtool sync quarantine drop|keep-mine SEQUENCE` calls it.
    ///
    /// - Throws: ``ReplicationError/notQuarantined(_:)`` when no quarantined change has that number.
    @discardableResult
    public func resolveQuarantined(sequence: Int64, as resolution: QuarantineResolution) throws -> QuarantineResolveReport {
        let report: QuarantineResolveReport = try container.store.write(author: Replication.author) { tx in
            guard let chosen = try collections.quarantine.get(UInt64(bitPattern: sequence), in: tx) else {
                throw ReplicationError.notQuarantined("no quarantined change has number \(sequence) (kvtool sync quarantine lists them)")
            }
            var rows: [(UInt64, QuarantinedChange)] = []
            try collections.quarantine.forEach(in: tx) { id, row in
                if row.key == chosen.key && row.kind == chosen.kind && row.name == chosen.name { rows.append((id, row)) }
                return true
            }
            var state = try collections.replicaState(in: tx)
            try tx.unrecorded { for (id, _) in rows { _ = try collections.quarantine.delete(id, in: tx) } }
            var report = QuarantineResolveReport(resolution: resolution, key: chosen.key, target: chosen.target, resolved: rows.count)
            // A row of a kind no replicator writes, or of a target not replicated here: nothing waits
            // on it, and there is nothing to send.
            guard let target = chosen.target, let versions = versions[target] else { return report }
            let current = rows.filter { !$0.1.fromPreviousServer }.map(\.1)
            if let newest = current.max(by: { $0.sequence < $1.sequence }),
               try (versions.get(ByteKey(chosen.key), in: tx)?.version ?? 0) < newest.sequence {
                // Seen, if not read: the key's next version from the server applies over it, and a
                // write of this device goes over it without a conflict.
                try tx.unrecorded {
                    try versions.put(KeyVersion(version: newest.sequence, clock: newest.clock, device: newest.device),
                                     forKey: ByteKey(chosen.key), in: tx)
                }
            }
            switch resolution {
            case .drop:
                var dropped = 0
                try collections.dirty.forEach(in: tx) { _, dirty in
                    if dirty.key == chosen.key && dirty.kind == target.kindName && dirty.name == target.name { dropped += 1 }
                    return true
                }
                try dropQueued(target, key: chosen.key, in: tx)
                report.droppedLocalWrites = dropped
            case .keepMine:
                guard targets[target] != nil else { break }
                var held = HeldChanges()
                held.clock = current.map(\.clock).max() ?? 0
                let local = try pendingLocalClocks(in: tx)[PendingKey(target: target, key: chosen.key)] ?? 0
                let now = HybridTimestamp.next(after: HybridTimestamp(rawValue: local), now: options.clock()).rawValue
                let stamp = max(now, clock(over: held, local: local))
                try dropQueued(target, key: chosen.key, in: tx)
                try queueToSendAgain([QueuedKey(target: target, key: chosen.key, clock: stamp)], state: &state, in: tx)
                _ = try history.observeClock(HybridTimestamp(rawValue: stamp), now: options.clock(), maxSkew: options.maxClockSkew, in: tx)
                report.queued = true
            }
            try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
            try tx.unrecorded { try ownership.recordHeld(try heldKeysRecord(in: tx), in: tx) }
            return report
        }
        ownership.posted()
        return report
    }

    /// Keeps what is quarantined when this device starts over with another server (or with one that
    /// forgot): each change is kept as the previous server's, under a negative number (its own with
    /// the top bit set, or the next free one below), which no server's change takes and which sorts
    /// before every version of the new server. Part of ``rebase(_:in:)``'s transaction.
    func keepQuarantineOfPreviousServer(in tx: WriteTransaction) throws {
        var moved: [(UInt64, QuarantinedChange)] = []
        var taken = Set<Int64>()
        try collections.quarantine.forEach(in: tx) { id, row in
            if Int64(bitPattern: id) > 0 { moved.append((id, row)) } else { taken.insert(Int64(bitPattern: id)) }
            return true
        }
        var marked: [(UInt64, QuarantinedChange)] = []
        try collections.quarantine.forEach(in: tx) { id, row in
            if Int64(bitPattern: id) <= 0 && !row.fromPreviousServer {
                var row = row
                row.fromPreviousServer = true
                row.previousSequence = row.previousSequence ?? row.sequence
                marked.append((id, row))
            }
            return true
        }
        try tx.unrecorded {
            for (id, row) in marked { try collections.quarantine.put(row, forKey: id, in: tx) }
            for (id, var row) in moved {
                _ = try collections.quarantine.delete(id, in: tx)
                var number = Int64(bitPattern: id) | Int64.min
                while taken.contains(number) { number = number == Int64.min ? -1 : number - 1 }
                taken.insert(number)
                row.previousSequence = row.sequence
                row.sequence = number
                row.fromPreviousServer = true
                try collections.quarantine.put(row, forKey: UInt64(bitPattern: number), in: tx)
            }
        }
    }

    /// Keeps `change` in quarantine (replacing an earlier quarantine of the same change), within the
    /// bounds of ``Options/maxQuarantinedChanges`` and ``Options/maxQuarantineBytes``.
    func quarantine(_ change: ServerChange, reason: String, state: inout ReplicaState,
                    keys: inout [PendingKey: [UInt64]], in tx: WriteTransaction) throws -> QuarantinedChange {
        let id = UInt64(bitPattern: change.sequence)
        // A change kept from the previous server, retried and quarantined again, stays that server's.
        let earlier = try collections.quarantine.get(id, in: tx)
        let previous = earlier?.fromPreviousServer == true && earlier?.key == change.key ? earlier : nil
        let mark = try earlier?.heldThrough ?? history.currentToken(in: tx).rawValue
        let row = QuarantinedChange(sequence: change.sequence, kind: String(change.kind.prefix(200)), name: String(change.name.prefix(200)),
                                    key: change.key, value: change.value, valueKept: change.valueKept, clock: change.clock,
                                    device: change.device, token: change.token, reason: reason, quarantinedAt: previous?.quarantinedAt ?? Date(),
                                    rowProblem: change.problem, fromPreviousServer: previous != nil,
                                    previousSequence: previous?.previousSequence,
                                    heldThrough: mark)
        try tx.unrecorded { try collections.quarantine.put(row, forKey: id, in: tx) }
        if let target = row.target {
            let pending = PendingKey(target: target, key: row.key)
            if !(keys[pending]?.contains(id) ?? false) { keys[pending, default: []].append(id) }
        }
        // The bounds: the oldest go first, and are counted.
        var count = try collections.quarantine.count(in: tx)
        var (sizes, bytes) = try Self.storedSizes(of: collections.quarantine, in: tx)
        // Those kept from a previous server (negative numbers, last in key order) are the oldest.
        if let first = sizes.firstIndex(where: { Int64(bitPattern: $0.0) < 0 }) {
            sizes = Array(sizes[first...] + sizes[..<first])
        }
        var evicted = 0
        for (oldest, size) in sizes where oldest != id && (count > options.maxQuarantinedChanges || bytes > options.maxQuarantineBytes) {
            try tx.unrecorded { _ = try collections.quarantine.delete(oldest, in: tx) }
            for (key, ids) in keys where ids.contains(oldest) {
                keys[key] = ids.filter { $0 != oldest }
                if keys[key]!.isEmpty { keys[key] = nil }
            }
            count -= 1
            bytes -= size
            evicted += 1
        }
        if evicted > 0 { state.quarantineEvicted = (state.quarantineEvicted ?? 0) + evicted }
        return row
    }

    /// Drops the quarantined changes of `key` up to `sequence`: a newer version of the key was applied.
    /// Returns how many.
    func supersedeQuarantined(_ key: PendingKey, through sequence: Int64, keys: inout [PendingKey: [UInt64]],
                              in tx: WriteTransaction) throws -> Int {
        guard let ids = keys[key] else { return 0 }
        let superseded = ids.filter { Int64(bitPattern: $0) <= sequence }
        guard !superseded.isEmpty else { return 0 }
        try tx.unrecorded {
            for id in superseded { _ = try collections.quarantine.delete(id, in: tx) }
        }
        let left = ids.filter { Int64(bitPattern: $0) > sequence }
        keys[key] = left.isEmpty ? nil : left
        return superseded.count
    }

    /// What no replicator writes, checked before anything of the change is written. A retried change
    /// may have a number that is not positive: one kept from a previous server.
    func problem(of change: ServerChange, retrying: Bool = false) -> String? {
        if let problem = change.problem { return problem }
        guard retrying || change.sequence > 0 else { return "its sequence number is not positive" }
        guard !change.device.isEmpty, change.device.utf8.count <= 200 else { return "its device id is empty or too long" }
        guard let target = Mutation.Target(kindName: change.kind, name: change.name) else {
            return "its kind '\(change.kind.prefix(40))' is neither collection nor defaults"
        }
        guard !change.name.isEmpty, change.name.utf8.count <= 200 else { return "\(target) has an invalid name" }
        guard !change.key.isEmpty, change.key.count <= Store.maxKeySize else {
            return "its key is \(change.key.count) bytes (1 to \(Store.maxKeySize))"
        }
        return nil
    }

    /// Why a change stamped `clock` is not applied here, if it is further ahead of this device's clock
    /// than the bound.
    func clockProblem(_ clock: UInt64) -> String? {
        let stamp = HybridTimestamp(rawValue: clock)
        let now = options.clock()
        guard stamp.isAhead(of: now, by: options.maxClockSkew) else { return nil }
        return "its clock is \(ReplicationError.seconds(stamp.offset(from: now))) ahead of this device's (the limit is \(ReplicationError.seconds(options.maxClockSkew)))"
    }

    /// Whether an error from applying one change is that change's problem (quarantine it) rather than
    /// the store's (fail the round, as before).
    static func isChangeProblem(_ error: any Error) -> Bool {
        switch error {
        case is UnreadableChange, is CBORError, is DecodingError, is EncodingError, is KeyDecodingError: return true
        case is LMDBError, is SyncError, is ReplicationError: return false
        case let error as KVStoreError:
            switch error {
            case .invalidKey, .valueTooLarge, .encodingFailed, .corruptValue, .notAPropertyList, .invalidName: return true
            default: return false
            }
        default: return true   // a merge function's own error
        }
    }
}

extension SyncEvent {
    var isQuarantine: Bool {
        if case .quarantined = self { true } else { false }
    }
}
#endif
