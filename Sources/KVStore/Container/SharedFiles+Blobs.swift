#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// What the transfer engine (SyncKitPostgres) does with a container's `Blobs/` and the local state of
/// its files (issue 49): read an upload's chunks, write a download into a temporary file and publish
/// it once its hash is checked, and say where each path stands.
extension SharedFiles {
    /// One file of the manifest, as ``fileStatus()`` reports it.
    public struct FileStatus: Hashable, Sendable {
        public var path: String
        public var entry: FileManifestEntry
        /// Where this device's copy stands.
        public var state: LocalFileState.Kind
        /// Why its last transfer stopped, if it did.
        public var problem: String?
    }

    /// Every row of the manifest with where this device's copy of its bytes stands, in path order: the
    /// local state recorded for those bytes (`missing` instead of `present` or `waiting_to_upload` when
    /// `Blobs/` has no copy of their size), or, when none is recorded, `present` if `Blobs/` holds them
    /// (checked: size and SHA-256) and `missing` if not.
    public func fileStatus() throws -> [FileStatus] {
        let container = try requireContainer()
        let (entries, local) = try container.store.read { tx in
            (try FileManifest.entries(in: tx), try FileManifest.localStates(in: tx))
        }
        return entries.map { path, entry in
            let name = ContainerFiles.name(entry.sha256)
            if let state = local[path], state.sha256 == Array(entry.sha256) {
                // Present or waiting to upload only while the copy is there (its size; reads check its hash).
                if state.state == .present || state.state == .waitingToUpload,
                   (try? readBlobChunk(name, offset: 0, length: 0).size) != entry.size {
                    return FileStatus(path: path, entry: entry, state: .missing, problem: "the copy in Blobs/ is gone")
                }
                return FileStatus(path: path, entry: entry, state: state.state, problem: state.problem)
            }
            let here = verifiedBlob(name, entry: entry, in: container, maxSize: Int(clamping: entry.size)) != nil
            return FileStatus(path: path, entry: entry, state: here ? .present : .missing, problem: nil)
        }
    }

    /// Sets this device's state of `path` (or removes it, with `nil`) in a transaction of its own,
    /// when the manifest row of `path` still names `sha256` (or, for `nil`, always). Returns whether it did.
    @discardableResult
    package func setLocalState(_ state: LocalFileState?, for path: String, ifManifestNames sha256: [UInt8]? = nil) throws -> Bool {
        let container = try requireContainer()
        return try container.store.write(author: "kvsync") { tx in
            if let sha256, try FileManifest.entry(at: path, in: tx).map({ Array($0.sha256) }) != sha256 { return false }
            try FileManifest.setLocalState(state, at: path, in: tx)
            return true
        }
    }

    /// The local state of `path`, if one is recorded.
    package func localState(for path: String) throws -> LocalFileState? {
        let container = try requireContainer()
        return try container.store.read { try FileManifest.localState(at: path, in: $0) }
    }

    /// The manifest's rows with their local states, in path order: what the transfer engine walks.
    package func manifestWithLocalStates() throws -> [(path: String, entry: FileManifestEntry, local: LocalFileState?)] {
        let container = try requireContainer()
        return try container.store.read { tx in
            let local = try FileManifest.localStates(in: tx)
            return try FileManifest.entries(in: tx).map { ($0.path, $0.entry, local[$0.path]) }
        }
    }

    /// Gives each path its copy again where the recorded state says its bytes are here (`present` or
    /// `waitingToUpload`, and `Blobs/` holds a regular file of their size) while the path is not that
    /// copy: a process killed between the commit that recorded the bytes and the link that gives the
    /// path them (a write's, a download's), or a publish that ran without the lock and lost the race.
    /// Only while the manifest row still names those bytes, under the publish lock. Checked by
    /// `fstatat` alone (the same device and inode), so a round pays two `stat`s a file; where the file
    /// system refused hard links, a path is a copy and is published again each time. A path that cannot
    /// be published (a link a co-tenant planted there) is left: ``readVerified(_:maxSize:)`` serves the
    /// bytes from `Blobs/` either way. Returns the paths published again.
    @discardableResult
    package func relinkStaleFiles() throws -> [String] {
        let container = try requireContainer()
        guard !container.store.isReadOnly else { return [] }
        let blobs = try container.blobFiles(sharing: sharing)
        var relinked: [String] = []
        for row in try manifestWithLocalStates() {
            guard let local = row.local, local.sha256 == Array(row.entry.sha256),
                  local.state == .present || local.state == .waitingToUpload else { continue }
            let name = ContainerFiles.name(row.entry.sha256)
            guard let copy = try? blobs.withDirectory("", create: false, { SafePath.lstat(at: $0, name) }),
                  SafePath.isType(copy, S_IFREG), Int64(copy.st_size) == row.entry.size else { continue }
            let components = SafePath.split(row.path)
            let here = try? withDirectory(components.dropLast().joined(separator: "/"), create: false) {
                SafePath.lstat(at: $0, components.last ?? "")
            }
            if let here = here ?? nil, here.st_dev == copy.st_dev, here.st_ino == copy.st_ino { continue }
            do {
                try publishCommitted(row.path, blob: name, in: container, checkingManifest: true)
                relinked.append(row.path)
            } catch {
                continue
            }
        }
        return relinked
    }

