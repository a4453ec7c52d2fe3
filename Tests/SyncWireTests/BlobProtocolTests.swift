import KVStore
import SyncWire
import Testing

/// The blob endpoints' requests (issue 49), as the gateway reads them before a byte of a body: the
/// request line (`/v1/blobs/HASH` and its three methods), a `PUT`'s `Upload-Offset` and
/// `Upload-Length` with its chunk and size limits, and a `GET`'s single byte range as RFC 9110 reads
/// it. Every refusal is one line with a status the protocol lists; nothing traps.
@Suite struct BlobProtocolTests {
    static let hash = String(repeating: "0f", count: 32)
    static let target = "/v1/blobs/\(hash)"
    static let auth = SyncWireTests.auth

    static func head(_ method: String, _ headers: [(String, String)], uri: String = target,
                     maxFileBytes: Int64 = BlobWire.defaultMaxFileBytes) throws(GatewayRefusal) -> GatewayRequestHead {
        try GatewayRequestHead(method: method, uri: uri, header: { name in headers.filter { $0.0 == name }.map(\.1) },
                               maxBodyBytes: GatewayWire.maxBodyBytes, maxFileBytes: maxFileBytes)
    }

    static func blob(_ method: String, _ headers: [(String, String)], maxFileBytes: Int64 = BlobWire.defaultMaxFileBytes) throws(GatewayRefusal) -> BlobRequest {
        let admitted = try head(method, auth + headers, maxFileBytes: maxFileBytes)
        guard case .blob(let blob) = admitted.operation else { throw GatewayRefusal(.internalServerError, "not a blob: \(admitted.operation)") }
        return blob
    }

    /// The refusal of `body`, which must refuse: its status, and its line checked to be one line.
    static func refusal(_ body: () throws(GatewayRefusal) -> Void) -> GatewayRefusal? {
        do {
            try body()
            return nil
        } catch {
            #expect(!error.line.contains("\n") && !error.line.isEmpty && error.line.utf8.count < 300, "\(error.line)")
            return error
        }
    }

    @Test func theThreeMethodsOfABlobRouteToItAndNoOtherDoes() throws {
        let hash = try BlobHash(hex: Self.hash)
        #expect(GatewayEndpoint.blob(hash) == Self.target)
        #expect(GatewayEndpoint.blobs.methods == ["HEAD", "PUT", "GET"])
        for verb in BlobRequest.Verb.allCases {
            #expect(try GatewayRequestHead.operation(method: verb.rawValue, uri: Self.target) == .blob(BlobRequest(verb: verb, hash: hash)))
        }
        for method in ["POST", "DELETE", "PATCH", "head", "OPTIONS"] {
            #expect(Self.refusal { () throws(GatewayRefusal) in _ = try GatewayRequestHead.operation(method: method, uri: Self.target) }?.status == 404)
        }
        // `/v1/blobs` without a hash, a hash with a segment after it, another endpoint with a resource.
        for uri in ["/v1/blobs", "/v1/blobs/", "/v1/blobs/\(Self.hash)/", "/v1/blobs/\(Self.hash)/x", "/v1/push/\(Self.hash)", "//v1/blobs/\(Self.hash)"] {
            #expect(Self.refusal { () throws(GatewayRefusal) in _ = try GatewayRequestHead.operation(method: "GET", uri: uri) }?.status == 404, "\(uri)")
        }
        #expect(Self.refusal { () throws(GatewayRefusal) in _ = try GatewayRequestHead.operation(method: "GET", uri: Self.target + "?x=1") }?.status == 400)
        // The metrics count every blob under one label, whatever the hash.
        #expect(GatewayEndpoint(path: Self.target) == .blobs)
        #expect(GatewayEndpoint(path: "/v1/blobs") == nil)
        #expect(GatewayEndpoint(path: "/v1/hello") == .hello)
    }

