import KVStore
#if canImport(Glibc)
import Glibc
#endif

extension Snapshots {
    /// Recomputes every listed snapshot's SHA-256 and size and compares them with the manifest, and
    /// looks for snapshot files the manifest does not list. Reports every problem; changes nothing.
    ///
    /// ```swift
    /// let result = try snapshots.verify()
    /// if !result.isValid { result.problems.forEach { print($0) } }
    /// ```
    ///
    /// Holds the snapshots lock shared, so no export or prune changes the files while they are read.
    ///
    /// - Throws: ``SnapshotError/corruptManifest(path:reason:)`` or
    ///   ``SnapshotError/unsupportedManifestVersion(path:version:supported:)`` when the manifest itself
    ///   is unusable (then nothing can be checked against it); ``KVStore/KVStoreError`` if the
    ///   directory cannot be read. A snapshot that cannot be read is a problem, not an error.
    public func verify() throws -> SnapshotVerification {
        try withLock(shared: true) {
            let manifest = try manifest()
            var problems: [SnapshotProblem] = []
            for entry in manifest.snapshots {
                if let problem = try check(entry) { problems.append(problem) }
            }
            let listed = Set(manifest.snapshots.map(\.file))
            for entry in try files.entries() where SnapshotEntry.generation(ofFileName: entry.name) != nil {
                if !listed.contains(entry.name) {
                    problems.append(SnapshotProblem(file: entry.name, generation: nil, kind: .unlisted))
                }
            }
            return SnapshotVerification(checked: manifest.snapshots, problems: problems)
        }
    }

    /// The problem with one listed snapshot, or `nil` if its size and SHA-256 match.
    func check(_ entry: SnapshotEntry) throws -> SnapshotProblem? {
        let path = path(of: entry)
        let fd: Int32
        do {
            fd = try openFile(entry, path: path)
        } catch KVStoreError.fileNotFound {
            return SnapshotProblem(file: entry.file, generation: entry.generation, kind: .missing)
        } catch KVStoreError.unsafeFile {
            return SnapshotProblem(file: entry.file, generation: entry.generation, kind: .notARegularFile)
        } catch let error as KVStoreError {
            return SnapshotProblem(file: entry.file, generation: entry.generation, kind: .unreadable(error.description))
        }
        defer { close(fd) }
        return try check(entry, descriptor: fd, path: path)
    }

    /// The problem with the listed snapshot open at `fd`, or `nil` if its size and SHA-256 match.
    func check(_ entry: SnapshotEntry, descriptor fd: Int32, path: String) throws -> SnapshotProblem? {
        func problem(_ kind: SnapshotProblem.Kind) -> SnapshotProblem {
            SnapshotProblem(file: entry.file, generation: entry.generation, kind: kind)
        }
        let result: (digest: [UInt8], size: Int)
        do {
            result = try SHA256.hash(descriptor: fd, path: path)
        } catch let error as KVStoreError {
            return problem(.unreadable(error.description))
        }
        if result.size != entry.size {
            return problem(.sizeMismatch(expected: entry.size, actual: result.size))
        }
        let actual = SHA256.hex(result.digest)
        if actual != entry.sha256 {
            return problem(.checksumMismatch(expected: entry.sha256, actual: actual))
        }
        return nil
    }
}