    /// The declared prefix that covers `path`, if any.
    package func replicatedPrefix(covering path: String) throws -> ReplicatedFilePrefix? {
        let container = try requireContainer()
        return try container.store.read { try FileManifest.prefix(covering: path, in: $0) }
    }

    /// After a pull: each path this device holds a local state for whose manifest row is gone (a
    /// tombstone arrived) loses its file and its local state; returns those paths. Under the publish
    /// lock, and only while the row is still gone, so a write committed meanwhile keeps its file.
    @discardableResult
    package func removeFilesTheManifestDropped() throws -> [String] {
        let container = try requireContainer()
        let dropped = try container.store.read { tx in
            let entries = Set(try FileManifest.entries(in: tx).map(\.path))
            return try FileManifest.localStates(in: tx).keys.filter { !entries.contains($0) }.sorted()
        }
        var removed: [String] = []
        for path in dropped {
            let gone = try withPublishLock(in: container) { () throws -> Bool in
                let gone = try container.store.write(author: "kvsync") { tx in
                    guard try FileManifest.entry(at: path, in: tx) == nil else { return false }
                    try FileManifest.setLocalState(nil, at: path, in: tx)
                    return true
                }
                if gone { do { try remove(path) } catch KVStoreError.fileNotFound {} }
                return gone
            }
            if gone { removed.append(path) }
        }
        return removed
    }

    /// Deletes the copies in `Blobs/` that no manifest row and no local state names and that were not
    /// changed for `age` seconds (so the copy a write stages before its transaction commits is spared),
    /// and the temporary files of downloads whose process is gone or older than `age`. Returns the
    /// names deleted, sorted. A copy waiting to upload is named by its local state, so it stays.
    @discardableResult
    package func removeUnreferencedBlobs(olderThan age: TimeInterval = 3600) throws -> [String] {
        let container = try requireContainer()
        let blobs = try container.blobFiles(sharing: sharing)
        let named = try container.store.read { tx in
            Set(try FileManifest.entries(in: tx).map { ContainerFiles.name($0.entry.sha256) })
                .union(try FileManifest.localStates(in: tx).values.map { ContainerFiles.name($0.sha256) })
        }
        let cutoff = Date(timeIntervalSinceNow: -max(0, age))
        var removed = try blobs.removeTemporaryFiles(olderThan: age, recursive: false, whenOwnerIsGone: true)
        for entry in try blobs.entries() where entry.kind == .file && entry.name.utf8.count == 64 && !named.contains(entry.name) {
            guard entry.modificationDate <= cutoff else { continue }
            do { try blobs.remove(entry.name); removed.append(entry.name) } catch KVStoreError.fileNotFound {}
        }
        return removed.sorted()
    }

