#if PostgreSQL
import Crypto
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import SyncTestSupport
import SyncWire
import PostgresTesting
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The blob endpoints (issue 49) against a device that lies: another group's hash, offsets past the
/// end, overlapping chunks, lengths of 2^63, hashes of the wrong form, bodies over the chunk, a
/// read-only credential's upload, a group over its quota, bytes that do not hash to their name. A real
/// gateway process in front of a real PostgreSQL, through the wire format.
@Suite(.serialized) struct BlobAttacks {
    /// Deterministic bytes that differ from chunk to chunk (xorshift).
    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var state = seed | 1
        return (0..<count).map { _ in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
    }

    static func hash(_ bytes: [UInt8]) -> BlobHash { BlobHash(bytes: Array(SHA256.hash(data: bytes)))! }

    /// A change of the manifest naming `bytes` at `path`.
    static func manifestRow(_ path: String, _ bytes: [UInt8], token: UInt64) throws -> OutgoingChange {
        let entry = FileManifestEntry(sha256: Data(Array(SHA256.hash(data: bytes))), size: Int64(bytes.count), type: "image/png", modified: 0)
        return OutgoingChange(kind: "collection", name: BlobWire.manifestCollection, key: Array(path.utf8), value: try CBOREncoder().encode(entry),
                              clock: HybridTimestamp(date: Date()).rawValue, base: 0, token: token)
    }

    @Test func anotherGroupsBlobIsAnsweredByteForByteAsAnUnknownOne() async throws {
        let arena = try await Arena("blob-groups")
        let victim = try await arena.token(["--device", "victim"])
        let picture = Self.bytes(300_000, seed: 7)
        let hash = Self.hash(picture)
        #expect(try await arena.upload(picture, victim) == 300_000)
        let pushed = try await arena.push(victim, changes: [try Self.manifestRow("TrainerImages/a.png", picture, token: 1)])
        #expect(pushed.status == 200)
        // Its own group gets it.
        let own = try await arena.blob("GET", hash, victim)
        #expect(own.status == 200 && own.body == picture, "\(own.status) \(own.text.prefix(200))")

        let theirs = "group.com.example.adversary.blob-attacker"
        let attacker = try await issueToken(arena.cluster, ["--group", theirs, "--device", "attacker"])
        let headers = ["Authorization: Bearer \(attacker)", "\(GatewayWire.groupHeader): \(theirs)"]
        let unknown = Self.hash(Self.bytes(10, seed: 8))
        for (method, extra) in [("HEAD", []), ("GET", []), ("GET", ["Range: bytes=0-9"]), ("GET", ["Range: bytes=-1"]),
                                ("GET", ["Range: bytes=299990-"])] as [(String, [String])] {
            let asked = try await arena.raw("\(method) \(GatewayEndpoint.blob(hash))", headers + extra)
            let none = try await arena.raw("\(method) \(GatewayEndpoint.blob(unknown))", headers + extra)
            #expect(asked == none, "\(method) \(extra): \(String(decoding: asked, as: UTF8.self)) vs \(String(decoding: none, as: UTF8.self))")
            #expect(String(decoding: asked.prefix(12), as: UTF8.self) == "HTTP/1.1 404", "\(String(decoding: asked, as: UTF8.self))")
        }
        // No deduplication across groups: the attacker's copy of the same bytes is its own upload, and
        // the victim's blob is as it was.
        let copy = try await arena.upload(picture, attacker, group: theirs)
        #expect(copy == 300_000)
        #expect(try await arena.count("SELECT count(*) FROM kvsync_blobs WHERE sha256 = '\\x\(hash.hex)'") == 2)
        #expect(try await arena.blob("GET", hash, victim).body == picture)
        // The attacker's complete copy is still not served to it: no manifest row of its group names it.
        #expect(try await arena.raw("GET \(GatewayEndpoint.blob(hash))", headers) == arena.raw("GET \(GatewayEndpoint.blob(unknown))", headers))
    }