    /// A hash is 64 lower-case hex digits: one of another length, with an upper-case digit or another
    /// character is refused 400 in a line that says what is wrong and holds nothing of it.
    @Test(arguments: [String(repeating: "0f", count: 31), String(repeating: "0f", count: 33), String(repeating: "0F", count: 32),
                      String(repeating: "0f", count: 31) + "0g", String(repeating: "0f", count: 31) + "%20", "", "..",
                      String(repeating: "0f", count: 31) + "é"])
    func aHashThatIsNotOneIsRefused(text: String) {
        let refused = Self.refusal { () throws(GatewayRefusal) in _ = try GatewayRequestHead.operation(method: "HEAD", uri: "/v1/blobs/\(text)") }
        #expect(refused?.status == (text.isEmpty ? 404 : 400), "\(text)")
        if let refused, !text.isEmpty { #expect(!refused.line.contains(text), "\(refused.line)") }
    }

    @Test func aPutIsAdmittedWithItsOffsetAndSize() throws {
        let put = try Self.blob("PUT", [("content-length", "1048576"), ("upload-offset", "0"), ("upload-length", "3145728")])
        #expect(put.upload == BlobRequest.Upload(offset: 0, length: 3_145_728))
        // The last chunk ends at the size; leading zeros and spaces around a number are a number's.
        let last = try Self.blob("PUT", [("content-length", "5"), ("upload-offset", " 0010 "), ("upload-length", "15")])
        #expect(last.upload == BlobRequest.Upload(offset: 10, length: 15))
        // An empty blob: a chunk of no bytes at offset 0.
        let empty = try Self.blob("PUT", [("content-length", "0"), ("upload-offset", "0"), ("upload-length", "0")])
        #expect(empty.upload == BlobRequest.Upload(offset: 0, length: 0))
        let largest = try Self.blob("PUT", [("content-length", "0"), ("upload-offset", "0"), ("upload-length", String(BlobWire.defaultMaxFileBytes))])
        #expect(largest.upload?.length == BlobWire.defaultMaxFileBytes)
    }

    /// Each of a PUT's bad heads is refused with its status, before the body: the lengths that
    /// break the chunk or the file limit with a typed refusal naming the limit.
    @Test func aPutsBadHeadsAreRefusedBeforeItsBody() throws {
        func put(_ headers: [(String, String)], maxFileBytes: Int64 = BlobWire.defaultMaxFileBytes) -> GatewayRefusal? {
            Self.refusal { () throws(GatewayRefusal) in _ = try Self.blob("PUT", headers, maxFileBytes: maxFileBytes) }
        }
        let chunk = put([("content-length", "1048577"), ("upload-offset", "0"), ("upload-length", "2000000")])
        #expect(chunk?.status == 413 && chunk?.blobOutcome == .chunkTooLarge(limit: 1 << 20))
        #expect(chunk?.line.contains("1048576") == true)
        let file = put([("content-length", "10"), ("upload-offset", "0"), ("upload-length", "1001")], maxFileBytes: 1000)
        #expect(file?.status == 413 && file?.blobOutcome == .tooLarge(limit: 1000))
        #expect(file?.line.contains("1000 bytes") == true)
        // Upload-Length of 2^63: refused as a number, not wrapped.
        let huge = put([("content-length", "1"), ("upload-offset", "0"), ("upload-length", "9223372036854775808")])
        #expect(huge?.status == 400 && huge?.line.contains("2^63") == true)
        let cases: [([(String, String)], Int)] = [
            ([("upload-offset", "0"), ("upload-length", "10")], 411),
            ([("content-length", "1"), ("upload-length", "10")], 400),
            ([("content-length", "1"), ("upload-offset", "0")], 400),
            ([("content-length", "1"), ("upload-offset", "-1"), ("upload-length", "10")], 400),
            ([("content-length", "1"), ("upload-offset", "+1"), ("upload-length", "10")], 400),
            ([("content-length", "1"), ("upload-offset", "1e3"), ("upload-length", "10000")], 400),
            ([("content-length", "1"), ("upload-offset", ""), ("upload-length", "10")], 400),
            ([("content-length", "1"), ("upload-offset", "0x1"), ("upload-length", "10")], 400),
            ([("content-length", "1"), ("upload-offset", "9223372036854775807"), ("upload-length", "10")], 400),
            ([("content-length", "1"), ("upload-offset", "18446744073709551616"), ("upload-length", "10")], 400),
            ([("content-length", "1"), ("upload-offset", "0"), ("upload-offset", "0"), ("upload-length", "10")], 400),
            ([("content-length", "1"), ("upload-offset", "0"), ("upload-length", "10"), ("upload-length", "10")], 400),
            // Past the end: the offset, or the chunk's last byte.
            ([("content-length", "1"), ("upload-offset", "10"), ("upload-length", "10")], 400),
            ([("content-length", "5"), ("upload-offset", "8"), ("upload-length", "10")], 400),
            ([("content-length", "1"), ("upload-offset", "11"), ("upload-length", "10")], 400),
            ([("transfer-encoding", "chunked"), ("upload-offset", "0"), ("upload-length", "10")], 400),
        ]
        for (headers, status) in cases {
            let refused = put(headers)
            #expect(refused?.status == status, "\(headers): \(refused.map(\.description) ?? "admitted")")
            #expect(refused?.blobOutcome == nil)
        }
        // The credential comes first: a PUT over every limit without one is 401, not 413.
        #expect(Self.refusal { () throws(GatewayRefusal) in
            _ = try Self.head("PUT", [("content-length", "99999999"), ("upload-offset", "0"), ("upload-length", "99999999999")])
        }?.status == 401)
    }

    @Test func aHeadOrGetTakesNoBodyAndAHeadsRangeIsIgnored() throws {
        #expect(Self.refusal { () throws(GatewayRefusal) in _ = try Self.blob("GET", [("content-length", "3")]) }?.status == 400)
        #expect(Self.refusal { () throws(GatewayRefusal) in _ = try Self.blob("HEAD", [("content-length", "3")]) }?.status == 400)
        #expect(try Self.blob("HEAD", [("range", "bytes=0-1")]).range == nil)
        #expect(try Self.blob("GET", [("content-length", "0")]).range == nil)
        // An If-Range names a validator this gateway gives none of: the whole blob.
        #expect(try Self.blob("GET", [("range", "bytes=0-1"), ("if-range", "\"x\"")]).range == nil)
        #expect(Self.refusal { () throws(GatewayRefusal) in _ = try Self.blob("GET", [("range", "bytes=0-1"), ("range", "bytes=2-3")]) }?.status == 400)
    }

    /// What RFC 9110 §14.1.2 accepts for one range is accepted, as it reads it.
    @Test(arguments: [
        ("bytes=0-499", ByteRangeRequest.from(0, through: 499)), ("bytes=500-", .from(500, through: nil)),
        ("bytes=-500", .suffix(500)), ("BYTES=1-1", .from(1, through: 1)), ("Bytes=0-0", .from(0, through: 0)),
        (" bytes=3-4 ", .from(3, through: 4)), ("bytes= 3-4", .from(3, through: 4)), ("bytes=3-4 ,", .from(3, through: 4)),
        ("bytes=,\t3-4", .from(3, through: 4)), ("bytes=0007-0009", .from(7, through: 9)),
        ("bytes=0-99999999999999999999", .from(0, through: .max)), ("bytes=99999999999999999999-", .from(.max, through: nil)),
        ("bytes=-99999999999999999999", .suffix(.max)), ("bytes=-0", .suffix(0)),
    ] as [(String, ByteRangeRequest)])
    func aSingleRangeIsReadAsTheRFCReadsIt(text: String, range: ByteRangeRequest) throws {
        #expect(try ByteRangeRequest(parsing: text) == range)
        #expect(try Self.blob("GET", [("range", text)]).range == range)
    }

    @Test(arguments: ["bytes=0-1,2-3", "bytes=0-1, 5-", "bytes=-1,-2", "bytes=5-4", "bytes=", "bytes=,", "bytes=-", "bytes=a-b",
                      "bytes=1", "bytes=-1-2", "bytes=+1-2", "bytes=1-+2", "bytes 0-1", "=0-1", "b ytes=0-1", "bytes=1 -2", "bytes=0x1-2",
                      "bytes=1.0-2", "bytes=１-2"])
    func aRangeThatIsNotOneRangeIsRefused(text: String) {
        #expect(Self.refusal { () throws(GatewayRefusal) in _ = try ByteRangeRequest(parsing: text) }?.status == 400, "\(text)")
    }

    /// A range of another unit is ignored (RFC 9110 §14.2): the whole blob is answered.
    @Test func aRangeOfAnotherUnitIsIgnored() throws {
        #expect(try ByteRangeRequest(parsing: "items=0-1") == nil)
        #expect(try Self.blob("GET", [("range", "none=5-")]).range == nil)
    }

    /// A range is resolved against the blob's size: clipped to its end, or none of it (416).
    @Test func aRangeResolvesAgainstTheSize() throws {
        #expect(ByteRangeRequest.from(0, through: 499).resolved(size: 10_000) == 0...499)
        #expect(ByteRangeRequest.from(9_500, through: 20_000).resolved(size: 10_000) == 9_500...9_999)
        #expect(ByteRangeRequest.from(9_999, through: nil).resolved(size: 10_000) == 9_999...9_999)
        #expect(ByteRangeRequest.from(10_000, through: nil).resolved(size: 10_000) == nil)
        #expect(ByteRangeRequest.from(.max, through: nil).resolved(size: 10_000) == nil)
        #expect(ByteRangeRequest.from(0, through: .max).resolved(size: 10_000) == 0...9_999)
        #expect(ByteRangeRequest.suffix(500).resolved(size: 10_000) == 9_500...9_999)
        #expect(ByteRangeRequest.suffix(.max).resolved(size: 10_000) == 0...9_999)
        #expect(ByteRangeRequest.suffix(0).resolved(size: 10_000) == nil)
        #expect(ByteRangeRequest.from(0, through: nil).resolved(size: 0) == nil)
        #expect(ByteRangeRequest.suffix(1).resolved(size: 0) == nil)
    }

    @Test func aRangeAndItsContentRangeRoundTrip() throws {
        for range in [ByteRangeRequest.from(0, through: 9), .from(5, through: nil), .suffix(7)] {
            #expect(try ByteRangeRequest(parsing: range.text) == range)
        }
        #expect(ByteRangeRequest.contentRange(5...9, size: 10) == "bytes 5-9/10")
        #expect(ByteRangeRequest.parseContentRange("bytes 5-9/10")! == (5...9, 10))
        #expect(ByteRangeRequest.parseContentRange(ByteRangeRequest.unsatisfied(size: 10))! == (nil, 10))
        for text in ["bytes 5-10/10", "bytes 9-5/10", "bytes 5-9/", "bytes -9/10", "bytes 5-9/x", "items 5-9/10", "bytes */", "bytes 5-9/*"] {
            #expect(ByteRangeRequest.parseContentRange(text) == nil, "\(text)")
        }
    }

    /// The typed refusals: each outcome's status and line name its limit.
    @Test func eachOutcomeHasItsStatusAndTheRefusalsNameTheirLimit() {
        #expect(BlobRequest.status(.accepted(received: 1)) == .ok && BlobRequest.status(.complete) == .ok)
        #expect(BlobRequest.status(.offsetMismatch(received: 1)) == .conflict && BlobRequest.status(.sizeMismatch(size: 1)) == .conflict)
        #expect(BlobRequest.status(.tooLarge(limit: 1)) == .payloadTooLarge && BlobRequest.status(.chunkTooLarge(limit: 1)) == .payloadTooLarge)
        #expect(BlobRequest.status(.quotaExceeded(limit: 1)) == .insufficientStorage)
        #expect(BlobRequest.status(.hashMismatch) == .unprocessableContent)
        #expect(BlobRequest.line(.quotaExceeded(limit: 1 << 30))!.contains("1073741824 bytes (1 GiB)"))
        #expect(BlobRequest.line(.tooLarge(limit: 64 << 20))!.hasPrefix("too_large: "))
        #expect(BlobRequest.line(.accepted(received: 3)) == nil)
    }
}