    /// Up to `length` bytes of `Blobs/<name>` from `offset`, and the file's size: an upload's chunk.
    /// The file is opened without following a link, and must be a regular file.
    ///
    /// - Throws: ``KVStoreError/fileNotFound(path:)`` when `Blobs/` has no such copy;
    ///   ``KVStoreError/invalidPath(_:reason:)`` for a link or a special file planted there.
    package func readBlobChunk(_ name: String, offset: Int64, length: Int) throws -> (bytes: [UInt8], size: Int64) {
        let blobs = try requireContainer().blobFiles(sharing: sharing)
        let fullPath = SafePath.join(blobs.directory, name)
        return try blobs.withDirectory("", create: false) { dir in
            let fd = SystemCall.retry { openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) }
            if fd < 0 {
                let code = errno
                if code == ENOENT { throw KVStoreError.fileNotFound(path: fullPath) }
                if code == ELOOP { throw KVStoreError.invalidPath(name, reason: "Blobs/\(name) is a symbolic link") }
                throw KVStoreError.io(operation: "open", path: fullPath, errno: code)
            }
            defer { close(fd) }
            var st = stat()
            guard fstat(fd, &st) == 0 else { throw KVStoreError.io(operation: "fstat", path: fullPath, errno: errno) }
            guard SafePath.isType(st, S_IFREG) else {
                throw KVStoreError.invalidPath(name, reason: "Blobs/\(name) is \(FilePolicy.kind(st)), not a regular file")
            }
            let size = Int64(st.st_size)
            let wanted = Int(max(0, min(Int64(max(0, length)), size - offset)))
            var bytes = [UInt8](repeating: 0, count: wanted)
            var filled = 0
            while filled < wanted {
                let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + filled, wanted - filled, off_t(offset) + off_t(filled)) }
                if n < 0 {
                    if errno == EINTR || errno == EAGAIN { continue }
                    throw KVStoreError.io(operation: "read", path: fullPath, errno: errno)
                }
                if n == 0 { break }  // shrank meanwhile: the server's hash check refuses what is short
                filled += n
            }
            bytes.removeLast(wanted - filled)
            return (bytes, size)
        }
    }

    /// The SHA-256 and size of `Blobs/<name>`, read in chunks.
    package func hashBlob(_ name: String) throws -> (sha256: [UInt8], size: Int64) {
        var hasher = SHA256Hasher()
        var offset: Int64 = 0
        while true {
            let (bytes, _) = try readBlobChunk(name, offset: offset, length: 1 << 20)
            if bytes.isEmpty { break }
            hasher.update(bytes)
            offset += Int64(bytes.count)
        }
        return (hasher.finalize(), offset)
    }

    /// Starts a download into `Blobs/`: a new temporary file next to where `Blobs/<name>` goes.
    package func beginDownload(of name: String) throws -> BlobDownload {
        let container = try requireContainer()
        let blobs = try container.blobFiles(sharing: sharing)
        return try BlobDownload(blobs: blobs, name: name)
    }

    /// Publishes a download whose bytes hashed to `entry`'s: `Blobs/<name>` by rename, then, if the
    /// manifest row of `path` still names them, the local state `present` and the path (a hard link
    /// renamed over it). Readers see the old file or the new one, never a part of one.
    package func finishDownload(_ download: BlobDownload, path: String, entry: FileManifestEntry) throws {
        let container = try requireContainer()
        try download.publish()
        let name = ContainerFiles.name(entry.sha256)
        let now = FileManifest.milliseconds(Date())
        let current = try setLocalState(LocalFileState(state: .present, sha256: Array(entry.sha256), size: entry.size, lastAccess: now),
                                        for: path, ifManifestNames: Array(entry.sha256))
        if current { try publishCommitted(path, blob: name, in: container, checkingManifest: true) }
    }
}

/// A download being written into `Blobs/`: a temporary file (``TemporaryFileName``, so a sweeper knows
/// it), appended to chunk by chunk, renamed to its hash only by ``SharedFiles/finishDownload(_:path:entry:)``
/// once the caller checked the hash. ``discard()`` (or dropping it unpublished) removes it: a download
/// that fails leaves nothing.
package final class BlobDownload {
    let blobs: SharedFiles
    let name: String
    private let directory: Int32
    private let temporary: String
    private var fd: Int32
    private var published = false

    init(blobs: SharedFiles, name: String) throws {
        try SharedFiles.validate(name)
        self.blobs = blobs
        self.name = name
        let dir = try blobs.withDirectory("", create: false) { dup($0) }
        guard dir >= 0 else { throw KVStoreError.io(operation: "open directory", path: blobs.directory, errno: errno) }
        var made = ""
        var opened: Int32 = -1
        for _ in 0..<16 {
            made = TemporaryFileName.make(for: name)
            opened = SystemCall.retry { openat(dir, made, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600) }
            if opened >= 0 || errno != EEXIST { break }
        }
        guard opened >= 0 else {
            let code = errno
            close(dir)
            throw KVStoreError.io(operation: "create temporary file", path: SafePath.join(blobs.directory, made), errno: code)
        }
        directory = dir
        temporary = made
        fd = opened
        _ = fchmod(fd, blobs.sharing.fileMode)
    }

    /// Appends `bytes`.
    package func append(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try SystemCall.writeAll(fd, $0, path: SafePath.join(blobs.directory, temporary)) }
    }

    /// `fsync`, rename to `name`, `fsync` of `Blobs/`.
    func publish() throws {
        let full = SafePath.join(blobs.directory, name)
        guard SystemCall.retry({ fsync(fd) }) == 0 else { throw KVStoreError.io(operation: "fsync", path: full, errno: errno) }
        guard SystemCall.retry({ renameat(directory, temporary, directory, name) }) == 0 else {
            throw KVStoreError.io(operation: "rename temporary file onto", path: full, errno: errno)
        }
        published = true
        let code = SafePath.syncDirectory(directory)
        if code != 0 { throw KVStoreError.io(operation: "fsync directory", path: blobs.directory, errno: code) }
    }

    /// Removes the temporary file (nothing of the download is left).
    package func discard() {
        if !published { _ = unlinkat(directory, temporary, 0) }
        published = true
    }

    deinit {
        discard()
        close(fd)
        close(directory)
    }
}
