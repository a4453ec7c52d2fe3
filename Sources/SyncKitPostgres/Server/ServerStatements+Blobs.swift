#if PostgreSQL
import Foundation
import Logging
import NIOCore
import PostgresNIO
import SyncWire

/// The statements of a group's blobs (issue 49; the functions of ``ServerSchema``'s version 7): the
/// direct path (``ServerConnection``, the owner's session) and a sync gateway (a transaction scoped to
/// the credential's group, as ``gatewayRole``) run the same SQL, so the same limits, hashing and
/// row-level security answer either way.
extension ServerStatements {
    /// The server's copy of blob `hash` of `group`: `nil` when it has none (an unknown hash, and, in a
    /// transaction scoped to a group, any other group's).
    package static func blobHead(group: String, hash: BlobHash, on connection: PostgresConnection, logger: Logger) async throws -> BlobStatus? {
        var status: BlobStatus?
        for try await (size, received, complete) in try await connection.query(
            "SELECT size, received, complete FROM kvsync_blob_head(\(group), \(ByteBuffer(bytes: hash.bytes)))", logger: logger)
            .decode((Int64, Int64, Bool).self) {
            status = BlobStatus(size: size, received: received, complete: complete)
        }
        return status
    }

    /// Stores `bytes` at `offset` of the upload of `hash` (`size` bytes in all), within a file limit
    /// of `maxFileBytes` and a group limit of `maxGroupBytes`: what `kvsync_blob_put` answered. The
    /// chunk that brings the upload to its size completes it when the whole hashes to `hash`.
    ///
    /// - Throws: ``ReplicationError/server(_:)`` for a request the function refuses (a negative offset
    ///   or size, a chunk that ends past the size: a gateway checks these first), or an outcome this
    ///   version does not know.
    package static func blobPut(group: String, hash: BlobHash, size: Int64, offset: Int64, bytes: ByteBuffer,
                                maxFileBytes: Int64, maxGroupBytes: Int64, on connection: PostgresConnection,
                                logger: Logger) async throws -> BlobPutOutcome {
        var answer: (String, Int64)?
        for try await row in try await connection.query("""
            SELECT outcome, figure FROM kvsync_blob_put(\(group), \(ByteBuffer(bytes: hash.bytes)), \(size), \(offset), \(bytes),
                                                        \(maxFileBytes), \(maxGroupBytes))
            """, logger: logger).decode((String, Int64).self) {
            answer = row
        }
        guard let (name, figure) = answer else { throw ReplicationError.server("kvsync_blob_put gave no outcome") }
        guard let outcome = BlobPutOutcome(name: name, figure: figure) else {
            throw ReplicationError.server("kvsync_blob_put answered an outcome this version does not know: \(name.prefix(64))")
        }
        return outcome
    }

    /// Up to `length` bytes (at most ``SyncWire/BlobWire/chunkBytes``) of blob `hash` from `offset`,
    /// clipped to its size, with the size: `nil` unless the group has it complete and a current
    /// manifest row of the group names it. The statement bounds what it returns: `length` bytes.
    package static func blobRead(group: String, hash: BlobHash, offset: Int64, length: Int, on connection: PostgresConnection,
                                 logger: Logger) async throws -> (size: Int64, bytes: ByteBuffer)? {
        guard let length = Int32(exactly: length) else {
            throw ReplicationError.server("a blob read of \(length) bytes: at most \(BlobWire.chunkBytes) at a time")
        }
        var found: (size: Int64, bytes: ByteBuffer)?
        for try await (size, bytes) in try await connection.query(
            "SELECT size, data FROM kvsync_blob_read(\(group), \(ByteBuffer(bytes: hash.bytes)), \(offset), \(length))", logger: logger)
            .decode((Int64, ByteBuffer).self) {
            found = (size, bytes)
        }
        return found
    }

    /// One blob as the owner lists it (`kvtool sync blobs ls`).
    package struct ListedBlob: Sendable, Hashable {
        package var group: String
        package var hash: BlobHash
        package var status: BlobStatus
        /// Whether a current manifest row of its group names it (only then is it served).
        package var referenced: Bool
    }

    /// The blobs of `group` (every group's when `nil`), in group and hash order, as the owner sees them
    /// (the tables' owner bypasses row-level security): at most `limit`.
    package static func blobList(group: String?, limit: Int, on connection: PostgresConnection, logger: Logger) async throws -> [ListedBlob] {
        var listed: [ListedBlob] = []
        for try await (group, hash, size, received, complete, referenced) in try await connection.query("""
            SELECT b.group_id, b.sha256, b.size, b.received, b.complete,
                   \(unescaped: ServerSchema.referencedCondition(group: "b.group_id", hash: "b.sha256"))
            FROM kvsync_blobs b WHERE \(group)::text IS NULL OR b.group_id = \(group)
            ORDER BY b.group_id, b.sha256 LIMIT \(limit)
            """, logger: logger).decode((String, ByteBuffer, Int64, Int64, Bool, Bool).self) {
            listed.append(ListedBlob(group: group, hash: try Self.blobHash(hash), status: BlobStatus(size: size, received: received, complete: complete),
                                     referenced: referenced))
        }
        return listed
    }

    /// A hash column's bytes (the table's check holds them to 32).
    static func blobHash(_ bytes: ByteBuffer) throws -> BlobHash {
        guard let hash = BlobHash(bytes: Array(bytes.readableBytesView)) else {
            throw ReplicationError.server("kvsync_blobs holds a hash of \(bytes.readableBytes) bytes")
        }
        return hash
    }

    /// A blob a collection removed, or would remove in a dry run.
    package struct CollectedBlob: Sendable, Hashable {
        package var group: String
        package var hash: BlobHash
        package var size: Int64
        /// Whether it was complete (an unreferenced blob) or an upload left unfinished.
        package var complete: Bool
    }

    /// Removes (or, with `dryRun`, lists) the blobs of every group that no one needs: uploads not
    /// touched for `uploadingGrace`, and complete blobs that no current manifest row names and that
    /// no push referenced for `unreferencedGrace` (`kvsync_blob_gc`, the owner's), in group and hash
    /// order.
    package static func blobGC(uploadingGrace: Duration, unreferencedGrace: Duration, dryRun: Bool, on connection: PostgresConnection,
                               logger: Logger) async throws -> [CollectedBlob] {
        func seconds(_ duration: Duration) -> Double {
            Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        }
        var collected: [CollectedBlob] = []
        for try await (group, hash, size, complete) in try await connection.query("""
            SELECT group_id, sha256, size, complete
            FROM kvsync_blob_gc(make_interval(secs => \(seconds(uploadingGrace))), make_interval(secs => \(seconds(unreferencedGrace))),
                                \(dryRun))
            """, logger: logger).decode((String, ByteBuffer, Int64, Bool).self) {
            collected.append(CollectedBlob(group: group, hash: try Self.blobHash(hash), size: size, complete: complete))
        }
        return collected
    }
}
#endif
