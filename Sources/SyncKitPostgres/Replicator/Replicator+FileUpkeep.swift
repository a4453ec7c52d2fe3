#if PostgreSQL
import Foundation
import KVStore
import SyncKit

/// The device's upkeep of its copies of the container's files after a round (issue 49): lazy
/// prefixes brought back within their budgets (least recently used first,
/// `SharedFiles.evictLazyFiles(sparing:)`), and the copies in `Blobs/` that no manifest row and no
/// local state names removed (`SharedFiles.removeUnreferencedBlobs(olderThan:)`, after their hour of
/// grace), so that a device running `kvtool sync run` collects them without being asked.
///
/// The removal walks `Blobs/`, so it runs at most every ``fileUpkeepInterval`` per container in a
/// process (the first round always); eviction reads the local states only, and runs every time.
extension Replicator {
    /// The least time between two walks of a container's `Blobs/` by the rounds of one process.
    static let fileUpkeepInterval: TimeInterval = 600

    /// When each container's `Blobs/` (by path) was last walked in this process.
    private static let lastBlobWalk = Locked<[String: Date]>([:])

    /// Runs the upkeep; best effort: a failure is logged, and the round stands.
    func keepLocalFilesWithinBounds() {
        guard targets[FileManifest.manifestTarget] != nil else { return }
        do {
            let evicted = try container.files.evictLazyFiles()
            if !evicted.isEmpty { options.logger.info("evicted \(evicted.count) lazy file(s) over their prefix's budget") }
            let blobs = container.layout.blobs
            let due = Self.lastBlobWalk.withLock { walked in
                guard walked[blobs].map({ Date().timeIntervalSince($0) >= Self.fileUpkeepInterval }) ?? true else { return false }
                walked[blobs] = Date()
                return true
            }
            if due {
                let removed = try container.files.removeUnreferencedBlobs()
                if !removed.isEmpty { options.logger.info("removed \(removed.count) unreferenced cop(ies) from Blobs/") }
            }
        } catch {
            options.logger.warning("the upkeep of the local files failed: \(error)")
        }
    }
}
#endif
