#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Files that travel with the container (issue 49): writes and removes inside a store transaction, so
/// that a record and the file it names are committed together, and reads that serve the manifest's
/// bytes or say they are not here yet.
///
/// ```swift
/// try container.store.write(author: "app") { tx in
///     try trainers.put(trainer, forKey: trainer.id, in: tx)
///     try container.files.write(png, to: "TrainerImages/\(trainer.id).png", in: tx)
/// }
/// let image = try container.files.readVerified("TrainerImages/\(id).png")  // or .notYetDownloaded
/// ```
///
/// A path under a replicated prefix (declared with `Replication.files(prefix:fetch:in:)`) gets its
/// manifest row (``FileManifestEntry``: SHA-256, size, media type, time) in the transaction; any other
/// path records nothing. Either way the bytes are written to `Blobs/<sha256>` first, and the path gets
/// them (a hard link renamed over it) once the transaction has committed
/// (``WriteTransaction/afterCommit(_:)``): a transaction that aborts leaves the path, the manifest and
/// the bytes it named as they were.
extension SharedFiles {
    /// Writes `data` at `path` as part of `transaction`: see the extension's description.
    ///
    /// - Returns: The manifest entry recorded, or `nil` when `path` is under no replicated prefix.
    /// - Throws: ``KVStoreError/invalidPath(_:reason:)`` for a path ``validate(_:)`` refuses (before
    ///   anything is written); ``SharedFilesError/notAContainer(directory:)`` unless this is a
    ///   container's `Files/`; ``KVStoreError/io(operation:path:errno:)`` when `Blobs/` cannot be
    ///   written; what the store throws (`observerRequired` when the manifest replicates and this
    ///   process has not attached SyncKit's history).
    @discardableResult
    public func write(_ data: Data, to path: String, in transaction: WriteTransaction, modified: Date = Date()) throws -> FileManifestEntry? {
        try data.withUnsafeBytes { try record($0, to: path, in: transaction, modified: modified) }
    }

    /// Writes `bytes` at `path` as part of `transaction`; see ``write(_:to:in:modified:)-(Data,_,_,_)``.
    @discardableResult
    public func write(_ bytes: [UInt8], to path: String, in transaction: WriteTransaction, modified: Date = Date()) throws -> FileManifestEntry? {
        try bytes.withUnsafeBytes { try record($0, to: path, in: transaction, modified: modified) }
    }

    /// Removes the file at `path` as part of `transaction`: under a replicated prefix its manifest row
    /// is deleted (the tombstone other devices receive) in the transaction, and the file goes once it
    /// has committed.
    ///
    /// - Throws: ``KVStoreError/fileNotFound(path:)`` when there is neither a file nor a manifest row
    ///   at `path`; otherwise as ``write(_:to:in:modified:)-(Data,_,_,_)``.
    public func remove(_ path: String, in transaction: WriteTransaction) throws {
        try Self.validate(path)
        let container = try requireContainer(for: transaction)
        let replicated = try FileManifest.prefix(covering: path, in: transaction) != nil
        var recorded = false
        if replicated {
            recorded = try FileManifest.delete(at: path, in: transaction)
            if try FileManifest.localState(at: path, in: transaction) != nil {
                try FileManifest.setLocalState(nil, at: path, in: transaction)
            }
        }
        if !recorded && !exists(path) { throw KVStoreError.fileNotFound(path: path) }
        transaction.afterCommit { [self] in
            // Best effort: the commit stands either way, and a read follows the manifest.
            try? withPublishLock(in: container) {
                if replicated, try container.store.read({ try FileManifest.entry(at: path, in: $0) }) != nil { return }
                try? remove(path)
            }
        }
    }

