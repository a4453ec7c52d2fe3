#if PostgreSQL
import Crypto
import Foundation
import KVStore
import SyncKit
@testable import SyncKitPostgres
import SyncWire
@testable import PostgresTesting
import TestSupport
import SyncTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A file's bytes through a real `kvtool sync gateway` process (issue 49): the device's side
/// (``GatewayConnection`` as a ``BlobServer``) uploads in chunks and reads back, and a plain HTTP
/// client downloads whole and by ranges; every way gives the same bytes.
@Suite(.serialized) struct GatewayBlobTests {
    @Test func aFileUploadedInChunksDownloadsIdenticalWholeAndByRange() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = "group.com.example.gateway.blobs"
        let (gateway, url) = try await startGateway(cluster)
        defer { gateway.kill(SIGKILL) }
        let token = try await issueToken(cluster, ["--group", group, "--device", "a"])
        let connection = try GatewayConnection(url: SyncGatewayURL(url), token: token, group: group, maxValueBytes: 1 << 20,
                                               operationTimeout: .seconds(60), connectTimeout: .seconds(10))
        let server: any BlobServer = connection
        // Two whole chunks and part of a third.
        var state: UInt64 = 49
        let file = (0..<(5 << 19) + 123).map { _ -> UInt8 in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        let size = Int64(file.count)
        let hash = BlobHash(bytes: Array(SHA256.hash(data: file)))!
        #expect(try await server.blobStatus(group: group, hash: hash) == nil)
        var offset = 0
        var outcomes: [BlobPutOutcome] = []
        while offset < file.count {
            let end = min(offset + BlobWire.chunkBytes, file.count)
            outcomes.append(try await server.putBlobChunk(group: group, hash: hash, size: size, offset: Int64(offset), bytes: Array(file[offset..<end])))
            if offset == 0 {
                #expect(try await server.blobStatus(group: group, hash: hash) == BlobStatus(size: size, received: 1 << 20, complete: false))
            }
            offset = end
        }
        #expect(outcomes == [.accepted(received: 1 << 20), .accepted(received: 2 << 20), .accepted(received: size)])
        #expect(try await server.blobStatus(group: group, hash: hash) == BlobStatus(size: size, received: size, complete: true))
        // A chunk sent again once complete writes nothing; a chunk at the wrong offset of another upload
        // is told where that upload is.
        #expect(try await server.putBlobChunk(group: group, hash: hash, size: size, offset: 0, bytes: Array(file[0..<10])) == .complete)
        let other = BlobHash(bytes: Array(SHA256.hash(data: [1, 2, 3])))!
        #expect(try await server.putBlobChunk(group: group, hash: other, size: 3, offset: 1, bytes: [2]) == .offsetMismatch(received: 0))
        // Complete, but no manifest row names it yet: not served.
        #expect(try await server.readBlob(group: group, hash: hash, offset: 0, length: 10) == nil)

        let entry = FileManifestEntry(sha256: Data(hash.bytes), size: size, type: "image/png", modified: 0)
        let row = OutgoingChange(kind: "collection", name: BlobWire.manifestCollection, key: Array("TrainerImages/t.png".utf8),
                                 value: try CBOREncoder().encode(entry), clock: HybridTimestamp(date: Date()).rawValue, base: 0, token: 1)
        let pushed = try await connection.push(group: group, device: "a", changes: [row], maxClockSkew: .seconds(60))
        #expect(pushed.count == 1)
        if case .applied? = pushed.first {} else { Issue.record("the manifest row was not applied: \(pushed)") }

        // Read back a chunk at a time through the device's side.
        var read: [UInt8] = []
        while read.count < file.count {
            let part = try #require(try await server.readBlob(group: group, hash: hash, offset: Int64(read.count), length: BlobWire.chunkBytes))
            #expect(part.size == size && !part.bytes.isEmpty)
            read += part.bytes
        }
        #expect(read == file)
        let tail = try #require(try await server.readBlob(group: group, hash: hash, offset: size - 10, length: 100))
        #expect(tail.size == size && tail.bytes == Array(file.suffix(10)))
        let past = try #require(try await server.readBlob(group: group, hash: hash, offset: size, length: 100))
        #expect(past.size == size && past.bytes.isEmpty)

        // Whole, and by ranges across the chunks' boundaries, with a plain HTTP client.
        let headers = ["Authorization: Bearer \(token)", "\(GatewayWire.groupHeader): \(group)"]
        func get(_ range: String?) async throws -> RawHTTP.Answer {
            try await offPool { try RawHTTP.request(url, "GET \(GatewayEndpoint.blob(hash))", headers: headers + (range.map { ["Range: \($0)"] } ?? [])) }
        }
        let whole = try await get(nil)
        #expect(whole.status == 200 && whole.body == file && whole.header("Content-Length") == String(file.count))
        for (range, first, last) in [("bytes=1000-2100000", 1_000, 2_100_000), ("bytes=-5000", file.count - 5_000, file.count - 1),
                                     ("bytes=2097151-", 2_097_151, file.count - 1), ("bytes=0-0", 0, 0),
                                     ("bytes=1048576-99999999999", 1_048_576, file.count - 1)] {
            let answer = try await get(range)
            #expect(answer.status == 206 && answer.body == Array(file[first...last]), "\(range): \(answer.status) \(answer.body.count) bytes")
            #expect(answer.header("Content-Range") == "bytes \(first)-\(last)/\(file.count)", "\(range)")
        }
        let unsatisfied = try await get("bytes=\(file.count)-")
        #expect(unsatisfied.status == 416 && unsatisfied.header("Content-Range") == "bytes */\(file.count)")
        await connection.close()
    }
}
#endif
