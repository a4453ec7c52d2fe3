#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Files asked for by any process (issue 49): the container's mailbox `_files.wanted`, in the store, so
/// that a process which links no networking (an extension, a widget) can ask the process that owns the
/// container's sync for a file whose bytes are not here. The asking process records its wish (path →
/// when it asked) in one transaction; the owner reads the mailbox in each round, fetches each file
/// (hash checked, renamed into place), clears the wish and posts the container's status. SyncKit's
/// `SharedContainer.readFile(_:within:maxSize:)` adds the wake-up and the wait with a deadline.
extension SharedFiles {
    /// Records in the container's store that a process wants the bytes of `path` (a wish the sync owner
    /// fulfils in its next round: see the extension's description). Asking again moves the time asked.
    ///
    /// The wish names the path, not bytes: the owner fetches what the manifest names when it reads the
    /// mailbox, and clears a wish whose path has no manifest row then (the row was deleted, or never
    /// arrived). This only records: it wakes nobody (SyncKit's `readFile` posts the request).
    ///
    /// - Throws: ``KVStoreError/invalidPath(_:reason:)`` for a path ``validate(_:)`` refuses;
    ///   ``SharedFilesError/notAContainer(directory:)`` unless this is a container's `Files/`;
    ///   ``KVStoreError/readOnly(path:)`` when the container's store was opened read-only (a wish is a
    ///   write); what the store throws.
    public func requestDownload(_ path: String, now: Date = Date()) throws {
        try Self.validate(path)
        let container = try requireContainer()
        if container.store.isReadOnly { throw KVStoreError.readOnly(path: container.store.directory) }
        // A container whose prefixes were declared before the mailbox existed gets it here.
        if try container.store.read({ try FileManifest.database(FileManifest.wantedName, in: $0) }) == nil {
            _ = try container.store.collection(FileManifest.wantedName, key: String.self, value: Int64.self)
        }
        try container.store.write(author: "files") { tx in
            try FileManifest.setWish(FileManifest.milliseconds(now), at: path, in: tx)
        }
    }

    /// The files asked for and not yet fetched: path → when it was asked (milliseconds since 1970).
    package func wantedFiles() throws -> [String: Int64] {
        let container = try requireContainer()
        return try container.store.read { try FileManifest.wishes(in: $0) }
    }

    /// Clears the wish for `path`, unless it was asked again after `askedAt` (that process waits for
    /// bytes the manifest may have named since; the next round serves it). Returns whether it did.
    @discardableResult
    package func clearWish(_ path: String, askedAt: Int64) throws -> Bool {
        let container = try requireContainer()
        return try container.store.write(author: "kvsync") { tx in
            guard let current = try FileManifest.wishes(in: tx)[path], current <= askedAt else { return false }
            try FileManifest.setWish(nil, at: path, in: tx)
            return true
        }
    }
}