    /// The bytes at `path`, checked against its manifest row: exactly the bytes the row names, from the
    /// path or, when the path holds other bytes (a co-tenant's link, a file changed in place, a
    /// publish a crash cut short), from `Blobs/`. A path with no manifest row reads as
    /// ``read(_:maxSize:)`` does.
    ///
    /// - Throws: ``SharedFilesError/notYetDownloaded(path:sha256:)`` when the bytes the row names are
    ///   not on this device; ``KVStoreError/valueTooLarge(what:size:limit:hint:)`` when the row's size
    ///   is over `maxSize`; otherwise as ``read(_:maxSize:)``.
    public func readVerified(_ path: String, maxSize: Int = 64 << 20) throws -> Data {
        try Self.validate(path)
        guard let container else { return try read(path, maxSize: maxSize) }
        guard let entry = try container.store.read({ try FileManifest.entry(at: path, in: $0) }) else {
            return try read(path, maxSize: maxSize)
        }
        if entry.size > Int64(max(0, maxSize)) {
            throw KVStoreError.valueTooLarge(what: "file '\(path)'", size: Int(clamping: entry.size), limit: maxSize,
                                             hint: "pass a larger maxSize to read it")
        }
        if let data = try? read(path, maxSize: maxSize), Self.matches(data, entry) {
            noteRead(path, entry: entry, in: container)
            return data
        }
        let name = ContainerFiles.name(entry.sha256)
        guard let data = verifiedBlob(name, entry: entry, in: container, maxSize: maxSize) else {
            throw SharedFilesError.notYetDownloaded(path: path, sha256: name)
        }
        noteRead(path, entry: entry, in: container)
        // The path did not hold them: give it the copy, when this process may write.
        if !container.store.isReadOnly { try? publishCommitted(path, blob: name, in: container, checkingManifest: true) }
        return data
    }

    /// The manifest row of `path`, if it has one.
    public func manifestEntry(for path: String) throws -> FileManifestEntry? {
        try Self.validate(path)
        let container = try requireContainer()
        return try container.store.read { try FileManifest.entry(at: path, in: $0) }
    }

    /// The replicated prefixes declared in the container, in order.
    public func replicatedPrefixes() throws -> [ReplicatedFilePrefix] {
        let container = try requireContainer()
        return try container.store.read { try FileManifest.prefixes(in: $0) }
    }

    // MARK: - Internals

    /// The transactional write: bytes to `Blobs/`, the manifest row and local state in `transaction`,
    /// the path after the commit.
    private func record(_ bytes: UnsafeRawBufferPointer, to path: String, in transaction: WriteTransaction, modified: Date) throws -> FileManifestEntry? {
        try Self.validate(path)
        let container = try requireContainer(for: transaction)
        let digest = SHA256Hasher.hash(bytes)
        let name = ContainerFiles.name(digest)
        // Before anything is recorded: a manifest row never names bytes this device does not hold.
        try stage(bytes, as: name, in: container)
        let now = FileManifest.milliseconds(modified)
        let entry = FileManifestEntry(sha256: Data(digest), size: Int64(bytes.count), type: MediaType.of(path), modified: now)
        let replicated = try FileManifest.prefix(covering: path, in: transaction) != nil
        if replicated {
            try FileManifest.put(entry, at: path, in: transaction)
            try FileManifest.setLocalState(
                LocalFileState(state: .waitingToUpload, sha256: digest, size: entry.size, lastAccess: FileManifest.milliseconds(Date())),
                at: path, in: transaction)
        }
        transaction.afterCommit { [self] in
            // Best effort: should it fail (or the process die first), the manifest's bytes are in
            // `Blobs/`, where a verified read finds them and gives the path its copy again.
            try? publishCommitted(path, blob: name, in: container, checkingManifest: replicated)
        }
        return replicated ? entry : nil
    }

    /// Gives `path` the bytes of `Blobs/<blob>` under the publish lock; with `checkingManifest`, only
    /// while the manifest still names them (a later commit of another process publishes its own).
    func publishCommitted(_ path: String, blob: String, in container: ContainerFiles, checkingManifest: Bool) throws {
        try withPublishLock(in: container) {
            if checkingManifest {
                let current = try container.store.read { try FileManifest.entry(at: path, in: $0) }
                guard let current, ContainerFiles.name(current.sha256) == blob else { return }
            }
            try link(blob: blob, to: path, in: container)
        }
    }

    /// For the plain ``write(_:to:)-(Data,_)``: under a replicated prefix of a container, the write
    /// becomes a transaction of its own that records the manifest. `false` when it is not one (no
    /// container, no prefix covers `path`, or the caller is inside a transaction of the store), and
    /// the plain write goes on.
    func recordingManifest(_ bytes: UnsafeRawBufferPointer, to path: String) throws -> Bool {
        guard let container, !container.store.isReadOnly,
              TransactionScope.innermostKind(of: container.store.environment) == nil else { return false }
        try Self.validate(path)
        guard try container.store.read({ try FileManifest.prefix(covering: path, in: $0) }) != nil else { return false }
        try container.store.write(author: "files") { tx in _ = try record(bytes, to: path, in: tx, modified: Date()) }
        return true
    }
}
