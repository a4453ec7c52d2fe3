#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore
#if canImport(Glibc)
import Glibc
#endif

extension Snapshots {
    /// Publishes a consistent, compacted copy of `store` as the next generation, and lists it in the
    /// manifest.
    ///
    /// ```swift
    /// let entry = try snapshots.export(from: container.store)
    /// print("\(entry.file): txn \(entry.sourceTransactionID), \(entry.size) bytes")
    /// ```
    ///
    /// Holds the snapshots lock for the whole export, so concurrent exporters (in any process) take
    /// turns and get consecutive generations. The store is read in one read transaction: writers are
    /// never blocked, and the snapshot is exactly the state committed before that transaction began.
    /// The store may be opened read-only. Orphaned temporary files of crashed exports are removed first.
    ///
    /// If anything fails, nothing is published: the temporary file is removed, and a snapshot whose
    /// manifest entry could not be written is removed again.
    ///
    /// Threads: call it from any thread, but not inside a transaction of `store`.
    ///
    /// - Parameter now: The creation time recorded (whole seconds).
    /// - Returns: The manifest entry of the new snapshot.
    /// - Throws: ``SnapshotError/corruptManifest(path:reason:)`` (nothing is exported until the manifest
    ///   is repaired or removed); ``SnapshotError/readBackMismatch(path:detail:)``;
    ///   ``KVStore/KVStoreError/io(operation:path:errno:)`` or ``KVStore/LMDBError`` (`noSpace`…).
    @discardableResult
    public func export(from store: Store, now: Date = Date()) throws -> SnapshotEntry {
        try withLock(shared: false) {
            var manifest = try manifest()
            _ = try removeTemporaryFiles()
            // A crash between publishing a file and writing the manifest leaves a file the manifest
            // does not list: its generation is taken too, so that no name is ever reused.
            let onDisk = try files.entries().compactMap { SnapshotEntry.generation(ofFileName: $0.name) }.max() ?? 0
            let generation = max(manifest.lastGeneration, manifest.snapshots.last?.generation ?? 0, onDisk) + 1
            let name = SnapshotEntry.fileName(forGeneration: generation)

            let (copy, digest) = try files.publish(
                to: name, temporaryName: TemporaryFileName.make(for: name), replacing: false
            ) { descriptor, temporaryPath in
                let copy = try store.copy(intoEmptyFile: descriptor, at: temporaryPath)
                let (digest, size) = try SHA256.hash(descriptor: descriptor, path: temporaryPath)
                guard size == copy.size else {
                    throw SnapshotError.readBackMismatch(
                        path: temporaryPath, detail: "read \(size) bytes, LMDB reported \(copy.size)")
                }
                return (copy, digest)
            }

            let entry = SnapshotEntry(
                generation: generation, file: name, sourceTransactionID: copy.sourceTransactionID,
                createdAt: Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down)),
                size: copy.size, sha256: SHA256.hex(digest))
            manifest.snapshots.append(entry)
            manifest.lastGeneration = generation
            do {
                try writeManifest(manifest)
            } catch {
                try? files.remove(name)
                throw error
            }
            return entry
        }
    }
}
