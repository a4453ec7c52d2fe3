#if PostgreSQL
import Foundation
import KVStore
import SyncWire

/// The device's transfer engine for the files of a container (issue 49), over a ``BlobServer`` (the
/// database directly, or a sync gateway): the same steps either way.
///
/// **Upload** (resumable): ask the server where the upload of the bytes stands (`blobStatus`), then
/// send the copy kept in `Blobs/` from there in chunks of ``BlobWire/chunkBytes``. Every answer is
/// handled: an offset mismatch goes on from the server's offset; a hash mismatch reads and checks the
/// local bytes again and starts over once; `too_large` and `quota_exceeded` stop with a typed error that
/// carries the limit and leave the file waiting to upload. A process killed halfway leaves the server's
/// offset, from which the next upload goes on.
///
/// **Download**: `readBlob` chunk by chunk into a temporary file of `Blobs/`, hashed as it arrives; only
/// bytes that hash to the manifest's name and have its size are renamed into place, then linked to the
/// path (renamed over it) and recorded `present`. A mismatch leaves nothing behind.
///
/// Memory is bounded by one chunk either way.
struct FileTransfer: Sendable {
    let server: any BlobServer
    let group: String
    /// The container's `Files/` (``SharedContainer/files``).
    let files: SharedFiles
    /// The largest chunk sent or asked for.
    var chunkBytes = BlobWire.chunkBytes
    /// The largest file this device downloads (a manifest row of another device may name any size).
    var maxFileBytes = BlobWire.defaultMaxFileBytes
    /// Told how many bytes the server holds after each chunk it accepted.
    var progress: (@Sendable (Int64) -> Void)?

    init(server: any BlobServer, group: String, files: SharedFiles) {
        (self.server, self.group, self.files) = (server, group, files)
    }

    // MARK: - Upload

    /// Uploads the bytes the manifest row of `path` names, and records the path `present` once the
    /// server has them complete (unless the row changed meanwhile).
    func upload(path: String) async throws -> FileUploadReport {
        guard let entry = try files.manifestEntry(for: path) else { throw FileTransferError.notHere(path: path) }
        guard let hash = BlobHash(bytes: Array(entry.sha256)) else { throw FileTransferError.localBytesDiffer(path: path) }
        do {
            let report = try await upload(hash: hash, size: entry.size, path: path)
            try files.setLocalState(state(.present, entry), for: path, ifManifestNames: hash.bytes)
            return report
        } catch let error as FileTransferError {
            // Still waiting, with the reason for `kvtool files status`: the next round tries again.
            _ = try? files.setLocalState(state(.waitingToUpload, entry, problem: error.description), for: path, ifManifestNames: hash.bytes)
            throw error
        }
    }

    /// Uploads `Blobs/<hash>` (`size` bytes), going on from where the server has it.
    func upload(hash: BlobHash, size: Int64, path: String) async throws -> FileUploadReport {
        let name = hash.hex
        let status = try await server.blobStatus(group: group, hash: hash)
        if let status, status.complete {
            guard status.size == size else { throw FileTransferError.sizeMismatch(path: path, size: size, serverSize: status.size) }
            return FileUploadReport(path: path, size: size, resumedFrom: size, sentBytes: 0, alreadyComplete: true)
        }
        if let status, status.size != size { throw FileTransferError.sizeMismatch(path: path, size: size, serverSize: status.size) }
        var offset = min(max(0, status?.received ?? 0), size)
        let resumedFrom = offset
        var chunk = chunkBytes
        var sent: Int64 = 0
        var startedOver = false
        // Every step either advances, moves to the server's offset or starts over once: bounded.
        let chunks = Int((size + Int64(chunk) - 1) / Int64(max(1, chunk)))
        var steps = 0
        while true {
            steps += 1
            guard steps <= 2 * chunks + 16 else { throw FileTransferError.noProgress(path: path, offset: offset) }
            let wanted = Int(min(Int64(chunk), size - offset))
            let (bytes, fileSize) = try readChunk(name, offset: offset, length: wanted, path: path)
            guard fileSize == size, bytes.count == wanted else { throw FileTransferError.localBytesDiffer(path: path) }
            switch try await server.putBlobChunk(group: group, hash: hash, size: size, offset: offset, bytes: bytes) {
            case .accepted(let received):
                sent += Int64(bytes.count)
                progress?(received)
                if received >= size {
                    return FileUploadReport(path: path, size: size, resumedFrom: resumedFrom, sentBytes: sent, alreadyComplete: false)
                }
                offset = min(max(0, received), size)
            case .complete:
                return FileUploadReport(path: path, size: size, resumedFrom: resumedFrom, sentBytes: sent, alreadyComplete: sent == 0)
            case .offsetMismatch(let received):
                // Another upload of the same bytes moved it (another process, a retried chunk): go on from there.
                offset = min(max(0, received), size)
            case .sizeMismatch(let serverSize):
                throw FileTransferError.sizeMismatch(path: path, size: size, serverSize: serverSize)
            case .tooLarge(let limit):
                throw FileTransferError.tooLarge(path: path, size: size, limit: limit)
            case .quotaExceeded(let limit):
                throw FileTransferError.quotaExceeded(path: path, limit: limit)
            case .chunkTooLarge(let limit):
                // A server with a smaller chunk: send smaller chunks, once.
                guard limit > 0, limit < Int64(chunk) else { throw FileTransferError.chunkTooLarge(path: path, limit: limit) }
                chunk = Int(limit)
            case .hashMismatch:
                // The server dropped the upload. Check the local bytes once: a copy that changed is
                // not sent again; one that still hashes right goes again from 0, once.
                guard !startedOver else { throw FileTransferError.hashMismatch(path: path) }
                let (digest, fileSize) = try files.hashBlob(name)
                guard digest == hash.bytes, fileSize == size else { throw FileTransferError.localBytesDiffer(path: path) }
                startedOver = true
                offset = 0
            }
        }
    }

