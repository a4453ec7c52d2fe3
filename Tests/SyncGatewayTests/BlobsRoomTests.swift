#if PostgreSQL
import KVStore
import NIOCore
import SyncKitPostgres
import SyncWire
@testable import SyncGateway
import Testing

/// The blobs room's answers without a database (issue 49): each chunk outcome's status and headers,
/// the unknown blob's one answer, the typed refusals' headers, the metrics' one label, and a download's
/// chunks (``BlobDownload``): each range read once, in order, and its room in the answers' budget
/// released however the download ends. The process-level suites (GatewayBlobTests, BlobAttacks) run
/// the same code against PostgreSQL.
@Suite struct BlobsRoomTests {
    static let upload = BlobRequest.Upload(offset: 1 << 20, length: 3 << 20)

    static func header(_ response: GatewayResponse, _ name: GatewayHeader) -> String? {
        response.headers.first { $0.name == name.rawValue }?.value
    }

    @Test func eachChunkOutcomeIsAnsweredWithItsStatusAndHeaders() {
        let accepted = SyncGateway.answer(.accepted(received: 2 << 20), upload: Self.upload, held: nil)
        #expect(accepted.status == .ok && Self.header(accepted, .uploadOffset) == "2097152" && Self.header(accepted, .blobComplete) == "0")
        #expect(Self.header(accepted, .uploadLength) == "3145728")
        let last = SyncGateway.answer(.accepted(received: 3 << 20), upload: Self.upload, held: nil)
        #expect(last.status == .ok && Self.header(last, .blobComplete) == "1")
        // Complete already: the server's size, whatever this upload declared.
        let complete = SyncGateway.answer(.complete, upload: Self.upload, held: BlobStatus(size: 7, received: 7, complete: true))
        #expect(complete.status == .ok && Self.header(complete, .uploadOffset) == "7" && Self.header(complete, .blobComplete) == "1")
        let offset = SyncGateway.answer(.offsetMismatch(received: 5), upload: Self.upload, held: nil)
        #expect(offset.status == .conflict && Self.header(offset, .uploadOffset) == "5" && Self.header(offset, .refusal) == "offset_mismatch")
        #expect(offset.outcome == .answered)
        let size = SyncGateway.answer(.sizeMismatch(size: 9), upload: Self.upload, held: nil)
        #expect(size.status == .conflict && Self.header(size, .uploadLength) == "9" && Self.header(size, .refusal) == "size_mismatch")
        for (outcome, status, limit) in [(BlobPutOutcome.tooLarge(limit: 100), GatewayStatus.payloadTooLarge, "100"),
                                         (.chunkTooLarge(limit: 1 << 20), .payloadTooLarge, "1048576"),
                                         (.quotaExceeded(limit: 1 << 30), .insufficientStorage, "1073741824")] {
            let answer = SyncGateway.answer(outcome, upload: Self.upload, held: nil)
            #expect(answer.status == status && Self.header(answer, .refusal) == outcome.name && Self.header(answer, .limit) == limit)
            #expect(answer.outcome == .refused(.caps))
            let line = String(buffer: answer.body)
            #expect(line.hasPrefix(outcome.name + ": ") && line.contains(limit) && line.hasSuffix("\n") && line.dropLast().firstIndex(of: "\n") == nil)
        }
        let mismatch = SyncGateway.answer(.hashMismatch, upload: Self.upload, held: nil)
        #expect(mismatch.status == .unprocessableContent && Self.header(mismatch, .refusal) == "hash_mismatch" && Self.header(mismatch, .limit) == nil)
    }

    /// The refusals the head's parser types (413 before the body) carry the same headers.
    @Test func aRefusalTypedByTheParserCarriesItsNameAndLimit() {
        let refusal = SyncGateway.Refusal(GatewayRefusal(.payloadTooLarge, "x", blobOutcome: .tooLarge(limit: 64 << 20)))
        let response = refusal.response
        #expect(response.status == .payloadTooLarge && Self.header(response, .refusal) == "too_large" && Self.header(response, .limit) == "67108864")
        #expect(SyncGateway.Refusal(GatewayRefusal(.badRequest, "x")).response.headers.isEmpty)
    }

