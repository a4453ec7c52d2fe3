#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import SyncTestSupport
import SyncWire
import PostgresTesting
import TestSupport
import Testing

/// Bytes no client of the library sends: lengths and counts that lie, text that is not UTF-8, two
/// framings of one body, cursors of another group. Each gets one refusal line, and nothing reaches the
/// server or another device.
@Suite(.serialized) struct FramingAttacks {
    /// LEB128 of `value`.
    static func leb(_ value: UInt64) -> [UInt8] {
        var writer = WireWriter()
        writer.unsigned(value)
        return writer.bytes
    }

    @Test func lyingLengthsCountsTrailingBytesAndBadTextAreRefusedWhole() async throws {
        let arena = try await Arena("framing")
        let token = try await arena.token(["--device", "d"])
        let valid = GatewayPushRequest(device: "", changes: [try note("k", "v", token: 1)]).encoded()
        // device "", skew 0, one change: kind "collection", name "notes", then the key's length.
        let prefix = [0x00, 0x00, 0x01, 0x0A] + Array("collection".utf8) + [0x05] + Array("notes".utf8)
        let bodies: [(String, [UInt8])] = [
            ("a key of 2^63 bytes", prefix + Self.leb(1 << 63) + [0x6B]),
            ("a key of 2^64-1 bytes", prefix + Self.leb(.max) + [0x6B]),
            ("an integer over 64 bits", prefix + [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F]),
            ("a count of 2^63 changes", [0x00, 0x00] + Self.leb(1 << 63)),
            ("a count larger than the body", [0x00, 0x00] + Self.leb(1_000) + [0x00]),
            ("trailing bytes", valid + [0x00]),
            ("text that is not UTF-8", [0x00, 0x00, 0x01, 0x02, 0xC3, 0x28]),
            ("a body cut short", Array(valid.dropLast(3))),
            ("a value over 16 MiB declared", prefix + [0x01, 0x6B, 0x01] + Self.leb(16 << 20 + 1)),
        ]
        for (what, body) in bodies {
            let answer = try await offPool { [url = arena.url, headers = arena.headers(token)] in
                try RawHTTP.request(url, "POST /v1/push", headers: headers, body: body)
            }
            #expect(answer.status == 400 && answer.text.hasPrefix("the push is malformed: ") && answer.text.split(separator: "\n").count == 1,
                    "\(what): \(answer.status) \(answer.text)")
        }
        #expect(try await arena.log().isEmpty)
    }

    /// Request smuggling's shapes: a Content-Length and a Transfer-Encoding, two Content-Lengths, a
    /// chunked body alone, a Content-Length that is not a number. Each is refused; the second request
    /// hidden in the first's body never runs.
    @Test func smugglingShapesAreRefusedAndTheHiddenRequestNeverRuns() async throws {
        let arena = try await Arena("smuggling")
        let token = try await arena.token(["--device", "d"])
        let hidden = GatewayPushRequest(device: "", changes: [try note("smuggled", "v", token: 1)]).encoded()
        let auth = arena.headers(token).map { $0 + "\r\n" }.joined()
        let hiddenRequest = Array("POST /v1/push HTTP/1.1\r\nHost: x\r\n\(auth)Content-Length: \(hidden.count)\r\n\r\n".utf8) + hidden
        let chunk = Array(String(hiddenRequest.count, radix: 16).utf8) + [0x0D, 0x0A] + hiddenRequest + Array("\r\n0\r\n\r\n".utf8)
        let shapes: [(String, [UInt8])] = [
            ("CL and TE", Array("POST /v1/push HTTP/1.1\r\nHost: x\r\n\(auth)Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n".utf8) + chunk),
            ("two Content-Lengths", Array("POST /v1/push HTTP/1.1\r\nHost: x\r\n\(auth)Content-Length: 0\r\nContent-Length: \(hiddenRequest.count)\r\n\r\n".utf8) + hiddenRequest),
            ("a chunked body", Array("POST /v1/push HTTP/1.1\r\nHost: x\r\n\(auth)Transfer-Encoding: chunked\r\n\r\n".utf8) + chunk),
            ("a Content-Length with a sign", Array("POST /v1/push HTTP/1.1\r\nHost: x\r\n\(auth)Content-Length: +\(hidden.count)\r\n\r\n".utf8) + hidden),
            ("a GET with a body", Array("GET /v1/hello HTTP/1.1\r\nHost: x\r\n\(auth)Content-Length: \(hiddenRequest.count)\r\n\r\n".utf8) + hiddenRequest),
        ]
        for (what, bytes) in shapes {
            let answer = try await offPool { [url = arena.url] in try RawHTTP.exchange(url, bytes) }
            #expect(answer.status == 400, "\(what): \(answer.status) \(answer.text)")
            // One answer only: the hidden request was not read as a second one.
            #expect(!answer.text.contains("HTTP/1.1"), "\(what): \(answer.text)")
        }
        #expect(try await arena.log().isEmpty)
        // A header with a NUL byte, and a group header that is not a group identifier.
        let nul = try await offPool { [url = arena.url] in
            try RawHTTP.exchange(url, Array("GET /v1/hello HTTP/1.1\r\nHost: x\r\n\(auth)X-Note: a\u{0}b\r\n\r\n".utf8))
        }
        #expect(nul.status == 400, "\(nul.status) \(nul.text)")
        let badGroup = try await offPool { [url = arena.url] in
            try RawHTTP.request(url, "GET /v1/hello", headers: ["Authorization: Bearer \(token)", "KVSync-Group: ../../etc"])
        }
        #expect(badGroup.status == 400 && badGroup.text.contains("not a group identifier"), "\(badGroup.text)")
    }

    /// A cursor is a number in the requesting group's log: a sequence number of another group's change
    /// reads nothing of that group. Queries that repeat or add parameters are refused.
    @Test func cursorsOfAnotherGroupReadNothingOfIt() async throws {
        let arena = try await Arena("cursor")
        let theirs = "group.com.example.adversary.cursor-victim"
        let victim = try Device(group: theirs)
        let victimToken = try await issueToken(arena.cluster, ["--group", theirs, "--device", "victim"])
        for index in 0..<5 { try victim.put("secret \(index)", "s\(index)") }
        #expect(try await arena.sync(victim, victimToken).status == 0)
        let mine = try await arena.token(["--device", "attacker"])
        let sequences = try await offPool { [cluster = arena.cluster] in
            try cluster.psql("SELECT seq FROM kvsync_changes ORDER BY seq").split(separator: "\n").compactMap { Int64($0) }
        }
        for cursor in [0] + sequences.map({ $0 - 1 }) + sequences {
            let answer = try await arena.get("/v1/changes?after=\(cursor)&limit=100", mine)
            #expect(answer.status == 200)
            let page = try ChangesPage(decoding: answer.body, maxValueBytes: 1 << 20)
            #expect(page.changes.isEmpty && page.atCursor == nil && page.lastSequence == 0, "cursor \(cursor): \(page)")
        }
        let state = try GatewayState(decoding: try await arena.get("/v1/state", mine).body, maxValueBytes: 1 << 20)
        #expect(state.rows.isEmpty)
        for target in ["/v1/changes?after=0&after=3", "/v1/changes?after=0&group=\(theirs)", "/v1/state?group=\(theirs)",
                       "/v1/changes?after=%30", "/v1/changes?after=0&limit=-1"] {
            let answer = try await arena.get(target, mine)
            #expect(answer.status == 400, "\(target): \(answer.status) \(answer.text)")
        }
    }
}
#endif
