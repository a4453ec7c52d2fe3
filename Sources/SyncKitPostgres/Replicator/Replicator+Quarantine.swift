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
        let row = QuarantinedChange(sequence: change.sequence, kind: String(change.kind.prefix(200)), name: String(change.name.prefix(200)),
                                    key: change.key, value: change.value, valueKept: change.valueKept, clock: change.clock,
                                    device: change.device, token: change.token, reason: reason, quarantinedAt: previous?.quarantinedAt ?? Date(),
                                    rowProblem: change.problem, fromPreviousServer: previous != nil,
                                    previousSequence: previous?.previousSequence)
        try tx.unrecorded { try collections.quarantine.put(row, forKey: id, in: tx) }
        if let target = row.target {
            let pending = PendingKey(target: target, key: row.key)
            if !(keys[pending]?.contains(id) ?? false) { keys[pending, default: []].append(id) }
        }
        // The bounds: the oldest go first, and are counted.
        var count = try collections.quarantine.count(in: tx)
        var bytes = 0
        var sizes: [(UInt64, Int)] = []
        try collections.quarantine.forEachBytes(UInt64(0)..., in: tx) { key, value in
            sizes.append((try UInt64.decodeKey(key), value.count))
            bytes += value.count
            return true
        }
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