    @Test func anUnknownBlobIsOneAnswer() {
        let unknown = SyncGateway.unknownBlob
        #expect(unknown.status == .notFound && unknown.headers.isEmpty && unknown.outcome == .answered)
        #expect(String(buffer: unknown.body) == "no such blob in this group\n")
    }

    @Test func everyBlobIsCountedUnderOneLabel() throws {
        let hash = try BlobHash(hex: String(repeating: "ab", count: 32))
        #expect(GatewayMetrics.Endpoint(uri: GatewayEndpoint.blob(hash)) == .blobs)
        #expect(GatewayMetrics.Endpoint(uri: GatewayEndpoint.blob(hash) + "?x") == .blobs)
        #expect(GatewayMetrics.Endpoint(uri: "/v1/blobs/anything") == .blobs)
        #expect(GatewayMetrics.Endpoint(uri: "/v1/blobs") == .other)
        #expect(GatewayMetrics.Endpoint.blobs.label == "blobs")
        let metrics = GatewayMetrics()
        metrics.request(.blobs, status: .partialContent, sent: 10, outcome: .answered)
        metrics.request(.blobs, status: .insufficientStorage, sent: 1, outcome: .refused(.caps))
        let text = metrics.exposition(connections: 0, inFlight: 0, liveStreams: 0, draining: false, databaseUp: true)
        #expect(text.contains("kvsync_gateway_requests_total{endpoint=\"blobs\",status=\"206\"} 1"))
        #expect(text.contains("kvsync_gateway_requests_total{endpoint=\"blobs\",status=\"507\"} 1"))
        #expect(text.contains("kvsync_gateway_requests_total{endpoint=\"blobs\",status=\"200\"} 0"))
    }

    /// A download of a range: the first read's bytes, then chunks of the room's size read at the next
    /// offset, each once, up to the range's last byte; its room released when it is let go.
    @Test func aDownloadReadsItsRangeAChunkAtATimeAndReleasesItsRoom() async throws {
        let gateway = try SyncGateway(database: try ServerURL("postgres://kv@127.0.0.1:1/kv"))
        let blob = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let reads = Locked<[(Int64, Int)]>([])
        let read: (Int64, Int) async throws -> (size: Int64, bytes: ByteBuffer)? = { offset, length in
            reads.withLock { $0.append((offset, length)) }
            return (10_000, ByteBuffer(bytes: blob[Int(offset)..<min(Int(offset) + length, blob.count)]))
        }
        do {
            let granted = try #require(gateway.reserveAnswer(upTo: 4_096))
            #expect(gateway.answerBytes == 4_096)
            // bytes=1000-9499: the first read (at 1000) gave 4,096 bytes.
            let first = ByteBuffer(bytes: blob[1_000..<5_096])
            let download = BlobDownload(room: BlobDownload.Room(gateway: gateway, bytes: granted), first: first, next: 5_096, end: 9_499, size: 10_000)
            var received: [UInt8] = []
            while let part = try await download.next(read) { received += part.readableBytesView }
            #expect(received == Array(blob[1_000...9_499]))
            #expect(reads.withLock { $0.map(\.0) } == [5_096, 9_192] && reads.withLock { $0.map(\.1) } == [4_096, 308])
        }
        #expect(gateway.answerBytes == 0)
    }

    /// A read that finds the blob gone (its manifest row removed, the credential revoked), or of
    /// another size, ends the download with an error (its connection is closed), and its room is
    /// released all the same.
    @Test func aDownloadWhoseBlobGoesEndsAndReleasesItsRoom() async throws {
        let gateway = try SyncGateway(database: try ServerURL("postgres://kv@127.0.0.1:1/kv"))
        for answer in [nil, (size: Int64(9), bytes: ByteBuffer(bytes: [1, 2]))] as [(size: Int64, bytes: ByteBuffer)?] {
            do {
                let granted = try #require(gateway.reserveAnswer(upTo: 2))
                let download = BlobDownload(room: BlobDownload.Room(gateway: gateway, bytes: granted), first: ByteBuffer(), next: 0, end: 9, size: 10)
                await #expect(throws: BlobDownload.Gone.self) { _ = try await download.next { _, _ in answer } }
            }
            #expect(gateway.answerBytes == 0)
        }
    }
}
#endif
