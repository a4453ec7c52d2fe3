#if PostgreSQL
import Foundation
import KVStore
import SyncKit

/// The catalog entries of replicated collections, replicated themselves, so that a device that has
/// never opened a collection can join it from the command line (`kvtool sync enable COLLECTION
/// --server URL`): the entry says how its keys and values are encoded.
///
/// They travel as an ordinary replicated collection of SyncKit's own, ``Replication/catalogCollection``
/// (key: the collection's name; value: its ``CatalogEntry``), declared only by a container that asks
/// for it (``Replication/publishCatalogEntry(ofCollection:in:now:)``, ``Replication/enableCatalog(in:now:)``).
/// A replicator syncs it whenever it is declared; a device that does not declare it skips its changes,
/// as for any collection it does not replicate.
extension Replication {
    /// SyncKit's replicated collection of catalog entries.
    public static let catalogCollection = "_sync.catalog"

    static var catalogTarget: Mutation.Target { .collection(catalogCollection) }

    /// Declares ``catalogCollection`` replicated (once): the next sync pulls the entries other
    /// devices published.
    public static func enableCatalog(in container: SharedContainer, now: Date = Date()) throws {
        _ = try catalog(of: container)
        // Attached in this process either way: the collection's writes are recorded in history.
        let history = try History.attach(to: container)
        guard try !declaredTargets(in: container.store).contains(catalogTarget) else { return }
        try declare(catalogTarget, in: container, history: history, now: now)
    }

    /// Records the catalog entry of collection `name` in ``catalogCollection`` (declared if it is
    /// not), to be sent at the next sync. Recording the same entry again changes nothing.
    ///
    /// - Throws: `KVStoreError.collectionNotFound` if this store has no collection `name`.
    public static func publishCatalogEntry(ofCollection name: String, in container: SharedContainer, now: Date = Date()) throws {
        guard let entry = try container.store.catalogEntry(forCollection: name) else { throw KVStoreError.collectionNotFound(name) }
        try enableCatalog(in: container, now: now)
        let catalog = try catalog(of: container)
        try container.store.write(author: "kvsync") { tx in
            if try catalog.get(name, in: tx) != entry { try catalog.put(entry, forKey: name, in: tx) }
        }
    }

    /// The catalog entry of collection `name` that a device published and this container pulled, if any.
    public static func publishedCatalogEntry(ofCollection name: String, in container: SharedContainer) throws -> CatalogEntry? {
        guard try container.store.catalogEntry(forCollection: catalogCollection) != nil else { return nil }
        return try catalog(of: container).get(name)
    }

    /// Creates collection `entry.name` in this store as another device's catalog has it (its key and
    /// value encodings and schema version), empty. Changes nothing if the store has it already with
    /// the same encodings.
    ///
    /// - Throws: `KVStoreError.catalogMismatch` if this store has a collection of that name with
    ///   other encodings; ``ReplicationError/unsupportedTarget(_:reason:)`` for a collection with
    ///   indexes or derived collections (only its app can create and maintain those), or a name of
    ///   SyncKit's own.
    public static func createCollection(from entry: CatalogEntry, in container: SharedContainer) throws {
        let target = Mutation.Target.collection(entry.name)
        guard entry.kind == .collection, !entry.name.hasPrefix("_") else {
            throw ReplicationError.unsupportedTarget(target, reason: "names starting with '_' are SyncKit's own bookkeeping")
        }
        guard !entry.hasMaintainedData else {
            throw ReplicationError.unsupportedTarget(target, reason: "it has indexes or derived collections, which only its app creates and maintains: open it with the app on this device first")
        }
        let store = container.store
        let local = CatalogEntry(name: entry.name, kind: .collection, keyEncoding: entry.keyEncoding, valueEncoding: entry.valueEncoding,
                                 schemaVersion: entry.schemaVersion, indexes: [], derived: [], derivedFrom: nil,
                                 database: Catalog.collectionDatabase(entry.name))
        // Catalog names' rule: 1 to 200 bytes of ASCII letters, digits, '.', '_' and '-'.
        guard !entry.name.isEmpty, entry.name.utf8.count <= 200,
              entry.name.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "._-".unicodeScalars.contains($0)) }) else {
            throw KVStoreError.invalidName(entry.name, reason: "collection names may contain only ASCII letters, digits, '.', '_' and '-'")
        }
        guard let catalogDatabase = try store.rawDatabase(named: Catalog.databaseName, create: true),
              try store.rawDatabase(named: local.database, create: true) != nil else {
            throw KVStoreError.io(operation: "create collection \(entry.name)", path: store.directory, errno: 0)
        }
        let key = CatalogEntry.catalogKey(name: local.name, kind: .collection)
        let added = try store.write(author: "kvsync") { tx -> Bool in
            if try tx.rawGet(catalogDatabase, key) != nil { return false }
            try tx.rawPut(catalogDatabase, key, try CBOREncoder().encode(local))
            return true
        }
        if !added, let existing = try store.catalogEntry(forCollection: entry.name) { try checkAgrees(existing, entry) }
    }

    /// Throws `KVStoreError.catalogMismatch` unless the two entries encode keys and values alike.
    public static func checkAgrees(_ local: CatalogEntry, _ published: CatalogEntry) throws {
        guard local.keyEncoding == published.keyEncoding, local.valueEncoding == published.valueEncoding else {
            throw KVStoreError.catalogMismatch(
                collection: local.name,
                detail: "this container has keys \(local.keyEncoding) and values \(local.valueEncoding), and the collection other devices replicate has keys \(published.keyEncoding) and values \(published.valueEncoding): they cannot replicate together")
        }
    }

    static func catalog(of container: SharedContainer) throws -> KVCollection<String, CatalogEntry> {
        try container.store.collection(catalogCollection, key: String.self, value: CatalogEntry.self)
    }
}
#endif
