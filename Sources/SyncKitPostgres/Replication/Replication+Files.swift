#if PostgreSQL
import Foundation
import Logging
import KVStore
import SyncKit

/// Files that travel with the container (issue 49): which prefixes of `Files/` replicate, and how.
extension Replication {
    /// Declares the files under `prefix` of `Files/` (a directory: `TrainerImages/`) replicated, in
    /// every process of the container, the lean extension included (the declaration is a row of the
    /// container's `_files.prefixes`): a write of a file there through ``SharedContainer/files`` records
    /// its manifest entry (SHA-256, size, media type) in the transaction of the write, and the manifest
    /// (`_files`) replicates like any collection. Declaring again changes the fetch mode only.
    ///
    /// ```swift
    /// try Replication.files(prefix: "TrainerImages/", fetch: .eager, in: container)
    /// try Replication.files(prefix: "Exports/", fetch: .lazy(budget: 64 << 20), in: container)
    /// ```
    ///
    /// Every device of the group declares the prefixes it shares: a device that declares none skips the
    /// manifest's changes, as it skips any collection it does not replicate.
    ///
    /// - Parameter fetch: ``FileFetch/eager`` to fetch a file as soon as its row arrives (what an
    ///   extension that must show it needs), ``FileFetch/lazy(budget:)`` to fetch it when a process asks.
    /// - Returns: The declaration as stored (the prefix with its trailing `/`).
    /// - Throws: `KVStoreError.invalidPath` for a prefix `SharedFiles` would refuse as a path.
    @discardableResult
    public static func files(prefix: String, fetch: FileFetch = .eager, in container: SharedContainer,
                             now: Date = Date()) throws -> ReplicatedFilePrefix {
        let history = try History.attach(to: container)
        let declared = try FileManifest.declare(prefix: prefix, fetch: fetch, in: container.store)
        if try !declaredTargets(in: container.store).contains(FileManifest.manifestTarget) {
            try declare(FileManifest.manifestTarget, in: container, history: history, now: now)
        }
        return declared
    }

    /// The replicated prefixes of `container`'s `Files/`, in order.
    public static func filePrefixes(in container: SharedContainer) throws -> [ReplicatedFilePrefix] {
        try container.files.replicatedPrefixes()
    }
}

/// Transfers of one container's files with a server reached directly (``ServerURL``): each call opens
/// its own connection and closes it. For tools and tests; a replicator runs ``FileTransfer`` over the
/// connection of its round.
package enum FileTransfers {
    /// Uploads the bytes the manifest row of `path` names (see ``FileTransfer/upload(path:)``);
    /// `progress` is told how many bytes the server holds after each chunk.
    package static func upload(path: String, in container: SharedContainer, server url: ServerURL, group: String,
                               progress: (@Sendable (Int64) -> Void)? = nil) async throws -> FileUploadReport {
        try await withTransfer(container: container, url: url, group: group) { transfer in
            var transfer = transfer
            transfer.progress = progress
            return try await transfer.upload(path: path)
        }
    }

    /// Downloads the bytes the manifest row of `path` names (see ``FileTransfer/download(path:)``).
    @discardableResult
    package static func download(path: String, in container: SharedContainer, server url: ServerURL, group: String) async throws -> Int64 {
        try await withTransfer(container: container, url: url, group: group) { try await $0.download(path: path) }
    }

    private static func withTransfer<R: Sendable>(container: SharedContainer, url: ServerURL, group: String,
                                                  _ body: (FileTransfer) async throws -> R) async throws -> R {
        try await withServer(.database(url), group: group) { try await body(FileTransfer(server: $0, group: group, files: container.files)) }
    }
}
#endif
