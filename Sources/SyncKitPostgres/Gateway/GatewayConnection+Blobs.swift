#if PostgreSQL
import NIOCore
import NIOHTTP1
import SyncWire

/// The device's side of the gateway's blobs (issue 49): `HEAD`, `PUT` and `GET /v1/blobs/HASH` on the
/// connection's kept-alive connections, each within the operation's deadline. The gateway's answers
/// are read back into the same values the direct path's statements give (``BlobStatus``,
/// ``BlobPutOutcome``), so that the replicator does not know which path it is on.
extension GatewayConnection: BlobServer {
    func blobStatus(group: String, hash: BlobHash) async throws -> BlobStatus? {
        try checkGroup(group)
        let (status, headers, answer) = try await exchange(.HEAD, GatewayEndpoint.blob(hash), body: nil)
        switch status {
        case .ok:
            answered?.withLock { $0 = .now }
            let received = try Self.number(headers, .uploadOffset), size = try Self.number(headers, .uploadLength)
            guard let complete = headers.first(name: GatewayHeader.blobComplete.rawValue), complete == "0" || complete == "1",
                  received <= size else {
                throw ReplicationError.server("the sync gateway's answer to a blob's HEAD is malformed")
            }
            return BlobStatus(size: size, received: received, complete: complete == "1")
        case .notFound: return nil
        default: throw Self.refusal(status, headers, answer)
        }
    }

    func putBlobChunk(group: String, hash: BlobHash, size: Int64, offset: Int64, bytes: [UInt8]) async throws -> BlobPutOutcome {
        try checkGroup(group)
        try Self.checkOffset(offset, bytes.count)
        let (status, headers, answer) = try await exchange(
            .PUT, GatewayEndpoint.blob(hash),
            headers: [(GatewayHeader.uploadOffset.rawValue, String(offset)), (GatewayHeader.uploadLength.rawValue, String(size))],
            body: bytes, contentType: "application/octet-stream")
        let refusal = headers.first(name: GatewayHeader.refusal.rawValue)
        switch (status, refusal) {
        case (.ok, _):
            answered?.withLock { $0 = .now }
            let received = try Self.number(headers, .uploadOffset)
            // A chunk that found the blob complete already wrote nothing (the gateway answers with the
            // blob's end, not this chunk's); one that completed it is accepted.
            let complete = headers.first(name: GatewayHeader.blobComplete.rawValue) == "1"
            return complete && received != offset + Int64(bytes.count) ? .complete : .accepted(received: received)
        case (.conflict, "offset_mismatch"?): return .offsetMismatch(received: try Self.number(headers, .uploadOffset))
        case (.conflict, "size_mismatch"?): return .sizeMismatch(size: try Self.number(headers, .uploadLength))
        case (.payloadTooLarge, let name?), (.insufficientStorage, let name?), (.unprocessableEntity, let name?):
            // A typed refusal: its name and limit, when they are one this status answers.
            let limit = name == BlobPutOutcome.hashMismatch.name ? 0 : try Self.number(headers, .limit)
            guard let outcome = BlobPutOutcome(name: name, figure: limit), BlobRequest.status(outcome).rawValue == Int(status.code) else {
                throw Self.refusal(status, headers, answer)
            }
            return outcome
        default:
            throw Self.refusal(status, headers, answer)
        }
    }

    func readBlob(group: String, hash: BlobHash, offset: Int64, length: Int) async throws -> (size: Int64, bytes: [UInt8])? {
        try checkGroup(group)
        try Self.checkOffset(offset, length)
        // A range of at least one byte (HTTP has no empty one): the answer is cut to `length` here.
        let range = ByteRangeRequest.from(offset, through: offset + Int64(max(length, 1)) - 1)
        let (status, headers, answer) = try await exchange(.GET, GatewayEndpoint.blob(hash), headers: [(GatewayHeader.range.rawValue, range.text)],
                                                          body: nil)
        switch status {
        case .partialContent, .rangeNotSatisfiable:
            // 206: the range asked for, from `offset`; 416: `offset` is at or past the end (`bytes */SIZE`),
            // and the answer's body is the refusal's line.
            guard let text = headers.first(name: GatewayHeader.contentRange.rawValue), case let (served, size)? = ByteRangeRequest.parseContentRange(text),
                  status == .partialContent
                    ? served?.lowerBound == offset && answer.count == served.map({ Int($0.upperBound - $0.lowerBound + 1) })
                    : served == nil && offset >= size else {
                throw ReplicationError.server("the sync gateway's answer to a blob's GET is malformed")
            }
            answered?.withLock { $0 = .now }
            return (size, status == .partialContent ? Array(answer.prefix(length)) : [])
        case .notFound:
            // The one answer for a blob this group may not read; a gateway from before files answers
            // its path with another 404, which is no reason to wait for the file.
            guard Self.line(answer) == BlobRequest.unknownBlobLine else {
                throw ReplicationError.server("the sync gateway does not serve files (\(Self.line(answer))): it is older than this device")
            }
            return nil
        default: throw Self.refusal(status, headers, answer)
        }
    }

    /// A chunk of `count` bytes (at most ``BlobWire/chunkBytes``) at `offset` (0 or more, its end under
    /// 2^63).
    private static func checkOffset(_ offset: Int64, _ count: Int) throws {
        guard offset >= 0, offset <= Int64.max - Int64(BlobWire.chunkBytes), (0...BlobWire.chunkBytes).contains(count) else {
            throw ReplicationError.server("a blob moves at most \(BlobWire.chunkBytes) bytes at a time, at an offset from 0 to 2^63 - 1 MiB")
        }
    }

    /// This connection's credential is for its group: another one's blobs are not asked for on it.
    private func checkGroup(_ asked: String) throws {
        guard asked == group else { throw ReplicationError.credentialRefused("it is for another group than \(asked)") }
    }

    /// Header `name` of a gateway's answer: a number of bytes, or the answer is malformed.
    static func number(_ headers: HTTPHeaders, _ name: GatewayHeader) throws -> Int64 {
        guard let text = headers.first(name: name.rawValue), let value = try? BlobRequest.number(text, name.rawValue) else {
            throw ReplicationError.server("the sync gateway's answer has no \(name.rawValue) number")
        }
        return value
    }
}
#endif
