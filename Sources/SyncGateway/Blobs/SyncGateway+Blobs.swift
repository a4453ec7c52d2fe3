#if PostgreSQL
import Foundation
import KVStore
import Logging
import NIOCore
import PostgresNIO
import SyncKitPostgres
import SyncWire

/// The blobs room (issue 49): `HEAD`, `PUT` and `GET /v1/blobs/HASH`, the bytes of a group's files by
/// their hash. A request is admitted as every other one is (its credential and rate from its head,
/// a `PUT`'s chunk and declared size within their limits before a byte of its body is read:
/// ``GatewayRequestHead``), then runs the schema's `kvsync_blob_*` functions
/// (``ServerStatements/blobHead(group:hash:on:logger:)`` and its siblings, the direct path's own SQL)
/// in a transaction scoped to its credential's group, so that PostgreSQL's row-level security keeps
/// each group to its own blobs whatever this code does. Another group's hash answers exactly as an
/// unknown one, byte for byte.
extension SyncGateway {
    /// The answer to a blob nobody of this group has (unknown, or another group's, or not served:
    /// incomplete, or named by no current manifest row of the group): the same bytes whichever, so
    /// that it tells nothing of other groups. Counted as answered (a device asks before its first
    /// upload), not as a refusal.
    static var unknownBlob: GatewayResponse {
        GatewayResponse(status: .notFound, body: ByteBuffer(string: BlobRequest.unknownBlobLine + "\n"))
    }

    /// A blob's `PUT` of a credential that may not write (read-only, or naming no device), refused
    /// from what its admission verified, before its body is read. The chunk's own transaction checks
    /// again (the credential may have changed since).
    func refuseBlobBeforeBody(_ request: Admitted) -> GatewayResponse? {
        guard case .blob(let blob) = request.head.operation, blob.verb == .put else { return nil }
        let known: Principal? = switch request.credential {
        case .verified(let principal): principal
        case .token(let hash): verified.recent(hash)
        }
        return known.flatMap(Self.uploadRefusal)?.response
    }

    /// Why `principal` may not upload, if it may not: a credential that pulls only.
    static func uploadRefusal(_ principal: Principal) -> Refusal? {
        if principal.readOnly { return Refusal(status: .forbidden, line: "the credential is read-only: it downloads files and never uploads them") }
        if principal.device == nil { return Refusal(status: .forbidden, line: "the credential names no device: it downloads files and never uploads them") }
        return nil
    }

    /// Answers an admitted blob request; a `GET`'s body is streamed from the database a chunk at a
    /// time (``BlobDownload``).
    @inline(never)
    func respond(to blob: BlobRequest, of request: Admitted, body: ByteBuffer, from source: SourceAddress) async -> GatewayResponse {
        do {
            switch blob.verb {
            case .head:
                let status = try await scoped(request) { principal, connection, logger in
                    try await ServerStatements.blobHead(group: principal.group, hash: blob.hash, on: connection, logger: logger)
                }
                guard let status else { return Self.unknownBlob }
                return Self.held(status.received, of: status.size, complete: status.complete)
            case .put:
                guard let upload = blob.upload else { return .refusal(.badRequest, "a blob's PUT needs Upload-Offset and Upload-Length") }
                let (maxFileBytes, maxGroupBytes) = (options.limits.maxFileBytes, options.limits.maxGroupBlobBytes)
                let (outcome, held) = try await scoped(request) { principal, connection, logger -> (BlobPutOutcome, BlobStatus?) in
                    if let refusal = Self.uploadRefusal(principal) { throw refusal }
                    let outcome = try await ServerStatements.blobPut(group: principal.group, hash: blob.hash, size: upload.length,
                                                                     offset: upload.offset, bytes: body, maxFileBytes: maxFileBytes,
                                                                     maxGroupBytes: maxGroupBytes, on: connection, logger: logger)
                    // Complete already: its size is the server's, whatever this upload declared.
                    guard outcome == .complete else { return (outcome, nil) }
                    return (outcome, try await ServerStatements.blobHead(group: principal.group, hash: blob.hash, on: connection, logger: logger))
                }
                return Self.answer(outcome, upload: upload, held: held)
            case .get:
                return try await download(blob, of: request)
            }
        } catch {
            return refusal(for: error, from: source)
        }
    }

    /// `body` in one transaction scoped to `request`'s credential (its group and device, as the
    /// gateway's role), as a push's and a pull's are. `first`: the request's first transaction, which
    /// checks the credential's group and rate unless its admission did; a download's later chunks
    /// check its group again (a token is looked up again in each: one revoked meanwhile ends it).
    func scoped<Result: Sendable>(_ request: Admitted, first: Bool = true,
                                  _ body: @escaping @Sendable (Principal, PostgresConnection, Logger) async throws -> Result) async throws -> Result {
        let logger = options.logger
        let client = try await pool(for: request.head.group)
        let started = ContinuousClock.now
        defer { metrics.transaction(ContinuousClock.now - started) }
        return try await client.withTransaction(logger: logger) { [self] connection -> Result in
            let principal = try await self.principal(of: request.credential, install: request.head.install, on: connection, logger: logger)
            if first && !request.counted {
                try check(principal, against: request.head)
            } else if principal.group != request.head.group {
                throw Refusal(status: .forbidden, line: "the credential is for another group than \(request.head.group)")
            }
            return try await body(principal, connection, logger)
        }
    }

    /// 200 with where the server's copy stands (a `HEAD`'s answer, and an accepted chunk's).
    static func held(_ received: Int64, of size: Int64, complete: Bool) -> GatewayResponse {
        var response = GatewayResponse(status: .ok, body: ByteBuffer())
        response.headers = [(GatewayHeader.uploadOffset.rawValue, String(received)), (GatewayHeader.uploadLength.rawValue, String(size)),
                            (GatewayHeader.blobComplete.rawValue, complete ? "1" : "0")]
        return response
    }