    @Test func lyingUploadsAreRefusedBeforeTheirBodyAndNothingHalfWrittenIsServed() async throws {
        let arena = try await Arena("blob-lies", gatewayArguments: ["--max-file-bytes", "3000000", "--max-group-blob-bytes", "4000000"])
        let writer = try await arena.token(["--device", "w"])
        let reader = try await arena.token(["--device", "r", "--read-only"])
        let file = Self.bytes(2_500, seed: 1)
        let hash = Self.hash(file)
        let target = GatewayEndpoint.blob(hash)

        // A hash of the wrong length, with upper-case digits, or another character: 400 in one line.
        for text in [String(hash.hex.dropLast()), hash.hex + "0", hash.hex.uppercased(), String(hash.hex.dropLast()) + "g"] {
            for method in ["HEAD", "GET", "PUT"] {
                let answer = try await arena.headOnly("\(method) /v1/blobs/\(text)", writer, length: method == "PUT" ? 10 : 0)
                // (A HEAD's answer has no body: its line is the GET's.)
                #expect(answer.status == 400 && (method == "HEAD" ? answer.body.isEmpty
                            : answer.text.hasPrefix("a blob hash is 64 lower-case hex digits") && answer.text.split(separator: "\n").count == 1),
                        "\(method) \(text): \(answer.status) \(answer.text)")
            }
        }
        // Refused from the head alone (the body is never sent): a chunk over 1 MiB, a file over the
        // gateway's largest, a read-only credential's upload, each before a byte of the body.
        let chunk = try await arena.headOnly("PUT \(target)", writer, length: (1 << 20) + 1, ["Upload-Offset: 0", "Upload-Length: 2000000"])
        #expect(chunk.status == 413 && chunk.header("KVSync-Refusal") == "chunk_too_large" && chunk.header("KVSync-Limit") == "1048576", "\(chunk.status) \(chunk.text)")
        let large = try await arena.headOnly("PUT \(target)", writer, length: 1_000, ["Upload-Offset: 0", "Upload-Length: 3000001"])
        #expect(large.status == 413 && large.header("KVSync-Refusal") == "too_large" && large.header("KVSync-Limit") == "3000000"
                && large.text.contains("3000000 bytes"), "\(large.status) \(large.text)")
        let readOnly = try await arena.headOnly("PUT \(target)", reader, length: 1_000, ["Upload-Offset: 0", "Upload-Length: 2500"])
        #expect(readOnly.status == 403 && readOnly.text.contains("read-only"), "\(readOnly.status) \(readOnly.text)")
        // Lengths and offsets that are not numbers of bytes: 2^63, 2^63 - 1 (a number, over the limit), a sign, an exponent.
        for (offset, length, status) in [("0", "9223372036854775808", 400), ("0", "9223372036854775807", 413), ("-1", "2500", 400),
                                          ("1e3", "2500", 400), ("9223372036854775808", "2500", 400), ("2500", "2500", 400)] {
            let answer = try await arena.blob("PUT", hash, writer, ["Upload-Offset: \(offset)", "Upload-Length: \(length)"], body: [1])
            #expect(answer.status == status && answer.text.split(separator: "\n").count == 1, "\(offset)/\(length): \(answer.status) \(answer.text)")
        }
        #expect(try await arena.count("SELECT count(*) FROM kvsync_blobs") == 0)

        // Offsets past the end, a gap, overlapping chunks, another size: the server's offset wins.
        func put(_ offset: Int, _ count: Int, size: Int = 2_500, bytes: [UInt8]? = nil) async throws -> RawHTTP.Answer {
            try await arena.blob("PUT", hash, writer, ["Upload-Offset: \(offset)", "Upload-Length: \(size)"],
                                 body: bytes ?? Array(file[offset..<min(offset + count, file.count)]))
        }
        let first = try await put(0, 1_000)
        #expect(first.status == 200 && first.header("Upload-Offset") == "1000" && first.header("KVSync-Blob-Complete") == "0", "\(first.status) \(first.text)")
        let past = try await put(2_000, 1_000, bytes: [UInt8](repeating: 9, count: 1_000))
        #expect(past.status == 400, "\(past.status) \(past.text)")
        for (offset, count) in [(2_000, 500), (500, 1_000), (0, 1_000), (999, 1)] {
            let answer = try await put(offset, count)
            #expect(answer.status == 409 && answer.header("KVSync-Refusal") == "offset_mismatch" && answer.header("Upload-Offset") == "1000",
                    "\(offset)+\(count): \(answer.status) \(answer.text)")
        }
        let resized = try await put(1_000, 100, size: 2_600)
        #expect(resized.status == 409 && resized.header("KVSync-Refusal") == "size_mismatch" && resized.header("Upload-Length") == "2500",
                "\(resized.status) \(resized.text)")
        // Half written: HEAD says where it is, GET serves nothing of it.
        let half = try await arena.blob("HEAD", hash, writer)
        #expect(half.status == 200 && half.header("Upload-Offset") == "1000" && half.header("Upload-Length") == "2500"
                && half.header("KVSync-Blob-Complete") == "0")
        #expect(try await arena.blob("GET", hash, writer).status == 404)
        let last = try await put(1_000, 1_500)
        #expect(last.status == 200 && last.header("Upload-Offset") == "2500" && last.header("KVSync-Blob-Complete") == "1", "\(last.status) \(last.text)")
        // A read-only credential reads what it may: HEAD and GET.
        #expect(try await arena.blob("HEAD", hash, reader).header("KVSync-Blob-Complete") == "1")
        #expect(try await arena.push(writer, changes: [try Self.manifestRow("a.png", file, token: 1)]).status == 200)
        let served = try await arena.blob("GET", hash, reader)
        #expect(served.status == 200 && served.body == file)
        let ranged = try await arena.blob("GET", hash, reader, ["Range: bytes=2400-99999"])
        #expect(ranged.status == 206 && ranged.body == Array(file[2_400...]) && ranged.header("Content-Range") == "bytes 2400-2499/2500")
        let beyond = try await arena.blob("GET", hash, reader, ["Range: bytes=2500-"])
        #expect(beyond.status == 416 && beyond.header("Content-Range") == "bytes */2500" && beyond.body.count < 200)
        for range in ["bytes=0-1,5-6", "bytes=9-3", "bytes=x-"] {
            #expect(try await arena.blob("GET", hash, reader, ["Range: \(range)"]).status == 400, "\(range)")
        }

        // Bytes that do not hash to their name: refused at the last byte, and nothing of them kept.
        let liar = Self.hash(Self.bytes(2_000, seed: 3))
        let forged = Self.bytes(2_000, seed: 4)
        let forgedAnswer = try await arena.blob("PUT", liar, writer, ["Upload-Offset: 0", "Upload-Length: 2000"], body: forged)
        #expect(forgedAnswer.status == 422 && forgedAnswer.header("KVSync-Refusal") == "hash_mismatch", "\(forgedAnswer.status) \(forgedAnswer.text)")
        #expect(try await arena.blob("HEAD", liar, writer).status == 404)

        // The group's quota (4,000,000 bytes): an upload in flight counts its whole size from its
        // first chunk, and one that would pass the quota is refused with its limit.
        let big = Self.bytes(3_000_000, seed: 5)
        let bigChunk = try await arena.blob("PUT", Self.hash(big), writer, ["Upload-Offset: 0", "Upload-Length: 3000000"], body: Array(big[0..<(1 << 20)]))
        #expect(bigChunk.status == 200, "\(bigChunk.status) \(bigChunk.text)")
        let over = Self.bytes(1_000_000, seed: 6)
        let quota = try await arena.blob("PUT", Self.hash(over), writer, ["Upload-Offset: 0", "Upload-Length: 1000000"], body: Array(over[0..<1_000]))
        #expect(quota.status == 507 && quota.header("KVSync-Refusal") == "quota_exceeded" && quota.header("KVSync-Limit") == "4000000"
                && quota.text.contains("4000000 bytes"), "\(quota.status) \(quota.text)")
        // What is on the server: the complete file and the upload in flight, nothing else.
        #expect(try await arena.count("SELECT count(*) FROM kvsync_blobs") == 2)
        #expect(try await arena.count("SELECT count(*) FROM kvsync_blobs WHERE complete") == 1)
    }
}