    private func readChunk(_ name: String, offset: Int64, length: Int, path: String) throws -> (bytes: [UInt8], size: Int64) {
        do {
            return try files.readBlobChunk(name, offset: offset, length: length)
        } catch KVStoreError.fileNotFound {
            throw FileTransferError.notHere(path: path)
        } catch KVStoreError.invalidPath {
            throw FileTransferError.localBytesDiffer(path: path)
        }
    }

    /// Uploads every file recorded waiting to upload whose manifest row still names those bytes; one
    /// that fails stays waiting (its error is returned with it) and does not stop the others.
    func uploadWaiting() async throws -> (uploaded: [FileUploadReport], failed: [(path: String, error: any Error)]) {
        var uploaded: [FileUploadReport] = []
        var failed: [(path: String, error: any Error)] = []
        for row in try files.manifestWithLocalStates() {
            guard let local = row.local, local.state == .waitingToUpload, local.sha256 == Array(row.entry.sha256) else { continue }
            do { uploaded.append(try await upload(path: row.path)) } catch { failed.append((row.path, error)) }
        }
        return (uploaded, failed)
    }

    // MARK: - Download

    /// Fetches the bytes the manifest row of `path` names, unless they are here already; returns how
    /// many bytes came from the server.
    @discardableResult
    func download(path: String) async throws -> Int64 {
        guard let entry = try files.manifestEntry(for: path) else { throw FileTransferError.notHere(path: path) }
        guard let hash = BlobHash(bytes: Array(entry.sha256)) else {
            throw FileTransferError.downloadMismatch(path: path, reason: "the manifest's hash is not 32 bytes")
        }
        // Already here (written on this device, or fetched before): only the path may need its link.
        if (try? files.readVerified(path, maxSize: Int(clamping: entry.size))) != nil {
            try files.setLocalState(state(.present, entry), for: path, ifManifestNames: hash.bytes)
            return 0
        }
        guard entry.size <= maxFileBytes else {
            throw FileTransferError.tooLarge(path: path, size: entry.size, limit: maxFileBytes)
        }
        try files.setLocalState(state(.downloading, entry), for: path, ifManifestNames: hash.bytes)
        do {
            let download = try files.beginDownload(of: hash.hex)
            defer { download.discard() }
            var hasher = SHA256Hasher()
            var offset: Int64 = 0
            repeat {
                guard let answer = try await server.readBlob(group: group, hash: hash, offset: offset, length: chunkBytes) else {
                    throw FileTransferError.notOnServer(path: path, sha256: hash.hex)
                }
                let (size, bytes) = (answer.size, answer.bytes)
                guard size == entry.size else {
                    throw FileTransferError.downloadMismatch(path: path, reason: "the server's copy has \(size) bytes, the manifest \(entry.size)")
                }
                guard bytes.count <= chunkBytes, !bytes.isEmpty || offset == size, offset + Int64(bytes.count) <= size else {
                    throw FileTransferError.downloadMismatch(path: path, reason: "the server sent \(bytes.count) bytes at offset \(offset) of \(size)")
                }
                try download.append(bytes)
                hasher.update(bytes)
                offset += Int64(bytes.count)
            } while offset < entry.size
            guard hasher.finalize() == hash.bytes else {
                throw FileTransferError.downloadMismatch(path: path, reason: "the bytes do not hash to the manifest's SHA-256")
            }
            try files.finishDownload(download, path: path, entry: entry)
            // Within its prefix's budget again (a lazy one), the file just fetched kept whatever its size.
            _ = try? files.evictLazyFiles(sparing: path)
            return offset
        } catch {
            _ = try? files.setLocalState(state(.missing, entry, problem: "\(error)"), for: path, ifManifestNames: hash.bytes)
            throw error
        }
    }

    /// Downloads every file under an eager prefix whose bytes are not here; one that fails stays
    /// missing (its error is returned with it) and does not stop the others.
    func downloadEager() async throws -> (downloaded: [String], failed: [(path: String, error: any Error)]) {
        let eager = try files.replicatedPrefixes().filter { $0.fetch == .eager }
        var downloaded: [String] = []
        var failed: [(path: String, error: any Error)] = []
        for row in try files.manifestWithLocalStates() where eager.contains(where: { $0.covers(row.path) }) {
            if let local = row.local, local.sha256 == Array(row.entry.sha256), local.state == .present || local.state == .waitingToUpload { continue }
            do {
                try await download(path: row.path)
                downloaded.append(row.path)
            } catch {
                failed.append((row.path, error))
            }
        }
        return (downloaded, failed)
    }

    private func state(_ kind: LocalFileState.Kind, _ entry: FileManifestEntry, problem: String? = nil) -> LocalFileState {
        LocalFileState(state: kind, sha256: Array(entry.sha256), size: entry.size,
                       lastAccess: Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)), problem: problem)
    }
}

/// What one upload did.
public struct FileUploadReport: Hashable, Sendable {
    public var path: String
    public var size: Int64
    /// Where the server had the upload when this one began: 0 for a new upload, the server's offset
    /// for one that goes on after a process died.
    public var resumedFrom: Int64
    /// The bytes this upload sent.
    public var sentBytes: Int64
    /// Whether the server had the bytes complete already (nothing was sent).
    public var alreadyComplete: Bool
}
#endif
