#if PostgreSQL
import SyncWire

/// What a device asks of its server for the files of its container (issue 49): PostgreSQL itself
/// (``ServerConnection``, the direct path, over the schema's `kvsync_blob_*` functions) or a sync
/// gateway (``GatewayConnection``, `HEAD`/`PUT`/`GET /v1/blobs/HASH`). The same steps either way.
protocol BlobServer: AnyObject, Sendable {
    /// The server's copy of blob `hash` of `group`: `nil` when it has none. Another group's blob
    /// answers exactly as an unknown one.
    func blobStatus(group: String, hash: BlobHash) async throws -> BlobStatus?
    /// Writes `bytes` (at most ``BlobWire/chunkBytes``) at `offset` of the upload of `hash`, `size`
    /// bytes in all; the last chunk completes it once the whole hashes to `hash`.
    func putBlobChunk(group: String, hash: BlobHash, size: Int64, offset: Int64, bytes: [UInt8]) async throws -> BlobPutOutcome
    /// Up to `length` bytes (at most ``BlobWire/chunkBytes``) of the complete blob `hash` from `offset`,
    /// with the blob's size; `nil` unless the group has that blob complete and a current manifest row
    /// of the group names it.
    func readBlob(group: String, hash: BlobHash, offset: Int64, length: Int) async throws -> (size: Int64, bytes: [UInt8])?
}
#endif
