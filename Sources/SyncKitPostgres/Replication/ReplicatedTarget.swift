#if PostgreSQL
import Codecs
import KVStore
import SyncKit

/// A collection or defaults suite that replicates, with the typed operations a replicator needs:
/// applying a change goes through the collection itself, so its indexes and derived collections are
/// recomputed in the same transaction.
public struct ReplicatedTarget: Sendable {
    enum Policy: Sendable {
        case lastWriterWins
        case rejectAndReport
        case merge(@Sendable (_ local: [UInt8], _ remote: [UInt8], _ key: [UInt8]) throws -> [UInt8])
    }

    public let target: Mutation.Target
    let policy: Policy
    /// The stored value bytes at a key, or `nil`.
    let read: @Sendable (_ key: [UInt8], _ transaction: ReadTransaction) throws -> [UInt8]?
    /// Stores (or, with `nil`, deletes) the value at a key; throws for bytes that are not a valid key
    /// or value of the target.
    let write: @Sendable (_ key: [UInt8], _ value: [UInt8]?, _ transaction: WriteTransaction) throws -> Void
    /// Every stored key.
    let keys: @Sendable (_ transaction: ReadTransaction) throws -> [[UInt8]]
    /// The stored keys after a key (from the first: `nil`) through another (to the last: `nil`), in
    /// key order (byte order, the server's within a target), `limit` at most: what a resync compares
    /// with a page of the server's state.
    let keysInRange: @Sendable (_ after: [UInt8]?, _ through: [UInt8]?, _ limit: Int, _ transaction: ReadTransaction) throws -> [[UInt8]]
    /// Decodes a key and value as `write` would, writing nothing: throws ``UnreadableChange`` for
    /// bytes this device cannot read.
    let check: @Sendable (_ key: [UInt8], _ value: [UInt8]?) throws -> Void

    /// A typed collection. Its values replicate as stored (its codec's bytes), so every device must
    /// open it with the same value type and encoding.
    public static func collection<Key: OrderedKey, Value>(
        _ collection: KVCollection<Key, Value>, conflicts: ConflictPolicy<Value> = .lastWriterWins
    ) -> ReplicatedTarget {
        let policy: Policy = switch conflicts.kind {
        case .lastWriterWins: .lastWriterWins
        case .rejectAndReport: .rejectAndReport
        case .merge(let merge):
            .merge { local, remote, key in
                // Nothing is written here: whatever fails is the remote value's problem (or the
                // merge's), and the change is quarantined.
                try UnreadableChange.reading {
                    let merged = try merge(try collection.decodeStoredValue(local, key: key),
                                           try collection.decodeStoredValue(remote, key: key))
                    // What this app's type does not know survives the merge, taken first from the
                    // side whose bytes sort last: both devices pick the same.
                    let (first, second) = local.lexicographicallyPrecedes(remote) ? (remote, local) : (local, remote)
                    let bytes = try collection.encodeValueForStorage(merged)
                    return collection.keepingUnknownFields(of: second, in: collection.keepingUnknownFields(of: first, in: bytes))
                }
            }
        }
        return ReplicatedTarget(
            target: .collection(collection.name), policy: policy,
            read: { key, transaction in
                // Checked (a key of this collection, in its one encoding), then read by those bytes.
                _ = try Self.decodeKey(key, as: Key.self, collection.name)
                return try collection.withValueBytes(forStoredKey: key, in: transaction) { Array($0) }
            },
            write: { key, value, transaction in
                let typedKey = try Self.decodeKey(key, as: Key.self, collection.name)
                if let value {
                    let decoded = try UnreadableChange.reading { try collection.decodeStoredValue(value, key: key) }
                    // The fields this app does not know stay, as the other device wrote them.
                    try collection.put(decoded, forKey: typedKey, keepingUnknownFieldsOf: value, in: transaction)
                } else {
                    try collection.delete(typedKey, in: transaction)
                }
            },
            keys: { transaction in try collection.keys(in: transaction).map(\.encodedKey) },
            keysInRange: { after, through, limit, transaction in
                try collection.encodedKeys(after: after, through: through, limit: limit, in: transaction)
            },
            check: { key, value in
                _ = try Self.decodeKey(key, as: Key.self, collection.name)
                if let value { _ = try UnreadableChange.reading { try collection.decodeStoredValue(value, key: key) } }
            })
    }

    /// This target, with `check` run on every value that comes in from the server (pulled, the
    /// server's value in a conflict, a merge's result) before anything of it is written: a value it
    /// refuses is quarantined with what `check` throws as the reason, and the key's local writes wait,
    /// as for a value the type cannot decode. For what an app checks beyond decoding (a member's
    /// range), and for a collection replicated by name whose type an app knows: `kvtool` gives each
    /// collection an app registered the same test that its typed `put` and `check` apply, so that a
    /// value a sync accepts is one `kvtool check` accepts.
    public func checkingValues(_ check: @escaping @Sendable (_ value: [UInt8]) throws -> Void) -> ReplicatedTarget {
        checkingEntries { _, value in if let value { try check(value) } }
    }

