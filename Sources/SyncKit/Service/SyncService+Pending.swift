import KVStore

/// The one count of a container's local changes that are not on the server yet: what
/// ``SyncStatus/pending`` says to every process, and what SyncKitPostgres's replication status and
/// `kvtool sync status` show. Counted in one place, so that no two outputs give two numbers for it.
extension SyncService {
    /// Where a replicator declares what replicates (SyncKitPostgres's `Replication.enable`): one entry
    /// per collection or defaults suite, keyed ``KVStore/Mutation/Target/syncDeclarationKey``.
    package static let declarationsName = "_sync.targets"
    /// The keys a replicator queued to send again although no pending history entry says so (after a
    /// conflict held them back, or a resync): one entry each.
    package static let waitingKeysName = "_sync.dirty"

    /// What a replicator declared, read from the store when the service is made: `nil` when nothing
    /// was ever declared (a container whose owner is not SyncKitPostgres's replicator, or none yet).
    struct Declarations: Sendable {
        let targets: KVCollection<ByteKey, [UInt8]>
        let waitingKeys: KVCollection<ByteKey, [UInt8]>?

        init?(store: Store) throws {
            guard try store.catalogEntry(forCollection: SyncService.declarationsName) != nil else { return nil }
            targets = try store.untypedCollection(named: SyncService.declarationsName).collection
            waitingKeys = try store.catalogEntry(forCollection: SyncService.waitingKeysName) != nil
                ? try store.untypedCollection(named: SyncService.waitingKeysName).collection : nil
        }

        /// The declared targets, SyncKit's own bookkeeping (`_…`, such as the replicated catalog) left out.
        func replicated(in transaction: ReadTransaction) throws -> Set<Mutation.Target> {
            var found = Set<Mutation.Target>()
            try targets.forEach(in: transaction) { key, _ in
                let text = key.bytes.withUnsafeBytes { try? String.decodeKey($0) }
                if let text, let target = Mutation.Target(syncDeclarationKey: text), !target.name.hasPrefix("_") {
                    found.insert(target)
                }
                return true
            }
            return found
        }
    }

    /// Local changes not on the server yet, counted up to `limit`: the history entries after the
    /// replicator's push consumer (``consumerName``; after ``SyncStatus/acknowledged`` where no
    /// replicator registered it), not written by the replicator itself (``replicationAuthor``), of the
    /// targets it declared (of every target where it declared none), plus the keys it queued to send
    /// again. Changes to a collection that keeps history but does not replicate are not counted: they
    /// never go to the server.
    func pendingChanges(acknowledged: ChangeToken, limit: Int, in transaction: ReadTransaction) throws -> Int {
        let pushed = try history.consumerRecords.get(Self.consumerName, in: transaction)?.token
        let after = max(acknowledged, pushed ?? .zero)
        let targets = try declarations?.replicated(in: transaction)
        var count = try history.countEntries(after: after, notBy: Self.replicationAuthor, of: targets, limit: limit, in: transaction)
        if count < limit, let waiting = declarations?.waitingKeys {
            count = min(limit, count + (try waiting.count(in: transaction)))
        }
        return count
    }
}

extension Mutation.Target {
    /// The key of a replicator's declaration of this target (``SyncService/declarationsName``):
    /// `c.NAME` for a collection, `d.NAME` for a defaults suite.
    package var syncDeclarationKey: String {
        switch self {
        case .collection(let name): "c." + name
        case .defaults(let name): "d." + name
        }
    }

    /// The target a declaration's key names; `nil` for a key no replicator writes.
    package init?(syncDeclarationKey key: String) {
        if key.hasPrefix("c.") {
            self = .collection(String(key.dropFirst(2)))
        } else if key.hasPrefix("d.") {
            self = .defaults(String(key.dropFirst(2)))
        } else {
            return nil
        }
    }
}