extension Arena {
    /// `METHOD /v1/blobs/HASH` with `credential` (of this group, or `group`), `extra` headers and
    /// `body`; the answer.
    func blob(_ method: String, _ hash: BlobHash, _ credential: String, _ extra: [String] = [], body: [UInt8] = [],
              group: String? = nil) async throws -> RawHTTP.Answer {
        let headers = ["Authorization: Bearer \(credential)", "\(GatewayWire.groupHeader): \(group ?? self.group)"] + extra
        let url = self.url
        return try await offPool { try RawHTTP.request(url, "\(method) \(GatewayEndpoint.blob(hash))", headers: headers, body: body) }
    }

    /// The answer's bytes as received (status line, headers and body), for `requestLine` with
    /// `headers` and no body.
    func raw(_ requestLine: String, _ headers: [String]) async throws -> [UInt8] {
        let url = self.url
        return try await offPool {
            let fd = try RawHTTP.connect(url)
            defer { close(fd) }
            RawHTTP.sendAll(fd, RawHTTP.head(requestLine, headers: headers, length: nil))
            return RawHTTP.readToEnd(fd)
        }
    }

    /// `requestLine`'s head with a Content-Length of `length` and no byte of its body: the answer,
    /// which must come without the body.
    func headOnly(_ requestLine: String, _ credential: String, length: Int, _ extra: [String] = []) async throws -> RawHTTP.Answer {
        let url = self.url, headers = self.headers(credential) + extra
        return try await offPool {
            let fd = try RawHTTP.connect(url, timeout: 20)
            defer { close(fd) }
            RawHTTP.sendAll(fd, RawHTTP.head(requestLine, headers: headers, length: length))
            return try RawHTTP.parse(RawHTTP.readToEnd(fd))
        }
    }

    /// Uploads `bytes` in chunks of ``BlobWire/chunkBytes``: the offset the last answer gave.
    func upload(_ bytes: [UInt8], _ credential: String, group: String? = nil) async throws -> Int {
        let hash = BlobAttacks.hash(bytes)
        var offset = 0
        repeat {
            let end = min(offset + BlobWire.chunkBytes, bytes.count)
            let answer = try await blob("PUT", hash, credential, ["Upload-Offset: \(offset)", "Upload-Length: \(bytes.count)"],
                                        body: Array(bytes[offset..<end]), group: group)
            guard answer.status == 200, let next = answer.header("Upload-Offset").flatMap(Int.init) else {
                throw ReplicationError.server("the upload at \(offset): \(answer.status) \(answer.text)")
            }
            offset = next
        } while offset < bytes.count
        return offset
    }

    /// `SELECT count(*) …` as the cluster's owner.
    func count(_ sql: String) async throws -> Int {
        try await offPool { [cluster] in Int(try cluster.psql(sql).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1 }
    }
}
#endif
