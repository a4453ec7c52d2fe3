#if PostgreSQL
import KVStore
import NIOCore

/// One `GET` of a blob being streamed (``SyncGateway/download(_:of:)``): where it is, and the room it
/// holds in the gateway's budget for answers, released when the answer is done with (written,
/// abandoned, or its connection lost), whichever way it ends.
final class BlobDownload: Sendable {
    /// Bytes of ``SyncGateway/Limits/maxAnswerBytes`` held for one chunk of the download.
    final class Room: Sendable {
        let gateway: SyncGateway
        let bytes: Int

        init(gateway: SyncGateway, bytes: Int) { (self.gateway, self.bytes) = (gateway, bytes) }

        deinit { gateway.countAnswer(-bytes) }
    }

    /// The blob was removed from what the group serves (its manifest row deleted), or changed size, or
    /// the credential was refused, while it was being sent: the connection is closed, and the device
    /// asks again from where it got to.
    struct Gone: Error {}

    let room: Room
    /// The blob's size, as the first read found it.
    let size: Int64
    /// The range's last byte.
    let end: Int64
    /// The first read's bytes of the range (handed out first), and the offset of the next read.
    private let position: Locked<(first: ByteBuffer?, next: Int64)>

    init(room: Room, first: ByteBuffer, next: Int64, end: Int64, size: Int64) {
        (self.room, self.end, self.size) = (room, end, size)
        position = Locked<(first: ByteBuffer?, next: Int64)>((first: first.readableBytes > 0 ? first : nil, next: next))
    }

    /// The next part of the range: the first read's, then a chunk (the room's size at most) read by
    /// `read(offset, length)`; `nil` once the range is sent.
    func next(_ read: (Int64, Int) async throws -> (size: Int64, bytes: ByteBuffer)?) async throws -> ByteBuffer? {
        let (first, offset) = position.withLock { position in
            defer { position.first = nil }
            return (position.first, position.next)
        }
        if let first { return first }
        guard offset <= end else { return nil }
        let length = Int(min(Int64(room.bytes), end - offset + 1))
        guard let read = try await read(offset, length), read.size == size, read.bytes.readableBytes == length else { throw Gone() }
        position.withLock { $0.next = offset + Int64(length) }
        return read.bytes
    }
}
#endif
