#if PostgreSQL
import KVStore

/// The closes nobody can await where they start: a replicator released without ``Replicator/close()``
/// closes its connection from `deinit`, which cannot wait. Each such close is kept here until it ends,
/// so that it is owned, not forgotten: ``awaitAll()`` waits for every one (kvtool before it exits,
/// a test before it stops its server).
package enum OwnedCloses {
    private static let pending = Locked<(next: UInt64, tasks: [UInt64: Task<Void, Never>])>((0, [:]))

    /// Starts `close` and keeps it until it ends.
    static func start(_ close: @escaping @Sendable () async -> Void) {
        pending.withLock { pending in
            pending.next += 1
            let id = pending.next
            pending.tasks[id] = Task {
                await close()
                _ = Self.pending.withLock { $0.tasks.removeValue(forKey: id) }
            }
        }
    }

    /// The closes still running.
    package static var count: Int { pending.withLock { $0.tasks.count } }

    /// Waits until every close started so far has ended.
    package static func awaitAll() async {
        for task in pending.withLock({ Array($0.tasks.values) }) { await task.value }
    }
}
#endif
