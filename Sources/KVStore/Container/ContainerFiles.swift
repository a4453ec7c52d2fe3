#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// What a container's ``SharedFiles`` knows besides its directory (issue 49): the store the manifest
/// lives in, and `Blobs/`, where the bytes of every file written under a replicated prefix are kept
/// under their SHA-256 (64 hex digits) and hard-linked to their path in `Files/`.
///
/// Why a content-addressed copy: a manifest row names bytes, and those bytes must stay readable until
/// they are uploaded, whatever happens to the path meanwhile (another write replaces the path's file by
/// a rename, which leaves the copy's inode alone; a transaction that aborts never touches the path).
/// A hard link costs no second copy while the path still holds the same bytes.
struct ContainerFiles: Sendable {
    let store: Store
    /// `Blobs/`'s absolute path (it may not exist in a container opened read-only).
    let blobs: String

    /// `Blobs/` as a ``SharedFiles``: every walk and publish there refuses links as in `Files/`.
    func blobFiles(sharing: SharingMode) throws -> SharedFiles {
        try SharedFiles(directory: blobs, sharing: sharing)
    }

    /// The name of the copy of bytes hashed to `digest` in `Blobs/`.
    static func name(_ digest: some Sequence<UInt8>) -> String { Hex.encode(Array(digest)) }
}

extension SharedFiles {
    /// The container this is the `Files/` of, or ``SharedFilesError/notAContainer(directory:)``.
    func requireContainer(for transaction: ReadTransaction? = nil) throws -> ContainerFiles {
        guard let container else { throw SharedFilesError.notAContainer(directory: directory) }
        if let transaction, transaction.store.environment !== container.store.environment {
            throw KVStoreError.invalidName(directory, reason: "the transaction is not one of this container's store")
        }
        return container
    }

    /// Stores `bytes` as `Blobs/<hex>` (atomically: a temporary file, `fsync`, rename, `fsync` of the
    /// directory), replacing a copy that may be there: a copy planted by a co-tenant is never trusted,
    /// and the same bytes written twice leave one file.
    func stage(_ bytes: UnsafeRawBufferPointer, as name: String, in container: ContainerFiles) throws {
        let blobs = try container.blobFiles(sharing: sharing)
        try blobs.publish(to: name, temporaryName: { TemporaryFileName.make(for: name) }, attempts: 16, replacing: true) { fd, temporary in
            try SystemCall.writeAll(fd, bytes, path: temporary)
        }
    }

    /// Gives `path` the bytes of `Blobs/<name>` by a hard link renamed over it (or a copy where the
    /// file system has no hard links): readers see the old file or the new one, never a part of one.
    /// `Blobs/<name>` must be a regular file (a link planted there is refused, never linked).
    func link(blob name: String, to path: String, in container: ContainerFiles) throws {
        let blobs = try container.blobFiles(sharing: sharing)
        try blobs.withDirectory("", create: false) { blobsFD in
            guard let st = SafePath.lstat(at: blobsFD, name) else {
                throw KVStoreError.fileNotFound(path: SafePath.join(container.blobs, name))
            }
            guard SafePath.isType(st, S_IFREG) else {
                throw KVStoreError.invalidPath(name, reason: "Blobs/\(name) is \(FilePolicy.kind(st)), not a regular file")
            }
            let target = SafePath.split(path).last ?? ""
            try publish(to: path, temporaryName: { TemporaryFileName.make(for: target) }, attempts: 16, replacing: true,
                        linking: (directory: blobsFD, name: name)) { _, _ in }
        }
    }

    /// The copy of `Blobs/<name>` if it holds exactly the bytes of `entry` (its size and SHA-256), else
    /// `nil`: never another file's bytes.
    func verifiedBlob(_ name: String, entry: FileManifestEntry, in container: ContainerFiles, maxSize: Int) -> Data? {
        guard let blobs = try? container.blobFiles(sharing: sharing),
              let data = try? blobs.read(name, maxSize: maxSize), Self.matches(data, entry) else { return nil }
        return data
    }

    /// Whether `data` is what `entry` names.
    static func matches(_ data: Data, _ entry: FileManifestEntry) -> Bool {
        guard Int64(data.count) == entry.size else { return false }
        return data.withUnsafeBytes { SHA256Hasher.hash($0) } == Array(entry.sha256)
    }

    /// Runs `body` holding `Blobs/.publish.lock`, which orders the processes that give a path the
    /// bytes its manifest row names after a commit, so that the last to publish publishes the newest
    /// row. A co-tenant that holds the lock delays this for 2 s at most: then `body` runs without it
    /// (a read through ``readVerified(_:maxSize:)`` serves the manifest's bytes either way).
    func withPublishLock<R>(in container: ContainerFiles, _ body: () throws -> R) throws -> R {
        let blobs = try container.blobFiles(sharing: sharing)
        let fd = try blobs.withDirectory("", create: false) { dir in
            try ContainerFile.open(".publish.lock", in: dir, access: .readWrite, create: true, fileMode: sharing.fileMode,
                                   path: SafePath.join(container.blobs, ".publish.lock")).fd
        }
        defer { close(fd) }
        var locked = false
        for _ in 0..<200 {
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { locked = true; break }
            usleep(10_000)
        }
        defer { if locked { _ = flock(fd, LOCK_UN) } }
        return try body()
    }
}

/// The media type of a file, from its extension (case-insensitive): what the manifest records.
enum MediaType {
    static let fallback = "application/octet-stream"
    static let byExtension: [String: String] = [
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
        "heic": "image/heic", "svg": "image/svg+xml", "pdf": "application/pdf", "json": "application/json",
        "txt": "text/plain", "csv": "text/csv", "html": "text/html", "mp4": "video/mp4", "mov": "video/quicktime",
        "m4a": "audio/mp4", "mp3": "audio/mpeg", "wav": "audio/wav", "zip": "application/zip",
    ]

    static func of(_ path: String) -> String {
        let name = SafePath.split(path).last ?? ""
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return fallback }
        return byExtension[name[name.index(after: dot)...].lowercased()] ?? fallback
    }
}
