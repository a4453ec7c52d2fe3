#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// The published snapshots of a container: consistent, compacted, immutable copies of its store in
/// `Snapshots/`, each with a generation number, listed in `Snapshots/manifest.json`.
///
/// ```swift
/// // The app (or `kvtool snapshot export`):
/// let snapshots = try Snapshots(container: container)
/// let entry = try snapshots.export(from: container.store)       // generation, txn id, size, sha256
///
/// // A widget, without opening the main store:
/// let published = try Snapshots(groupIdentifier: "group.com.shibu.checklist")
/// let store = try published.openLatest()                        // read-only, MDB_NOLOCK
/// let checklist = try ChecklistStore(store: store)
/// ```
///
/// **Publication.** ``export(from:)`` copies the store in one read transaction (see
/// ``KVStore/Store/copy(intoEmptyFile:at:)``) into `.kvtmp-snapshot-<generation>.mdb-<pid>-<random>`,
/// created with `O_EXCL`; the file is flushed, its SHA-256 computed, and it is linked to
/// `snapshot-<generation>.mdb` (never replacing a file) before the directory is `fsync`ed; then the
/// manifest is replaced the same way. A reader sees a snapshot only once it is complete.
///
/// **Concurrency.** Exporters and pruners in any number of processes serialise on an `flock` of
/// `Snapshots/.snapshots.lock`, so generations increase by one per export and never repeat; readers
/// (``list()``, ``open(generation:)``) take no lock. A crashed exporter leaves at most a temporary
/// file, which the next export or prune removes.
///
/// A small immutable value: share it between threads freely.
public struct Snapshots: Sendable {
    /// The manifest's file name.
    public static let manifestName = "manifest.json"
    /// The lock file exporters and pruners hold.
    public static let lockName = ".snapshots.lock"

    /// The absolute path of the `Snapshots/` directory.
    public let directory: String
    /// The modes of the files and directories created here.
    public let sharing: SharingMode
    let files: SharedFiles

    /// The snapshots of a container (its ``KVStore/SharedContainer/snapshotsDirectory``), creating the
    /// directory if a read-only container lacks it.
    ///
    /// - Throws: ``KVStore/KVStoreError/invalidPath(_:reason:)`` if `Snapshots/` is a symbolic link;
    ///   ``KVStore/KVStoreError/io(operation:path:errno:)`` if it cannot be created or opened.
    public init(container: SharedContainer) throws {
        try self.init(directory: container.snapshotsDirectory, sharing: container.options.sharing, create: true)
    }

    /// The snapshots of the container of `groupIdentifier` under `root` (resolved as
    /// ``KVStore/SharedContainer`` resolves it), without opening the container or its store: what a
    /// widget uses.
    ///
    /// - Throws: ``KVStore/KVStoreError/invalidGroupIdentifier(_:reason:)`` before touching the file
    ///   system; ``KVStore/KVStoreError/io(operation:path:errno:)`` (`ENOENT`) if the container has no
    ///   `Snapshots/` directory.
    public init(groupIdentifier: String, root: String? = nil, sharing: SharingMode = .privateToUser) throws {
        let layout = try ContainerLayout(groupIdentifier: groupIdentifier, root: root, sharing: sharing)
        try self.init(directory: layout.snapshots, sharing: sharing, create: false)
    }

    /// The snapshots in `directory`, which must exist unless `create` is set.
    public init(directory: String, sharing: SharingMode = .privateToUser, create: Bool = false) throws {
        if create { try sharing.makeDirectory(directory) }
        files = try SharedFiles(directory: directory, sharing: sharing)
        self.directory = files.directory
        self.sharing = sharing
    }

    /// The absolute path of a snapshot's file.
    public func path(of entry: SnapshotEntry) -> String { directory + "/" + entry.file }

    // MARK: - Reading

    /// The manifest as it is now: an empty one if nothing was ever exported.
    ///
    /// - Throws: ``SnapshotError/corruptManifest(path:reason:)`` (also when it is larger than
    ///   ``SnapshotManifest/maxSize``), ``SnapshotError/unsupportedManifestVersion(path:version:supported:)``,
    ///   or ``KVStore/KVStoreError`` if it cannot be read.
    public func manifest() throws -> SnapshotManifest {
        let path = directory + "/" + Self.manifestName
        let data: Data
        do {
            data = try files.read(Self.manifestName, maxSize: SnapshotManifest.maxSize)
        } catch KVStoreError.fileNotFound {
            return SnapshotManifest()
        } catch KVStoreError.valueTooLarge(_, let size, let limit, _) {
            throw SnapshotError.corruptManifest(path: path, reason: "it is \(size) bytes, over the \(limit)-byte limit")
        } catch KVStoreError.invalidPath(_, let reason) {
            // A link, FIFO, socket or device planted there: named by its whole path.
            throw KVStoreError.unsafeFile(path: path, reason: reason)
        }
        return try SnapshotManifest.decode(data, path: path)
    }

