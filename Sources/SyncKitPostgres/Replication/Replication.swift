#if PostgreSQL
import Foundation
import KVStore
import SyncKit

/// Declaring what replicates, and reading where replication stands: store-only operations that need
/// no server.
public enum Replication {
    /// The author of every change a replicator applies: never sent back (no echo).
    public static let author = SyncService.replicationAuthor
    /// The history consumer whose token marks what has reached the server.
    public static let consumerName = SyncService.consumerName

    static let stateName = "_sync.state"
    static let targetsName = SyncService.declarationsName
    static let dirtyName = SyncService.waitingKeysName
    static let quarantineName = "_sync.quarantine"
    static let rejectedName = "_sync.rejected"
    static let stateKey = "replica"
    static func versionsName(_ target: Mutation.Target) -> String { "_sync.v." + target.declarationKey }

    /// Declares `target` replicated, in every process of the container: enables its history (if it
    /// is not on), registers the replicator's history consumer, and queues every key it already holds
    /// so that the first sync sends it. On a device that already synced, the next sync also fetches
    /// what other devices sent to `target` before. Declaring again changes nothing.
    ///
    /// - Throws: `KVStoreError.collectionNotFound` for a collection the catalog does not have;
    ///   ``ReplicationError/unsupportedTarget(_:reason:)`` for one of SyncKit's own.
    public static func enable(_ target: Mutation.Target, in container: SharedContainer, now: Date = Date()) throws {
        let history = try History.attach(to: container)
        guard !target.name.hasPrefix("_") else {
            throw ReplicationError.unsupportedTarget(target, reason: "names starting with '_' are SyncKit's own bookkeeping")
        }
        try declare(target, in: container, history: history, now: now)
    }

    /// ``enable(_:in:now:)`` without its check of the name: also for SyncKit's own ``catalogCollection``.
    static func declare(_ target: Mutation.Target, in container: SharedContainer, history: History, now: Date) throws {
        let store = container.store
        let database: RawDatabase
        switch target {
        case .collection(let name):
            _ = try store.untypedCollection(named: name)   // throws collectionNotFound
            guard let opened = try store.rawDatabase(named: Catalog.collectionDatabase(name)) else {
                throw KVStoreError.collectionNotFound(name)
            }
            database = opened
        case .defaults(let name):
            _ = try container.defaults(suite: name)          // validates the name, creates the suite
            guard let opened = try store.rawDatabase(named: Catalog.defaultsDatabase(name), create: true) else {
                throw KVStoreError.io(operation: "open defaults suite \(name)", path: store.directory, errno: 0)
            }
            database = opened
        }
        let collections = try Collections(store: store)
        _ = try collections.versions(for: target)
        _ = try history.consumer(named: consumerName)
        try store.write { tx in
            if try collections.targets.get(target.declarationKey, in: tx) != nil { return }
            if try store.observerRequirement(for: target, in: tx) != History.kind {
                try store.requireObserver(kind: History.kind, for: target, in: tx)
            }
            try tx.unrecorded {
                try collections.targets.put(TargetDeclaration(kind: target.kindName, name: target.name, since: now),
                                            forKey: target.declarationKey, in: tx)
                // A device that already synced passed the server's changes to this target without
                // applying them: it reads the group's log again from the start (changes it already
                // has are skipped by their versions), or resyncs if the log was pruned.
                var state = try collections.replicaState(in: tx)
                if state.cursor > 0 {
                    state.cursor = 0
                    state.cursorMark = nil
                    try collections.state.put(state, forKey: stateKey, in: tx)
                }
            }
            // Every key already there becomes a history entry of this transaction: pending, so sent.
            var existing: [([UInt8], [UInt8])] = []
            try tx.rawScan(database) { key, value in
                existing.append((Array(key), Array(value)))
                return true
            }
            for (key, value) in existing { try tx.rawPut(database, key, value, recordingAs: target) }
        }
    }

    /// The replicated collections and suites of `store`, in name order.
    public static func declaredTargets(in store: Store) throws -> [Mutation.Target] {
        guard try store.databaseNames().contains(Catalog.collectionDatabase(targetsName)) else { return [] }
        let targets = try store.collection(targetsName, key: String.self, value: TargetDeclaration.self)
        return try targets.entries().compactMap { Mutation.Target(kindName: $0.value.kind, name: $0.value.name) }
    }

