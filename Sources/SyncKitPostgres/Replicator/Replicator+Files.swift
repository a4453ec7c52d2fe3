#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

/// The files of the container's replicated prefixes in the replicator's rounds (issue 49): their
/// bytes go to the server before the manifest rows that name them, and come to this device in the
/// round that brings the rows.
///
/// - **Before a push**, every file waiting to upload is uploaded (``FileTransfer/upload(path:)``, one at
///   a time: memory is one chunk, and a round's server connection is not shared) over the round's
///   server, the database or a gateway alike (``BlobServer``). One refused (`too_large`,
///   `quota_exceeded`) stays waiting with the reason (`kvtool files status`, `kvtool sync status`),
///   and the round goes on: its manifest row is answered `missing_blob`, stays pending, and is never
///   published without its bytes.
/// - **A `missing_blob` answer** for a row this round did not upload (its bytes were here, the server
///   lost them or never had them) uploads that file, and the push's next pass sends the row again; a
///   file is tried once a round.
/// - **After a pull that brought manifest rows** (or after a resync, or when an earlier round left an
///   eager file missing), the paths whose rows were deleted lose their files, the files of eager
///   prefixes are downloaded, and those of lazy prefixes are recorded `missing` (fetched when asked);
///   all before the round records its success and posts the container's status, so that a process
///   woken by it finds the file.
/// - **Files a process asked for** (the mailbox `_files.wanted`, which SyncKit's
///   `SharedContainer.readFile(_:within:maxSize:)` writes and wakes the owner for) are fetched after
///   that, in the same round, and their wishes cleared: a lazy file, or an eager one an earlier round
///   left missing.
extension Replicator {
    /// The round's transfer engine: `nil` when no prefix of the container's files replicates here, or
    /// when `server` cannot carry files.
    func fileTransfer(_ server: any ReplicationServer) -> FileTransfer? {
        guard targets[FileManifest.manifestTarget] != nil, let blobs = server as? any BlobServer else { return nil }
        return FileTransfer(server: blobs, group: group, files: container.files)
    }

    /// Uploads every file waiting to upload, counted in `report`; returns the paths it tried (each is
    /// tried once a round).
    func uploadWaitingFiles(_ server: any ReplicationServer, report: inout SyncReport) async throws -> Set<String> {
        guard let transfer = fileTransfer(server) else { return [] }
        let (uploaded, failed) = try await transfer.uploadWaiting()
        for upload in uploaded { count(upload, in: &report) }
        try rethrowConnectionFailure(failed)
        return Set(uploaded.map(\.path)).union(failed.map(\.path))
    }

    private func count(_ upload: FileUploadReport, in report: inout SyncReport) {
        report.filesUploaded += 1
        report.fileBytesSent += upload.sentBytes
    }

    /// Uploads the files of manifest rows the server answered `missing_blob` that this round has not
    /// tried yet; returns whether one was uploaded (its row is worth sending again now).
    func uploadMissingBlobs(_ keys: Set<PendingKey>, server: any ReplicationServer, tried: inout Set<String>,
                            report: inout SyncReport) async throws -> Bool {
        guard let transfer = fileTransfer(server) else { return false }
        var uploaded = false
        for key in keys where key.target == FileManifest.manifestTarget {
            guard let path = String(validating: key.key, as: UTF8.self), tried.insert(path).inserted else { continue }
            do {
                count(try await transfer.upload(path: path), in: &report)
                uploaded = true
            } catch let error as FileTransferError {
                // Recorded in the path's local state (the reason, for `kvtool files status`): the row waits.
                options.logger.info("a file waits to upload: \(error)")
            }
        }
        return uploaded
    }

    /// A transfer that failed because the server could not be reached fails the round (the next one
    /// tries again); the server's refusals of a file (``FileTransferError``) are recorded with it and
    /// do not.
    private func rethrowConnectionFailure(_ failed: [(path: String, error: any Error)]) throws {
        if let failure = failed.first(where: { !($0.error is FileTransferError) && !($0.error is SharedFilesError) }) {
            throw failure.error
        }
    }

    /// Marks that the manifest changed here by another device's hand (a pull, a resync, a conflict
    /// the remote side won): the round settles the files before it ends.
    func manifestArrived(_ targets: Set<Mutation.Target>?) {
        if targets?.contains(FileManifest.manifestTarget) ?? true { filesToSettle.withLock { $0 = true } }
    }

