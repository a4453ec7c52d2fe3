#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore
#if canImport(Glibc)
import Glibc
#endif

extension WidgetFeed {
    /// Publishes `payload` as the feed's next generation, atomically, and returns that generation.
    ///
    /// ```swift
    /// let generation = try feed.publish(payload)
    /// ```
    ///
    /// Publishers of one feed, in any process, take turns (an `flock` on `feeds/.<name>.lock`);
    /// readers are never blocked. Orphaned temporary files of crashed publishers are removed first.
    /// If anything fails, the feed keeps its previous publication (a generation number may be skipped).
    ///
    /// - Parameter date: The publication time recorded in the header.
    /// - Throws: ``WidgetFeedError/payloadTooLarge(name:size:limit:)``;
    ///   ``KVStore/KVStoreError/encodingFailed(collection:reason:)`` if the payload does not encode;
    ///   ``KVStore/KVStoreError/io(operation:path:errno:)`` (`ENOSPC`, `EACCES`…) or
    ///   ``KVStore/KVStoreError/invalidPath(_:reason:)`` for a symbolic link on the way.
    @discardableResult
    public func publish(_ payload: Payload, at date: Date = Date()) throws -> UInt64 {
        try publish(payload, at: date, midWrite: nil)
    }

    /// ``publish(_:at:)`` that calls `midWrite` after writing the first half of the file and before
    /// the rest, the `fsync` and the rename: lets tests kill a publisher mid-publication.
    @_spi(Testing)
    @discardableResult
    public func publish(_ payload: Payload, at date: Date = Date(), midWrite: (() -> Void)?) throws -> UInt64 {
        let encoded: [UInt8]
        do {
            encoded = try CBOREncoder().encode(payload)
        } catch {
            throw KVStoreError.encodingFailed(collection: "feed '\(name)'", reason: "\(error)")
        }
        guard encoded.count <= maxPayloadSize else {
            throw WidgetFeedError.payloadTooLarge(name: name, size: encoded.count, limit: maxPayloadSize)
        }
        try sharing.makeDirectory(snapshotsDirectory)
        let files = try SharedFiles(directory: snapshotsDirectory, sharing: sharing)
        let lockName = "." + name + ".lock"
        let lock = try files.withDirectory(Self.feedsDirectoryName, create: true) { fd in
            try FileLock(in: fd, name: lockName, path: snapshotsDirectory + "/" + Self.feedsDirectoryName + "/" + lockName,
                         mode: sharing.fileMode, shared: false)
        }
        return try withExtendedLifetime(lock) {
            _ = try sweep(files, maxAge: 3600)
            // Only an intact feed's generation is trusted; the lock file's counter covers the rest.
            var current: UInt64 = 0
            if let bytes = try? rawBytes(), let parsed = try? WidgetFeedFile.decode(bytes, path: path) {
                current = parsed.generation
            }
            let last = max(try lock.counter(), current)
            guard last < UInt64(Int64.max) else {
                throw WidgetFeedError.corrupt(path: lock.path, reason: "the generation counter \(last) is out of range")
            }
            let generation = last + 1
            try lock.setCounter(generation)

            let bytes = WidgetFeedFile.encode(generation: generation, publishedAt: date, payload: encoded)
            try files.publish(to: relativePath, temporaryName: TemporaryFileName.make(for: fileName)) { fd, temporaryPath in
                try bytes.withUnsafeBytes { all in
                    let half = all.count / 2
                    try SystemCall.writeAll(fd, UnsafeRawBufferPointer(rebasing: all[..<half]), path: temporaryPath)
                    midWrite?()
                    try SystemCall.writeAll(fd, UnsafeRawBufferPointer(rebasing: all[half...]), path: temporaryPath)
                }
            }
            return generation
        }
    }

    /// Removes this feed's temporary files whose publishing process is gone, or that are older than
    /// `maxAge` seconds (process IDs get reused), and returns their paths relative to
    /// ``snapshotsDirectory``. Publishing does this by itself; files of live publishers are kept.
    ///
    /// ```swift
    /// let removed = try feed.removeOrphanedTemporaryFiles()
    /// ```
    ///
    /// - Throws: ``KVStore/KVStoreError`` if the directory cannot be read or a file cannot be removed.
    @discardableResult
    public func removeOrphanedTemporaryFiles(olderThan maxAge: TimeInterval = 3600) throws -> [String] {
        let files: SharedFiles
        do {
            files = try SharedFiles(directory: snapshotsDirectory, sharing: sharing)
        } catch KVStoreError.io(_, _, let code) where code == ENOENT {
            return []
        }
        return try sweep(files, maxAge: maxAge)
    }

    private func sweep(_ files: SharedFiles, maxAge: TimeInterval) throws -> [String] {
        do {
            return try files.removeTemporaryFiles(in: Self.feedsDirectoryName, olderThan: maxAge, recursive: false,
                                                  whenOwnerIsGone: true) { $0 == fileName }
        } catch KVStoreError.fileNotFound {
            return []  // no feeds/ directory yet
        }
    }
}
