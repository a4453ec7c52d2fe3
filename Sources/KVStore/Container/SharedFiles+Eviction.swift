#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The local budget of a lazy prefix (issue 49): its present copies are evicted least recently used
/// first once they take more than the budget, and the last access that orders them is recorded when
/// a file is read, coarsely.
///
/// The last access is the `lastAccess` of the path's row in `_files.local`, not the file's `atime`
/// (mounts with `relatime` or `noatime` do not keep it, and a hard-linked copy shares one inode with
/// `Blobs/`). A read writes it only when the recorded one is older than
/// ``lastAccessResolution`` (a minute): a file read in a loop costs one small store write a minute,
/// not one a read, and an order of minutes is all eviction needs.
extension SharedFiles {
    /// How stale a recorded last access may be before a read records a new one, in milliseconds.
    package static let lastAccessResolution: Int64 = 60_000

    /// Records that `path` was read now, when it is under a lazy prefix, this process may write, it
    /// is not inside a transaction of the store, and the recorded access is older than
    /// ``lastAccessResolution``. Best effort: a read never fails for it.
    func noteRead(_ path: String, entry: FileManifestEntry, in container: ContainerFiles) {
        guard !container.store.isReadOnly, TransactionScope.innermostKind(of: container.store.environment) == nil else { return }
        let now = FileManifest.milliseconds(Date())
        let sha256 = Array(entry.sha256)
        // Checked in a read first (most reads find a recent access and write nothing), then again in the write.
        let stale: (ReadTransaction) throws -> LocalFileState? = { tx in
            guard let local = try FileManifest.localState(at: path, in: tx), local.sha256 == sha256,
                  now - local.lastAccess >= Self.lastAccessResolution,
                  case .lazy = try FileManifest.prefix(covering: path, in: tx)?.fetch else { return nil }
            return local
        }
        guard (try? container.store.read({ try stale($0) })) != nil else { return }
        _ = try? container.store.write(author: "kvsync") { tx in
            guard var local = try stale(tx) else { return }
            local.lastAccess = now
            try FileManifest.setLocalState(local, at: path, in: tx)
        }
    }

    /// Evicts, in each lazy prefix whose present copies take more than its budget, the least recently
    /// used present files (never `sparing`, the file just fetched; never a file waiting to upload or
    /// downloading, never an eager prefix's file) until the prefix is within its budget. An evicted
    /// path loses its file and its copy in `Blobs/` (unless another path still holds those bytes), and
    /// its local state becomes `missing`: it reads as ``SharedFilesError/notYetDownloaded(path:sha256:)``
    /// and is fetched again when asked. Returns the paths evicted, in the order evicted.
    ///
    /// Only `present` copies count towards a budget: a file waiting to upload is this device's own
    /// write, leaves the count only once the server has it, and then counts like any other.
    @discardableResult
    package func evictLazyFiles(sparing: String? = nil) throws -> [String] {
        let container = try requireContainer()
        let candidates = try container.store.read { tx -> [(path: String, state: LocalFileState)] in
            let prefixes = try FileManifest.prefixes(in: tx)
            let local = try FileManifest.localStates(in: tx)
            var evictable: [(path: String, state: LocalFileState)] = []
            for prefix in prefixes {
                guard case .lazy(let budget) = prefix.fetch else { continue }
                // The longest prefix that covers a path is the one whose budget it counts against.
                let rows = local.filter { path, state in
                    state.state == .present && prefix.covers(path)
                        && !prefixes.contains { $0.prefix.utf8.count > prefix.prefix.utf8.count && $0.covers(path) }
                }
                var total = rows.values.reduce(Int64(0)) { $0 + $1.size }
                guard total > budget else { continue }
                for (path, state) in rows.sorted(by: { ($0.value.lastAccess, $0.key) < ($1.value.lastAccess, $1.key) }) {
                    guard total > budget else { break }
                    if path == sparing { continue }
                    evictable.append((path, state))
                    total -= state.size
                }
            }
            return evictable
        }
        var evicted: [String] = []
        for (path, state) in candidates where try evict(path, state: state, in: container) {
            evicted.append(path)
        }
        return evicted
    }

    /// Evicts one file under the publish lock, only while its local state is still `state` (a read,
    /// a write or a fetch meanwhile keeps it).
    private func evict(_ path: String, state: LocalFileState, in container: ContainerFiles) throws -> Bool {
        try withPublishLock(in: container) {
            let (done, shared) = try container.store.write(author: "kvsync") { tx -> (Bool, Bool) in
                guard try FileManifest.localState(at: path, in: tx) == state else { return (false, false) }
                var missing = state
                missing.state = .missing
                missing.problem = nil
                try FileManifest.setLocalState(missing, at: path, in: tx)
                // Another path that holds the same bytes keeps the copy in `Blobs/`.
                let shared = try FileManifest.localStates(in: tx).contains { other, local in
                    other != path && local.sha256 == state.sha256 && local.state != .missing
                }
                return (true, shared)
            }
            guard done else { return false }
            do { try remove(path) } catch KVStoreError.fileNotFound {}
            if !shared {
                do { try container.blobFiles(sharing: sharing).remove(ContainerFiles.name(state.sha256)) } catch KVStoreError.fileNotFound {}
            }
            return true
        }
    }
}