    /// Where replication of `container` stands, from the store alone.
    public static func status(of container: SharedContainer) throws -> ReplicationStatus {
        let store = container.store
        let declared = try declaredTargets(in: store)
        // SyncKit's replicated catalog is not one of the app's targets.
        guard declared.contains(where: { $0 != catalogTarget }) else {
            return ReplicationStatus(device: nil, cursor: 0, targets: [], pendingChanges: 0, pushed: 0, pulled: 0,
                                     conflictsResolved: 0, resyncs: 0)
        }
        let collections = try Collections(store: store)
        // The container's one count of what is not on the server yet (SyncKit's, which every process
        // reads), uncapped here.
        let service = try SyncService(container: container)
        return try store.read { tx in
            let state = try collections.state.get(stateKey, in: tx)
            let pending = try service.status(in: tx, countingUpTo: .max).pending
            let quarantined = try collections.quarantine.count(in: tx)
            let rejected = try collections.rejected.count(in: tx)
            let waiting = try FileManifest.localStates(in: tx).filter { $0.value.state == .waitingToUpload }.sorted { $0.key < $1.key }
                .map { path, state in "Files/\(path)" + (state.problem.map { ": \($0)" } ?? "") }
            return ReplicationStatus(
                device: state?.device, cursor: state?.cursor ?? 0, targets: declared.filter { $0 != catalogTarget }.map(\.description),
                pendingChanges: pending, pushed: state?.pushed ?? 0, pulled: state?.pulled ?? 0,
                conflictsResolved: state?.conflicts ?? 0, resyncs: state?.resyncs ?? 0,
                lastSyncAt: state?.lastSyncAt, lastError: state?.lastError, lastErrorAt: state?.lastErrorAt,
                quarantined: quarantined, rejected: rejected, filesWaiting: waiting.isEmpty ? nil : waiting)
        }
    }

    /// The changes from other devices held in quarantine (``QuarantinedChange``), in sequence order.
    public static func quarantine(of container: SharedContainer) throws -> [QuarantinedChange] {
        guard try !declaredTargets(in: container.store).isEmpty else { return [] }
        return try Collections(store: container.store).quarantine.entries().map(\.value)
    }

    /// This device's writes the server refused with a reason (``RejectedWrite``), oldest first.
    public static func rejected(in container: SharedContainer) throws -> [RejectedWrite] {
        guard try !declaredTargets(in: container.store).isEmpty else { return [] }
        return try Collections(store: container.store).rejected.entries().map(\.value)
    }

    /// The replicator's own collections in a store.
    struct Collections: Sendable {
        let store: Store
        let state: KVCollection<String, ReplicaState>
        let targets: KVCollection<String, TargetDeclaration>
        let dirty: KVCollection<UInt64, DirtyKey>
        /// Key: the change's sequence number as a `UInt64` bit pattern.
        let quarantine: KVCollection<UInt64, QuarantinedChange>
        /// Key: the record's number (``RejectedWrite/id``).
        let rejected: KVCollection<UInt64, RejectedWrite>

        init(store: Store) throws {
            self.store = store
            state = try store.collection(stateName, key: String.self, value: ReplicaState.self)
            targets = try store.collection(targetsName, key: String.self, value: TargetDeclaration.self)
            dirty = try store.collection(dirtyName, key: UInt64.self, value: DirtyKey.self)
            quarantine = try store.collection(quarantineName, key: UInt64.self, value: QuarantinedChange.self)
            rejected = try store.collection(rejectedName, key: UInt64.self, value: RejectedWrite.self)
        }

        func versions(for target: Mutation.Target) throws -> KVCollection<ByteKey, KeyVersion> {
            try store.collection(versionsName(target), key: ByteKey.self, codec: KeyVersion.codec)
        }

        /// The state, made (with a new device id) the first time.
        func replicaState(in tx: WriteTransaction) throws -> ReplicaState {
            if let state = try state.get(stateKey, in: tx) { return state }
            let fresh = ReplicaState(device: UUID().uuidString.lowercased())
            try tx.unrecorded { try state.put(fresh, forKey: stateKey, in: tx) }
            return fresh
        }
    }
}
#endif