    /// After a pull: removes the files whose manifest rows were deleted, downloads those of eager
    /// prefixes, records those of lazy prefixes missing, and gives each path whose bytes are here its
    /// copy again where a killed process left it without (``SharedFiles/relinkStaleFiles()``). Runs
    /// when the manifest changed since the last time (or an eager file was left missing, or this is
    /// the process's first round).
    func settleFiles(_ server: any ReplicationServer) async throws {
        defer { keepLocalFilesWithinBounds() }  // every round that settles: lazy budgets, unreferenced copies
        guard let transfer = fileTransfer(server),
              filesToSettle.withLock({ needed in defer { needed = false }; return needed }) else { return }
        do {
            try transfer.files.removeFilesTheManifestDropped()
            try await onWriter { try markLazyFilesMissing() }
            let (_, failed) = try await transfer.downloadEager()
            // A path whose bytes are here but whose link a killed process never made gets it now.
            let relinked = try transfer.files.relinkStaleFiles()
            if !relinked.isEmpty { options.logger.info("files given their copy again: \(relinked.joined(separator: ", "))") }
            // Left missing (their reason is in their local state): the next round tries them again.
            if !failed.isEmpty { filesToSettle.withLock { $0 = true } }
            try rethrowConnectionFailure(failed)
        } catch {
            filesToSettle.withLock { $0 = true }
            throw error
        }
    }

    /// Fetches every file a process asked for (``SharedFiles/requestDownload(_:now:)``) whose bytes are
    /// not here, and clears each wish that is served: fetched, already here, with no manifest row to
    /// fetch, or refused by the server for good (the reason is in the path's local state; the asking
    /// process reads `notYetDownloaded` at its deadline). A wish whose file could not be fetched because
    /// the server could not be reached, or is not there yet, stays for the next round.
    func fetchWantedFiles(_ server: any ReplicationServer) async throws {
        guard let transfer = fileTransfer(server) else { return }
        let wanted = try transfer.files.wantedFiles()
        var failed: [(path: String, error: any Error)] = []
        for (path, askedAt) in wanted.sorted(by: { $0.key < $1.key }) {
            do {
                if try transfer.files.manifestEntry(for: path) != nil { try await transfer.download(path: path) }
            } catch let error as FileTransferError {
                options.logger.info("a file asked for was not fetched: \(error)")
                if case .notOnServer = error { continue }
            } catch {
                failed.append((path, error))
                continue
            }
            try await onWriter { _ = try transfer.files.clearWish(path, askedAt: askedAt) }
        }
        try rethrowConnectionFailure(failed)
    }

    /// Records `missing` for each file of a lazy prefix whose manifest row names bytes this device has
    /// no state for (a process asks for it; nothing is fetched before).
    func markLazyFilesMissing() throws {
        try container.store.write(author: "kvsync") { tx in
            let lazy = try FileManifest.prefixes(in: tx).filter { if case .lazy = $0.fetch { true } else { false } }
            guard !lazy.isEmpty else { return }
            let local = try FileManifest.localStates(in: tx)
            let now = Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
            for (path, entry) in try FileManifest.entries(in: tx) where lazy.contains(where: { $0.covers(path) }) {
                let sha256 = Array(entry.sha256)
                guard local[path]?.sha256 != sha256 else { continue }
                try FileManifest.setLocalState(LocalFileState(state: .missing, sha256: sha256, size: entry.size, lastAccess: now),
                                               at: path, in: tx)
            }
        }
    }

    /// The manifest as a target of the replicator, when its prefixes are declared: every value that
    /// comes in must be a manifest entry (a 32-byte SHA-256, a size that is not negative) under a path
    /// `SharedFiles` accepts; anything else is quarantined, never stored where every read of the
    /// manifest would fail on it.
    static func manifestTarget(in store: Store) throws -> ReplicatedTarget {
        try ReplicatedTarget.untypedCollection(named: FileManifest.manifestName, in: store).checkingEntries { key, value in
            guard let path = String(validating: key, as: UTF8.self) else {
                throw KVStoreError.invalidKey(collection: FileManifest.manifestName, reason: "a path is UTF-8")
            }
            _ = try SharedFiles.validate(path)
            guard let value else { return }
            let entry = try value.withUnsafeBytes { try CBORDecoder().decode(FileManifestEntry.self, from: $0) }
            guard entry.sha256.count == 32, entry.size >= 0 else {
                throw KVStoreError.corruptValue(collection: FileManifest.manifestName, key: path,
                                                reason: "a manifest entry has a 32-byte SHA-256 and a size of 0 or more")
            }
        }
    }
}
#endif
