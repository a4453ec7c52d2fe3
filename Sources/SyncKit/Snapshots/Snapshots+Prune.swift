import KVStore

extension Snapshots {
    /// Keeps the `keep` newest snapshots and removes the others: first from the manifest (written
    /// atomically), then their files. Also removes snapshot files no manifest lists and orphaned
    /// temporary files.
    ///
    /// ```swift
    /// let result = try snapshots.prune(keep: 3)
    /// print("removed", result.removed.map(\.file))
    /// ```
    ///
    /// Holds the snapshots lock exclusively. The manifest is written before any file is removed, so a
    /// reader that trusts the manifest never finds a listed file missing; a crash in between leaves
    /// unlisted files, which the next prune removes. A widget that has a pruned snapshot open keeps
    /// reading it (the mapping outlives the name). Generations are never reused after pruning.
    ///
    /// - Throws: ``SnapshotError/invalidKeepCount(_:)`` for a negative `keep` (before anything is
    ///   touched); ``SnapshotError/corruptManifest(path:reason:)`` (nothing is removed);
    ///   ``KVStore/KVStoreError`` if the manifest cannot be written or a file cannot be removed.
    @discardableResult
    public func prune(keep: Int) throws -> SnapshotPruning {
        guard keep >= 0 else { throw SnapshotError.invalidKeepCount(keep) }
        return try withLock(shared: false) {
            var manifest = try manifest()
            let removeCount = max(0, manifest.snapshots.count - keep)
            let removed = Array(manifest.snapshots.prefix(removeCount))
            manifest.snapshots.removeFirst(removeCount)
            if !removed.isEmpty { try writeManifest(manifest) }

            for entry in removed {
                do { try files.remove(entry.file) } catch KVStoreError.fileNotFound { continue }
            }
            let listed = Set(manifest.snapshots.map(\.file))
            var unlisted: [String] = []
            for entry in try files.entries() where entry.kind == .file && !listed.contains(entry.name) {
                guard SnapshotEntry.generation(ofFileName: entry.name) != nil else { continue }
                do { try files.remove(entry.name) } catch KVStoreError.fileNotFound { continue }
                unlisted.append(entry.name)
            }
            let temporary = try removeTemporaryFiles()
            return SnapshotPruning(removed: removed, kept: manifest.snapshots,
                                   removedUnlisted: unlisted, removedTemporaryFiles: temporary)
        }
    }
}
