#if PostgreSQL
import Foundation
import Logging
import KVStore
import SyncWire

/// Transfers over either path a device may have (``Replicator/Endpoint``): the database directly or a
/// sync gateway with a credential. Each call opens its own connection and closes it; for tools
/// (`kvtool sync blobs fetch`, `kvtool bench files`) and tests.
extension FileTransfers {
    /// Uploads the bytes the manifest row of `path` names (``FileTransfer/upload(path:)``).
    package static func upload(path: String, in container: SharedContainer, endpoint: Replicator.Endpoint, group: String) async throws -> FileUploadReport {
        try await withServer(endpoint, group: group) { try await FileTransfer(server: $0, group: group, files: container.files).upload(path: path) }
    }

    /// Downloads the bytes the manifest row of `path` names (``FileTransfer/download(path:)``); returns
    /// how many bytes came from the server.
    @discardableResult
    package static func download(path: String, in container: SharedContainer, endpoint: Replicator.Endpoint, group: String) async throws -> Int64 {
        try await withServer(endpoint, group: group) { try await FileTransfer(server: $0, group: group, files: container.files).download(path: path) }
    }

    /// Reads blob `sha256` of `group` from the server chunk by chunk into `sink`, hashing as it goes, and
    /// returns its size once the whole hashed to `hash`. The caller keeps nothing it was given until
    /// this returns: a blob that does not hash to its name, or is over `maxBytes`, throws after some
    /// chunks went to `sink`.
    ///
    /// - Throws: ``FileTransferError/notOnServer(path:sha256:)`` when the group has no complete blob of
    ///   that hash that a current manifest row names (the same answer for another group's);
    ///   ``FileTransferError/downloadMismatch(path:reason:)`` for bytes that are not the blob's.
    package static func fetch(sha256: [UInt8], group: String, from endpoint: Replicator.Endpoint, maxBytes: Int64 = BlobWire.defaultMaxFileBytes,
                              into sink: ([UInt8]) throws -> Void) async throws -> Int64 {
        guard let hash = BlobHash(bytes: sha256) else {
            throw FileTransferError.downloadMismatch(path: "(blob)", reason: "a SHA-256 is 32 bytes, not \(sha256.count)")
        }
        return try await withServer(endpoint, group: group) { server in
            let name = "(blob \(hash.hex.prefix(12))…)"
            var hasher = SHA256Hasher()
            var offset: Int64 = 0
            var size: Int64 = 0
            repeat {
                guard let answer = try await server.readBlob(group: group, hash: hash, offset: offset, length: BlobWire.chunkBytes) else {
                    throw FileTransferError.notOnServer(path: name, sha256: hash.hex)
                }
                if offset == 0 { size = answer.size }
                guard answer.size == size, size <= maxBytes, answer.bytes.count <= BlobWire.chunkBytes,
                      !answer.bytes.isEmpty || offset == size, offset + Int64(answer.bytes.count) <= size else {
                    throw FileTransferError.downloadMismatch(
                        path: name, reason: size > maxBytes ? "\(size) bytes, over the limit of \(maxBytes)"
                                                            : "the server sent \(answer.bytes.count) bytes at offset \(offset) of \(answer.size)")
                }
                try sink(answer.bytes)
                hasher.update(answer.bytes)
                offset += Int64(answer.bytes.count)
            } while offset < size
            guard hasher.finalize() == hash.bytes else {
                throw FileTransferError.downloadMismatch(path: name, reason: "the bytes do not hash to its SHA-256")
            }
            return size
        }
    }

    /// Runs `body` with a server for `endpoint`'s files, and closes it.
    static func withServer<R: Sendable>(_ endpoint: Replicator.Endpoint, group: String,
                                        _ body: (any BlobServer) async throws -> R) async throws -> R {
        let server: any BlobServer
        let close: () async -> Void
        switch endpoint {
        case .database(let url):
            let connection = try await ServerConnection.connect(url, logger: Logger(label: "kvsync.files"), maxValueBytes: 1 << 20)
            (server, close) = (connection, { await connection.close() })
        case .gateway(let url, let token):
            let connection = try GatewayConnection(url: url, token: token, group: group, maxValueBytes: 1 << 20,
                                                   operationTimeout: .seconds(120), connectTimeout: .seconds(30))
            (server, close) = (connection, { await connection.close() })
        }
        do {
            let result = try await body(server)
            await close()
            return result
        } catch {
            await close()
            throw error
        }
    }
}
#endif