    /// A chunk's answer: 200 with the offset the upload is at; 409 with the offset (or the size) the
    /// server has; a typed refusal (413, 507, 422) with its name, limit and line.
    static func answer(_ outcome: BlobPutOutcome, upload: BlobRequest.Upload, held: BlobStatus?) -> GatewayResponse {
        switch outcome {
        case .accepted(let received):
            return Self.held(received, of: upload.length, complete: received == upload.length)
        case .complete:
            let size = held?.size ?? upload.length
            return Self.held(size, of: size, complete: true)
        case .offsetMismatch(let received):
            var response = GatewayResponse(status: .conflict, body: ByteBuffer(string: "offset_mismatch: the server holds this upload up to byte \(received); send from there\n"))
            response.headers = [(GatewayHeader.refusal.rawValue, outcome.name), (GatewayHeader.uploadOffset.rawValue, String(received))]
            return response
        case .sizeMismatch(let size):
            var response = GatewayResponse(status: .conflict, body: ByteBuffer(string: "size_mismatch: the server has this blob with a size of \(size) bytes, not \(upload.length)\n"))
            response.headers = [(GatewayHeader.refusal.rawValue, outcome.name), (GatewayHeader.uploadLength.rawValue, String(size))]
            return response
        case .tooLarge, .chunkTooLarge, .quotaExceeded, .hashMismatch:
            let status = BlobRequest.status(outcome)
            let reason: GatewayMetrics.RefusalReason = outcome == .hashMismatch ? .protocol : .caps
            return GatewayResponse.refusal(status, BlobRequest.line(outcome) ?? outcome.name, reason: reason).typed(outcome)
        }
    }

    /// A `GET`: the blob's first chunk is read (with its size, only if the group serves it), the range
    /// resolved against the size, and the rest streamed a chunk at a time, each read in its own
    /// transaction once the previous one is in the socket. The room for one chunk is reserved in the
    /// answers' budget (``Limits/maxAnswerBytes``) before anything is read, and held until the answer
    /// ends: a download holds one chunk at a time, whatever the blob's size.
    func download(_ blob: BlobRequest, of request: Admitted) async throws -> GatewayResponse {
        guard let granted = reserveAnswer(upTo: BlobWire.chunkBytes) else { return busyWriting }
        let room = BlobDownload.Room(gateway: self, bytes: granted)
        // The first read is where the range starts when it says so (within the largest file: a first
        // byte further is past any blob's end, and the size is read at the start), else at the start.
        var probe: Int64 = 0
        if case .from(let first, _)? = blob.range, first <= options.limits.maxFileBytes { probe = first }
        let read = try await scoped(request) { [probe] principal, connection, logger in
            try await ServerStatements.blobRead(group: principal.group, hash: blob.hash, offset: probe, length: granted, on: connection, logger: logger)
        }
        guard let read else { return Self.unknownBlob }
        let (size, firstBytes) = read
        let range: ClosedRange<Int64>
        if let asked = blob.range {
            guard let resolved = asked.resolved(size: size) else {
                var response = GatewayResponse.refusal(.rangeNotSatisfiable, "the range starts past the blob's end (\(size) bytes)")
                response.headers = [(GatewayHeader.contentRange.rawValue, ByteRangeRequest.unsatisfied(size: size))]
                return response
            }
            range = resolved
        } else {
            guard size > 0 else { return GatewayResponse(status: .ok, body: ByteBuffer(), contentType: "application/octet-stream") }
            range = 0...(size - 1)
        }
        // What the first read holds of the range (nothing, when the range starts elsewhere: a suffix).
        var first = ByteBuffer()
        if range.lowerBound >= probe && range.lowerBound - probe < Int64(firstBytes.readableBytes) {
            let skip = Int(range.lowerBound - probe)
            let take = Int(min(Int64(firstBytes.readableBytes - skip), range.upperBound - range.lowerBound + 1))
            first = firstBytes.getSlice(at: firstBytes.readerIndex + skip, length: take) ?? ByteBuffer()
        }
        let state = BlobDownload(room: room, first: first, next: range.lowerBound + Int64(first.readableBytes), end: range.upperBound, size: size)
        var response = GatewayResponse(status: blob.range == nil ? .ok : .partialContent, body: ByteBuffer(), contentType: "application/octet-stream")
        if blob.range != nil {
            response.headers = [(GatewayHeader.contentRange.rawValue, ByteRangeRequest.contentRange(range, size: size))]
        }
        response.streamed = (Int(range.upperBound - range.lowerBound + 1), { [self] in
            try await state.next { offset, length in
                try await self.scoped(request, first: false) { principal, connection, logger in
                    try await ServerStatements.blobRead(group: principal.group, hash: blob.hash, offset: offset, length: length,
                                                        on: connection, logger: logger)
                }
            }
        })
        return response
    }
}

extension GatewayResponse {
    /// This answer with a blob's typed refusal's headers (``GatewayHeader/refusal``, and
    /// ``GatewayHeader/limit`` when it names one), or as it is without one.
    func typed(_ outcome: BlobPutOutcome?) -> GatewayResponse {
        guard let outcome else { return self }
        var response = self
        response.headers.append((GatewayHeader.refusal.rawValue, outcome.name))
        switch outcome {
        case .tooLarge(let limit), .chunkTooLarge(let limit), .quotaExceeded(let limit):
            response.headers.append((GatewayHeader.limit.rawValue, String(limit)))
        case .accepted, .complete, .offsetMismatch, .sizeMismatch, .hashMismatch:
            break
        }
        return response
    }
}
#endif