    /// This target with `check` run on every key and value (`nil` for a delete) that comes in, before
    /// anything of it is written; what it throws is the reason of the quarantine.
    func checkingEntries(_ check: @escaping @Sendable (_ key: [UInt8], _ value: [UInt8]?) throws -> Void) -> ReplicatedTarget {
        let (write, checkFirst) = (self.write, self.check)
        return ReplicatedTarget(
            target: target, policy: policy, read: read,
            write: { key, value, transaction in
                try UnreadableChange.reading { try check(key, value) }
                try write(key, value, transaction)
            },
            keys: keys, keysInRange: keysInRange,
            check: { key, value in
                try checkFirst(key, value)
                try UnreadableChange.reading { try check(key, value) }
            })
    }

    /// A ``SharedDefaults`` suite. Values are CBOR, as the suite stores them; a suite offers
    /// last-writer-wins or reject-and-report.
    public static func defaults(_ defaults: SharedDefaults, rejectConflicts: Bool = false) -> ReplicatedTarget {
        ReplicatedTarget(
            target: .defaults(defaults.suiteName), policy: rejectConflicts ? .rejectAndReport : .lastWriterWins,
            read: { key, transaction in
                try defaults.storedValue(forKey: try Self.defaultsKey(key, defaults.suiteName), in: transaction)?.encoded()
            },
            write: { key, value, transaction in
                let name = try Self.defaultsKey(key, defaults.suiteName)
                if let value {
                    try defaults.set(cborValue: try Self.defaultsValue(value, name, defaults.suiteName), forKey: name, in: transaction)
                } else {
                    try defaults.removeObject(forKey: name, in: transaction)
                }
            },
            keys: { transaction in try defaults.storedKeys(in: transaction).map { Array($0.utf8) } },
            keysInRange: { after, through, limit, transaction in
                try defaults.storedKeys(after: after, through: through, limit: limit, in: transaction)
            },
            check: { key, value in
                let name = try Self.defaultsKey(key, defaults.suiteName)
                if let value { _ = try Self.defaultsValue(value, name, defaults.suiteName) }
            })
    }

    static func defaultsValue(_ value: [UInt8], _ name: String, _ suite: String) throws -> CBORValue {
        do { return try CBORValue.decode(value) } catch {
            throw UnreadableChange(KVStoreError.corruptValue(collection: "defaults \(suite)", key: name,
                                                             reason: "not CBOR: \(error)", underlying: .init(error)))
        }
    }

    /// A collection known only by name, as `kvtool` sees it: values replicate as stored bytes. It must
    /// have no index or derived collection, which only its typed definition can maintain. What comes in
    /// is checked as its catalog entry describes its entries, as `kvtool check` checks them (a key in
    /// its key encoding, a value of its encoding and within the size limit): anything else is
    /// quarantined, not stored. Give it ``checkingValues(_:)`` for what its Swift type needs besides.
    ///
    /// - Throws: ``ReplicationError/unsupportedTarget(_:reason:)`` if it has any.
    public static func untypedCollection(named name: String, in store: Store, rejectConflicts: Bool = false) throws -> ReplicatedTarget {
        let (entry, untyped) = try store.untypedCollection(named: name)
        guard !entry.hasMaintainedData else {
            throw ReplicationError.unsupportedTarget(.collection(name), reason:
                "it has indexes or derived collections, which only its typed definition can keep in step; replicate it from the app with ReplicatedTarget.collection(_:)")
        }
        return Self.collection(untyped, conflicts: rejectConflicts ? .rejectAndReport : .lastWriterWins).checkingEntries { key, value in
            // A delete needs only its key to be one of the collection's.
            if let problem = value.map({ entry.entryProblem(key: key, value: $0) }) ?? entry.keyProblem(key) { throw problem }
        }
    }

    static func decodeKey<Key: OrderedKey>(_ bytes: [UInt8], as type: Key.Type, _ collection: String) throws -> Key {
        let key: Key
        do { key = try Key.decodeKey(bytes) } catch {
            throw UnreadableChange(KVStoreError.invalidKey(collection: collection, reason: "not a key of this collection: \(error)"))
        }
        // Only the canonical encoding: two spellings of one key would be two rows on the server.
        guard key.encodedKey == bytes else {
            throw UnreadableChange(KVStoreError.invalidKey(collection: collection, reason: "not the canonical encoding of its key"))
        }
        return key
    }

    static func defaultsKey(_ bytes: [UInt8], _ suite: String) throws -> String {
        guard let key = bytes.withUnsafeBytes({ CBORReader.string($0) }) else {
            throw UnreadableChange(KVStoreError.invalidKey(collection: "defaults \(suite)", reason: "the key is not UTF-8"))
        }
        return key
    }
}

#endif
