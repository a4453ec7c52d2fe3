#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

extension Replicator {
    // MARK: - Resync

    /// Reloads the targets from the server's current state after the log was pruned past the cursor,
    /// a page at a time (``ReplicationServer/statePage(group:after:limit:)``): the device holds one page
    /// of the group, never the whole, whatever its size.
    ///
    /// The pages are read one after another, not as one snapshot. The first page's last sequence
    /// number is where the resync stands: every change up to it is in the pages, and the cursor is set
    /// to it at the end, so the log after it (pulled next, as after any round) brings what changed
    /// while the device paged. A row a page holds at a newer version is not undone by the log's older
    /// change of its key (``apply(_:newCursor:stage:pulled:)`` skips a change older than the version
    /// it has); a key deleted before its page came is a tombstone there.
    ///
    /// Each page is applied in a transaction of its own, then the local keys in the page's range of
    /// the server's order that the server does not have (and that no local write waits to send) are
    /// deleted; at the end, the keys of targets the server has nothing of, and the cursor moves. A
    /// crash part-way leaves the cursor where it was: the next round resyncs again, from the start.
    func resynchronize(_ server: any ReplicationServer, report: inout SyncReport) async throws {
        var after: StateCursor?
        var start: Int64?
        // The targets the server's pages held rows of: the others' keys go at the end.
        var seen = Set<Mutation.Target>()
        var pulled = 0
        var pages = 0
        while true {
            let page = try await server.statePage(group: group, after: after, limit: options.batchSize)
            let startedAt = start ?? page.lastSequence
            start = startedAt
            let outcome = try await onWriter { try apply(page.unnameable + page.rows, newCursor: nil, stage: .resync, pulled: &pulled) }
            report.conflicts += outcome.events.count(where: \.isConflict)
            report.quarantined += outcome.events.count(where: \.isQuarantine)
            for event in outcome.events { self.events(event) }
            let covered = after
            try await onWriter { try deleteKeys(notIn: page, after: covered, seen: &seen) }
            pages += 1
            if let paged = resyncPaged.withLock({ $0 }) { await paged(pages) }
            guard let next = page.next else { break }
            after = next
        }
        let cursor = start ?? 0
        try await onWriter { try finishResync(at: cursor, seen: seen) }
        report.pulled += pulled
        report.resynchronized = true
        manifestArrived(nil)
        self.events(.resynchronized(cursor: cursor))
    }

    /// The most local keys read at once while a page's range is compared with the server's.
    static let resyncKeyChunk = 1_024

    /// Deletes the local keys that lie in the range of the server's order `page` covers (after `after`,
    /// through the page's ``StatePage/next``) and that the page does not hold with a value, unless a
    /// local write of them waits to be sent; adds the page's targets to `seen`.
    ///
    /// The server orders kinds and names in its own collation, which a device cannot compute; but it
    /// orders keys within a target by their bytes, as LMDB does. So the range is taken target by target:
    /// a target the page has rows of is covered from the start of its keys (or from `after`'s key when
    /// the range starts inside it) to their end (or to the page's last key when the next page goes on in
    /// it); the target `after` is in is covered from `after`'s key on even when the page holds none of
    /// its rows (the server has no more of it).
    func deleteKeys(notIn page: StatePage, after: StateCursor?, seen: inout Set<Mutation.Target>) throws {
        var onServer: [Mutation.Target: Set<[UInt8]>] = [:]
        var inPage: [Mutation.Target] = []
        for row in page.rows {
            guard let target = Mutation.Target(kindName: row.kind, name: row.name) else { continue }
            if onServer[target] == nil {
                onServer[target] = []
                inPage.append(target)
            }
            if row.value != nil { onServer[target]!.insert(row.key) }
        }
        let afterTarget = after.flatMap { Mutation.Target(kindName: $0.kind, name: $0.name) }
        let nextTarget = page.next.flatMap { Mutation.Target(kindName: $0.kind, name: $0.name) }
        var covered = inPage
        if let afterTarget, !covered.contains(afterTarget) { covered.append(afterTarget) }
        seen.formUnion(inPage)
        try container.store.write(author: Replication.author) { tx in
            let pending = try pendingLocalClocks(in: tx)
            for id in covered {
                guard let target = targets[id] else { continue }
                try deleteKeys(of: target, id, after: id == afterTarget ? after?.key : nil,
                               through: id == nextTarget ? page.next?.key : nil,
                               keeping: onServer[id] ?? [], pending: pending, in: tx)
            }
        }
    }

    /// Ends a resync: deletes the keys of the targets the server has no row of (unless a local write of
    /// them waits to be sent), and moves the cursor to `cursor`, the first page's last sequence number.
    func finishResync(at cursor: Int64, seen: Set<Mutation.Target>) throws {
        try container.store.write(author: Replication.author) { tx in
            let pending = try pendingLocalClocks(in: tx)
            for (id, target) in targets where !seen.contains(id) {
                try deleteKeys(of: target, id, after: nil, through: nil, keeping: [], pending: pending, in: tx)
            }
            var state = try collections.replicaState(in: tx)
            state.cursor = cursor
            state.cursorMark = nil
            state.resyncs += 1
            try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
        }
    }

    /// Deletes `target`'s keys after `lower` through `upper` (`nil`: no bound) but those in `keeping`
    /// and those with a pending local write, reading ``resyncKeyChunk`` keys at a time.
    private func deleteKeys(of target: ReplicatedTarget, _ id: Mutation.Target, after lower: [UInt8]?, through upper: [UInt8]?,
                            keeping: Set<[UInt8]>, pending: [PendingKey: UInt64], in tx: WriteTransaction) throws {
        var from = lower
        while true {
            let chunk = try target.keysInRange(from, upper, Self.resyncKeyChunk, tx)
            for key in chunk where !keeping.contains(key) && pending[PendingKey(target: id, key: key)] == nil {
                try target.write(key, nil, tx)
            }
            guard chunk.count == Self.resyncKeyChunk, let last = chunk.last else { return }
            from = last
        }
    }
}
#endif
