#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

extension Replicator {
    // MARK: - Conflicts

    /// Settles `remote` against a local write of the same key that the server has not seen, inside
    /// `tx`: applies the winner, records the server version as the key's base, and queues what must be
    /// sent again. The remote change is on the server, the local one is not: reject-and-report keeps
    /// the remote. Returns nil when both values are the same: no conflict.
    func resolve(local: [UInt8]?, localClock: UInt64, remote: ServerChange, target: ReplicatedTarget,
                         stage: ConflictEvent.Stage, state: inout ReplicaState,
                         in tx: WriteTransaction) throws -> ConflictEvent? {
        if local == remote.value {
            // The same value on both sides (two devices that synced the same key with a new server,
            // say): nothing to settle; the server's version becomes the key's base.
            try tx.unrecorded {
                try versions[target.target]?.put(KeyVersion(version: remote.sequence, clock: remote.clock, device: remote.device),
                                                  forKey: ByteKey(remote.key), in: tx)
            }
            return nil
        }
        // A value this device cannot read settles nothing, whichever side would win: it is
        // quarantined, and the local write waits rather than go over it.
        try target.check(remote.key, remote.value)
        let remoteWinsByClock = (remote.clock, remote.device) > (localClock, device)
        let resolution: ConflictEvent.Resolution
        var sendAgainClock: UInt64?   // the value sent is the key's, read when the queue is sent
        switch target.policy {
        case .rejectAndReport:
            resolution = .rejectedLocal
        case .merge(let merge):
            if let local, let remoteValue = remote.value {
                let merged = try merge(local, remoteValue, remote.key)
                let clock = HybridTimestamp.next(after: HybridTimestamp(rawValue: max(localClock, remote.clock)), now: Date())
                try target.write(remote.key, merged, tx)
                resolution = .merged
                sendAgainClock = clock.rawValue
            } else {
                resolution = remoteWinsByClock ? .tookRemote : .keptLocal
            }
        case .lastWriterWins:
            resolution = remoteWinsByClock ? .tookRemote : .keptLocal
        }
        switch resolution {
        case .tookRemote, .rejectedLocal:
            if try target.read(remote.key, tx) != remote.value { try target.write(remote.key, remote.value, tx) }
            // The local write lost: nothing of it is left to send. A key queued to be sent again
            // (a held-back write, a start-over's) would otherwise go out with the remote's value and
            // the local write's older clock, as this device's change: the server's row would then be
            // stamped older than the value it holds, and a write older than that value could win
            // over it by clock (found by the server-state fuzzer, issue 46).
            try dropQueued(target.target, key: remote.key, in: tx)
        case .keptLocal:
            if try target.read(remote.key, tx) != local { try target.write(remote.key, local, tx) }
            sendAgainClock = localClock
        case .merged:
            break
        }
        try tx.unrecorded {
            try versions[target.target]?.put(KeyVersion(version: remote.sequence, clock: remote.clock, device: remote.device),
                                              forKey: ByteKey(remote.key), in: tx)
        }
        if let sendAgainClock {
            try queueToSendAgain([QueuedKey(target: target.target, key: remote.key, clock: sendAgainClock)], state: &state, in: tx)
        }
        return ConflictEvent(target: target.target, key: remote.key, resolution: resolution, stage: stage,
                             localClock: HybridTimestamp(rawValue: localClock), remoteClock: HybridTimestamp(rawValue: remote.clock),
                             remoteDevice: remote.device, serverVersion: remote.sequence)
    }

    /// Removes `key` of `target` from the keys queued to be sent again (`_sync.dirty`).
    func dropQueued(_ target: Mutation.Target, key: [UInt8], in tx: WriteTransaction) throws {
        var ids: [UInt64] = []
        try collections.dirty.forEach(in: tx) { id, dirty in
            if dirty.key == key && dirty.kind == target.kindName && dirty.name == target.name { ids.append(id) }
            return true
        }
        try tx.unrecorded { for id in ids { try collections.dirty.delete(id, in: tx) } }
    }

    /// The clock of each key with a local write the server has not seen: pending history entries not
    /// by the replicator (the latest one wins) and dirty keys.
    func pendingLocalClocks(in tx: ReadTransaction) throws -> [PendingKey: UInt64] {
        var clocks: [PendingKey: UInt64] = [:]
        let token = try consumer.token(in: tx)
        let filter = HistoryFilter(targets: Set(targets.keys))
        if case .changes(let transactions, _) = try history.changes(since: token, matching: filter, in: tx) {
            for transaction in transactions {
                for entry in transaction.entries {
                    let pending = PendingKey(target: entry.target, key: entry.key)
                    if entry.author == Replication.author {
                        clocks[pending] = nil
                    } else {
                        clocks[pending] = (entry.clock ?? HybridTimestamp(date: entry.timestamp)).rawValue
                    }
                }
            }
        }
        try collections.dirty.forEach(in: tx) { _, dirty in
            if let target = Mutation.Target(kindName: dirty.kind, name: dirty.name) {
                let pending = PendingKey(target: target, key: dirty.key)
                clocks[pending] = max(clocks[pending] ?? 0, dirty.clock)
            }
            return true
        }
        return clocks
    }
}
#endif
