#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The store's side of files that travel with the container (issue 49): three internal collections,
/// read and written inside the caller's transactions.
///
/// - `_files` (``FileManifestEntry/collectionName``): the manifest, key the path relative to `Files/`,
///   value a ``FileManifestEntry``. It replicates (history records its writes once it is declared); a
///   removed file is its key's delete.
/// - `_files.prefixes`: the replicated prefixes (``ReplicatedFilePrefix``), key the prefix. Written by
///   `Replication.files(prefix:fetch:in:)`, read by every process, the lean ones included.
/// - `_files.local`: this device's ``LocalFileState`` per path; never replicated.
/// - `_files.wanted`: the mailbox of files a process asked for (``SharedFiles/requestDownload(_:now:)``),
///   key the path, value when it was asked (milliseconds since 1970); the sync owner fetches each and
///   clears it. Never replicated.
///
/// The collections are created (with their catalog entries) only when a prefix is declared, so a
/// container that replicates no file has none of them, and a write of a file there records nothing.
package enum FileManifest {
    package static let manifestName = FileManifestEntry.collectionName
    package static let prefixesName = "_files.prefixes"
    package static let localName = "_files.local"
    package static let wantedName = "_files.wanted"
    package static var manifestTarget: Mutation.Target { .collection(manifestName) }

    /// Creates the three collections if they are not there. Call it outside every transaction.
    package static func createCollections(in store: Store) throws {
        _ = try store.collection(manifestName, key: String.self, value: FileManifestEntry.self)
        _ = try store.collection(prefixesName, key: String.self, value: ReplicatedFilePrefix.self)
        _ = try store.collection(localName, key: String.self, value: LocalFileState.self)
        _ = try store.collection(wantedName, key: String.self, value: Int64.self)
    }

    /// Records `prefix` (normalised to a directory with its trailing `/`) with its fetch mode, creating
    /// the collections first. Declaring a prefix again with another mode changes the mode.
    ///
    /// - Throws: ``KVStoreError/invalidPath(_:reason:)`` for a prefix ``SharedFiles/validate(_:)``
    ///   refuses (empty, absolute, `..`…); ``KVStoreError/invalidName(_:reason:)`` for a lazy budget
    ///   that is not positive.
    @discardableResult
    package static func declare(prefix: String, fetch: FileFetch, in store: Store) throws -> ReplicatedFilePrefix {
        let trimmed = prefix.hasSuffix("/") ? String(prefix.dropLast()) : prefix
        try SharedFiles.validate(trimmed)
        if case .lazy(let budget) = fetch, budget <= 0 {
            throw KVStoreError.invalidName(prefix, reason: "a lazy prefix's budget is a positive number of bytes, not \(budget)")
        }
        let declared = ReplicatedFilePrefix(prefix: trimmed + "/", fetch: fetch)
        try createCollections(in: store)
        let prefixes = try store.collection(prefixesName, key: String.self, value: ReplicatedFilePrefix.self)
        try store.write(author: "kvsync") { tx in
            if try prefixes.get(declared.prefix, in: tx) != declared { try prefixes.put(declared, forKey: declared.prefix, in: tx) }
        }
        return declared
    }

    // MARK: - Inside a transaction

    /// The named database for use in `tx`, `nil` when it does not exist (nothing declared).
    static func database(_ name: String, in tx: ReadTransaction) throws -> RawDatabase? {
        try tx.checkActive()
        let full = Catalog.collectionDatabase(name)
        return try tx.store.environment.database(named: full, in: tx.pointer).map { RawDatabase(name: full, handle: $0) }
    }

    /// Every declared prefix, in key order.
    package static func prefixes(in tx: ReadTransaction) throws -> [ReplicatedFilePrefix] {
        guard let database = try database(prefixesName, in: tx) else { return [] }
        var found: [ReplicatedFilePrefix] = []
        try tx.rawScan(database) { _, value in
            // A row a co-tenant garbled declares nothing rather than stopping every write of a file.
            if let prefix = try? CBORDecoder().decode(ReplicatedFilePrefix.self, from: value) { found.append(prefix) }
            return true
        }
        return found
    }

    /// The longest declared prefix that covers `path`, if any.
    package static func prefix(covering path: String, in tx: ReadTransaction) throws -> ReplicatedFilePrefix? {
        try prefixes(in: tx).filter { $0.covers(path) }.max { $0.prefix.utf8.count < $1.prefix.utf8.count }
    }

    /// The manifest's row for `path`, if any.
    package static func entry(at path: String, in tx: ReadTransaction) throws -> FileManifestEntry? {
        guard let database = try database(manifestName, in: tx), let bytes = try tx.rawGet(database, path.encodedKey) else { return nil }
        return try decode(FileManifestEntry.self, bytes, collection: manifestName, path: path)
    }

    /// Every row of the manifest, in path order.
    package static func entries(in tx: ReadTransaction) throws -> [(path: String, entry: FileManifestEntry)] {
        guard let database = try database(manifestName, in: tx) else { return [] }
        var rows: [(String, FileManifestEntry)] = []
        try tx.rawScan(database) { key, value in
            let path = String(decoding: key, as: UTF8.self)
            rows.append((path, try decode(FileManifestEntry.self, Array(value), collection: manifestName, path: path)))
            return true
        }
        return rows
    }

    /// This device's state of `path`, if any.
    package static func localState(at path: String, in tx: ReadTransaction) throws -> LocalFileState? {
        guard let database = try database(localName, in: tx), let bytes = try tx.rawGet(database, path.encodedKey) else { return nil }
        return try decode(LocalFileState.self, bytes, collection: localName, path: path)
    }

    /// Every local state row, in path order.
    package static func localStates(in tx: ReadTransaction) throws -> [String: LocalFileState] {
        guard let database = try database(localName, in: tx) else { return [:] }
        var rows: [String: LocalFileState] = [:]
        try tx.rawScan(database) { key, value in
            let path = String(decoding: key, as: UTF8.self)
            rows[path] = try decode(LocalFileState.self, Array(value), collection: localName, path: path)
            return true
        }
        return rows
    }

    /// Writes the manifest's row for `path`, recorded as a change of `_files` (history sends it).
    static func put(_ entry: FileManifestEntry, at path: String, in tx: WriteTransaction) throws {
        guard let database = try database(manifestName, in: tx) else { throw KVStoreError.collectionNotFound(manifestName) }
        try tx.rawPut(database, path.encodedKey, try CBORCodec<FileManifestEntry>().encode(entry), recordingAs: manifestTarget)
    }

    /// Deletes the manifest's row for `path` (its tombstone, once replicated); whether there was one.
    @discardableResult
    static func delete(at path: String, in tx: WriteTransaction) throws -> Bool {
        guard let database = try database(manifestName, in: tx) else { return false }
        return try tx.rawDelete(database, path.encodedKey, recordingAs: manifestTarget)
    }

    /// Sets (or, with `nil`, removes) this device's state of `path`. Not a change of anything that
    /// replicates: nothing is recorded.
    package static func setLocalState(_ state: LocalFileState?, at path: String, in tx: WriteTransaction) throws {
        guard let database = try database(localName, in: tx) else { throw KVStoreError.collectionNotFound(localName) }
        if let state {
            try tx.rawPut(database, path.encodedKey, try CBORCodec<LocalFileState>().encode(state))
        } else {
            try tx.rawDelete(database, path.encodedKey)
        }
    }

    /// Every file a process asked for and no sync owner has fetched yet: path → when it was asked
    /// (milliseconds since 1970). A row a co-tenant garbled counts as asked at 0.
    package static func wishes(in tx: ReadTransaction) throws -> [String: Int64] {
        guard let database = try database(wantedName, in: tx) else { return [:] }
        var rows: [String: Int64] = [:]
        try tx.rawScan(database) { key, value in
            rows[String(decoding: key, as: UTF8.self)] = (try? CBORDecoder().decode(Int64.self, from: value)) ?? 0
            return true
        }
        return rows
    }

    /// Records (or, with `nil`, clears) the wish for `path`. Local, like ``setLocalState(_:at:in:)``:
    /// nothing is recorded in history.
    package static func setWish(_ askedAt: Int64?, at path: String, in tx: WriteTransaction) throws {
        guard let database = try database(wantedName, in: tx) else {
            if askedAt == nil { return }
            throw KVStoreError.collectionNotFound(wantedName)
        }
        if let askedAt {
            try tx.rawPut(database, path.encodedKey, try CBORCodec<Int64>().encode(askedAt))
        } else {
            try tx.rawDelete(database, path.encodedKey)
        }
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ bytes: [UInt8], collection: String, path: String) throws -> T {
        do {
            return try bytes.withUnsafeBytes { try CBORDecoder().decode(T.self, from: $0) }
        } catch {
            throw KVStoreError.corruptValue(collection: collection, key: path, reason: "\(error)")
        }
    }

    /// Milliseconds since 1970.
    static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
    }
}
