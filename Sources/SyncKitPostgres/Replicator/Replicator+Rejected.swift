#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

/// A write the server refused with a reason (issue 50): the server's row goes back in its place, the
/// write is kept with the reason (`_sync.rejected`), and the push goes on. Users of other systems
/// complain of both failures this avoids: a refused upload that silently drops the data, and an
/// upload queue blocked for good by the one write the server refuses.
extension Replicator {
    /// Settles a write the server answered `rejected`, in ``record(_:of:report:)``'s transaction:
    /// keeps it, and puts the server's row of the key back in its place (its value, or the key removed
    /// where the server has none), unless the key was written again since the push collected it (that
    /// newer write goes next, on the server's version). A server row this device cannot take (a value
    /// it cannot read, a clock too far ahead) is quarantined as a pulled one would be, and the refused
    /// value is removed here all the same: no device keeps a value the server refused. Nothing of it
    /// is queued again: the refused write is never sent again unless the user retries it.
    ///
    /// Returns the record kept, and whether the key's local value changed.
    func settleRejected(_ item: PushItem, target: ReplicatedTarget, reason: String, server: ServerChange?,
                        state: inout ReplicaState, quarantined: inout [PendingKey: [UInt64]],
                        events: inout [SyncEvent], in tx: WriteTransaction) throws -> Bool {
        try tx.unrecorded { for id in item.dirtyIDs { try collections.dirty.delete(id, in: tx) } }
        events.append(.rejected(try keepRejected(item.change, reason: reason, serverVersion: server?.sequence, state: &state, in: tx)))
        let key = item.change.key
        let versions = versions[item.target]
        // Written again since it was collected: the newer write goes at the next push, on the server's version.
        guard try target.read(key, tx) == item.change.value else {
            if let server {
                try tx.unrecorded {
                    try versions?.put(KeyVersion(version: server.sequence, clock: server.clock, device: server.device),
                                      forKey: ByteKey(key), in: tx)
                }
            }
            return false
        }
        guard let server else {
            // The server has no row of the key: this device holds none either.
            try tx.unrecorded { _ = try versions?.delete(ByteKey(key), in: tx) }
            if item.change.value == nil { return false }
            try target.write(key, nil, tx)
            return true
        }
        var problem = self.problem(of: server) ?? clockProblem(server.clock)
        if problem == nil {
            do {
                try target.check(key, server.value)
            } catch let error as UnreadableChange {
                problem = error.reason
            }
        }
        if let problem {
            events.append(.quarantined(try quarantine(server, reason: problem, state: &state, keys: &quarantined, in: tx)))
            if item.change.value != nil { try target.write(key, nil, tx) }
            return item.change.value != nil
        }
        let changed = item.change.value != server.value
        if changed { try target.write(key, server.value, tx) }
        try tx.unrecorded {
            try versions?.put(KeyVersion(version: server.sequence, clock: server.clock, device: server.device), forKey: ByteKey(key), in: tx)
        }
        try history.observeClock(HybridTimestamp(rawValue: server.clock), now: options.clock(), maxSkew: options.maxClockSkew, in: tx)
        _ = try supersedeQuarantined(PendingKey(target: item.target, key: key), through: server.sequence, keys: &quarantined, in: tx)
        return changed
    }

    /// Keeps `change` in `_sync.rejected` under the next number, within ``Options/maxRejectedWrites``
    /// and ``Options/maxRejectedBytes`` (the oldest go first, counted in the replica's state): a
    /// server that refuses everything cannot make this device store without bound.
    private func keepRejected(_ change: OutgoingChange, reason: String, serverVersion: Int64?,
                              state: inout ReplicaState, in tx: WriteTransaction) throws -> RejectedWrite {
        let id = (state.lastRejectedID ?? 0) + 1
        state.lastRejectedID = id
        let row = RejectedWrite(id: id, kind: change.kind, name: change.name, key: change.key, value: change.value,
                                clock: change.clock, reason: String(reason.prefix(Self.maxReasonCharacters)), rejectedAt: Date(),
                                serverVersion: serverVersion)
        try tx.unrecorded { try collections.rejected.put(row, forKey: id, in: tx) }
        var count = try collections.rejected.count(in: tx)
        let (sizes, stored) = try Self.storedSizes(of: collections.rejected, in: tx)
        var bytes = stored
        var evicted = 0
        for (oldest, size) in sizes where oldest != id && (count > options.maxRejectedWrites || bytes > options.maxRejectedBytes) {
            try tx.unrecorded { _ = try collections.rejected.delete(oldest, in: tx) }
            count -= 1
            bytes -= size
            evicted += 1
        }
        if evicted > 0 { state.rejectedEvicted = (state.rejectedEvicted ?? 0) + evicted }
        return row
    }

    /// The stored size of each entry of `collection` (its value's bytes), in key order
    /// from 0 up, and their total: what the bounds of the quarantine and of the rejected writes count.
    static func storedSizes<Value>(of collection: KVCollection<UInt64, Value>,
                                   in tx: ReadTransaction) throws -> (sizes: [(UInt64, Int)], bytes: Int) {
        var bytes = 0
        var sizes: [(UInt64, Int)] = []
        try collection.forEachBytes(UInt64(0)..., in: tx) { key, value in
            sizes.append((try UInt64.decodeKey(key), value.count))
            bytes += value.count
            return true
        }
        return (sizes, bytes)
    }

    /// The longest reason kept (a validator's message may be of any length).
    static let maxReasonCharacters = 1_000

    /// Writes a rejected write's value (or its delete) again, as a new local change by `author`, and
    /// drops its record: the next sync sends it, and the server's validators judge it again (a
    /// validator that changed its mind, or a shape fixed on the server). Needs no server; one
    /// transaction.
    ///
    /// `kvtool sync rejected retry ID` calls it.
    ///
    /// - Throws: ``ReplicationError/notRejected(_:)`` when no rejected write has that number, or its
    ///   target is not replicated by this replicator.
    @discardableResult
    public func retryRejected(_ id: UInt64, author: String? = nil) throws -> RejectedWrite {
        try container.store.write(author: author) { tx in
            let row = try rejectedWrite(id, in: tx)
            guard let target = row.target.flatMap({ targets[$0] }) else {
                throw ReplicationError.notRejected("rejected write \(id) is of \(row.target?.description ?? row.kind), which this replicator does not replicate")
            }
            try target.write(row.key, row.value, tx)
            try tx.unrecorded { _ = try collections.rejected.delete(id, in: tx) }
            return row
        }
    }

    /// Drops a rejected write's record: the server's value stays. Needs no server.
    ///
    /// `kvtool sync rejected discard ID` calls it.
    ///
    /// - Throws: ``ReplicationError/notRejected(_:)`` when no rejected write has that number.
    @discardableResult
    public func discardRejected(_ id: UInt64) throws -> RejectedWrite {
        try container.store.write(author: Replication.author) { tx in
            let row = try rejectedWrite(id, in: tx)
            try tx.unrecorded { _ = try collections.rejected.delete(id, in: tx) }
            return row
        }
    }

    private func rejectedWrite(_ id: UInt64, in tx: ReadTransaction) throws -> RejectedWrite {
        guard let row = try collections.rejected.get(id, in: tx) else {
            throw ReplicationError.notRejected("no rejected write has number \(id) (kvtool sync rejected lists them)")
        }
        return row
    }
}

extension SyncEvent {
    var isRejected: Bool {
        if case .rejected = self { true } else { false }
    }
}
#endif