    /// The published snapshots, oldest first.
    ///
    /// ```swift
    /// let generations = try snapshots.list().map(\.generation)   // [5, 6, 7]
    /// ```
    ///
    /// - Throws: As ``manifest()``.
    public func list() throws -> [SnapshotEntry] {
        try manifest().snapshots
    }

    /// The newest snapshot, or `nil` if there is none.
    public func latest() throws -> SnapshotEntry? {
        try manifest().snapshots.last
    }

    /// The snapshot of `generation`.
    ///
    /// - Throws: ``SnapshotError/generationNotFound(_:)``, or as ``manifest()``.
    public func entry(generation: Int) throws -> SnapshotEntry {
        guard let entry = try manifest().snapshots.first(where: { $0.generation == generation }) else {
            throw SnapshotError.generationNotFound(generation)
        }
        return entry
    }

    /// Opens the snapshot of `generation` read-only (see ``KVStore/Store/init(copyFile:)``),
    /// checking its size and SHA-256 against the manifest first unless `verifying` is `false`. The main
    /// store is not touched.
    ///
    /// ```swift
    /// let store = try snapshots.open(generation: 7)
    /// ```
    ///
    /// The file is opened once, without following a link, and both the checksum and LMDB read that one
    /// open file: nothing can take its place between the check and the mapping. Verifying is the
    /// default because LMDB trusts the pages it maps: a torn copy, a disk error or a file a co-tenant
    /// planted can make it read out of bounds and crash the process, and the checksum is the only
    /// thing that stands between a widget and such a file. It costs one read of the file (a SHA-256 at
    /// a few hundred MB/s); pass `false` only for a file this process has just verified itself.
    ///
    /// The returned store stays readable even if the snapshot is pruned meanwhile.
    ///
    /// - Throws: ``SnapshotError/generationNotFound(_:)``; ``SnapshotError/readBackMismatch(path:detail:)``
    ///   when `verifying` and the file does not match the manifest; ``KVStore/KVStoreError`` (for a
    ///   symbolic link or a file that is not regular: ``KVStore/KVStoreError/unsafeFile(path:reason:)``)
    ///   or ``KVStore/LMDBError`` if the file cannot be opened.
    public func open(generation: Int, verifying: Bool = true) throws -> Store {
        try open(try entry(generation: generation), verifying: verifying)
    }

    /// Opens the newest snapshot read-only; see ``open(generation:verifying:)``.
    ///
    /// - Throws: ``SnapshotError/noSnapshots(directory:)`` if there is none.
    public func openLatest(verifying: Bool = true) throws -> Store {
        guard let entry = try latest() else { throw SnapshotError.noSnapshots(directory: directory) }
        return try open(entry, verifying: verifying)
    }

    /// Opens a listed snapshot read-only; see ``open(generation:verifying:)``.
    public func open(_ entry: SnapshotEntry, verifying: Bool = true) throws -> Store {
        let path = path(of: entry)
        let fd = try openFile(entry, path: path)
        defer { close(fd) }
        if verifying, let problem = try check(entry, descriptor: fd, path: path) {
            throw SnapshotError.readBackMismatch(path: path, detail: problem.detailDescription)
        }
        return try Store(copyDescriptor: fd, path: path)
    }

    /// Opens a listed snapshot's file under a no-follow descriptor of this directory: a link planted in
    /// its place (or in the place of `Snapshots/`) is refused, and a FIFO never blocks.
    func openFile(_ entry: SnapshotEntry, path: String) throws -> Int32 {
        do {
            return try files.withDirectory("", create: false) { dir in
                try ContainerFile.open(entry.file, in: dir, access: .read, fileMode: sharing.fileMode, path: path).fd
            }
        } catch KVStoreError.io(_, _, ENOENT) {
            throw KVStoreError.fileNotFound(path: path)
        }
    }

    // MARK: - Locking

    /// Runs `body` holding the snapshots lock (exclusively for writers, shared for checkers).
    func withLock<R>(shared: Bool, _ body: () throws -> R) throws -> R {
        let lock = try files.withDirectory("", create: false) { fd in
            try FileLock(in: fd, name: Self.lockName, path: directory + "/" + Self.lockName, mode: sharing.fileMode, shared: shared)
        }
        return try withExtendedLifetime(lock) { try body() }
    }

    /// Writes the manifest atomically under a pid-carrying temporary name.
    func writeManifest(_ manifest: SnapshotManifest) throws {
        try files.write(try manifest.encoded(), to: Self.manifestName,
                        temporaryName: TemporaryFileName.make(for: Self.manifestName))
    }

    /// Removes temporary files of exports and manifest writes. Call it holding the lock exclusively:
    /// every writer of such files holds it, so all that remain are orphans.
    func removeTemporaryFiles() throws -> [String] {
        try files.removeTemporaryFiles(olderThan: 0, recursive: false, everyOwner: true) { target in
            target == Self.manifestName || SnapshotEntry.generation(ofFileName: target) != nil
        }
    }
}
