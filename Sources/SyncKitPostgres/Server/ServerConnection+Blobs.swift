#if PostgreSQL
import NIOCore
import SyncWire

/// The direct path's side of a group's files: the same statements a sync gateway runs
/// (``ServerStatements/blobHead(group:hash:on:logger:)`` and the others), on the device's own
/// connection, each bounded in time as every statement here is. A device on the direct path holds the
/// tables' owner's login, so the limits are ``SyncWire/BlobWire``'s defaults: a server that wants
/// others serves its devices through a gateway (`--max-file-bytes`, `--max-group-blob-bytes`).
extension ServerConnection: BlobServer {
    func blobStatus(group: String, hash: BlobHash) async throws -> BlobStatus? {
        try await mapErrors { [connection, logger] in
            try await ServerStatements.blobHead(group: group, hash: hash, on: connection, logger: logger)
        }
    }

    func putBlobChunk(group: String, hash: BlobHash, size: Int64, offset: Int64, bytes: [UInt8]) async throws -> BlobPutOutcome {
        try await mapErrors { [connection, logger] in
            try await ServerStatements.blobPut(group: group, hash: hash, size: size, offset: offset, bytes: ByteBuffer(bytes: bytes),
                                               maxFileBytes: BlobWire.defaultMaxFileBytes, maxGroupBytes: BlobWire.defaultMaxGroupBytes,
                                               on: connection, logger: logger)
        }
    }

    func readBlob(group: String, hash: BlobHash, offset: Int64, length: Int) async throws -> (size: Int64, bytes: [UInt8])? {
        try await mapErrors { [connection, logger] in
            try await ServerStatements.blobRead(group: group, hash: hash, offset: offset, length: length, on: connection, logger: logger)
                .map { (size: $0.size, bytes: Array($0.bytes.readableBytesView)) }
        }
    }
}
#endif
