import KVStore
import SyncWire
import Testing

/// The gateway's endpoints and live events: the one list both sides route and parse by.
@Suite struct GatewayProtocolTests {
    /// Every endpoint's request line is admitted as that endpoint by the gateway's parser, and the
    /// other method on its path is not.
    @Test func everyEndpointRoutesToItself() throws {
        let hash = try BlobHash(hex: String(repeating: "ab", count: 32))
        for endpoint in GatewayEndpoint.allCases {
            let target = endpoint == .changes ? GatewayEndpoint.changes(after: 7, limit: 9)
                : endpoint == .blobs ? GatewayEndpoint.blob(hash) : endpoint.path
            let operation = try GatewayRequestHead.operation(method: endpoint.method, uri: target)
            let expected: GatewayOperation = switch endpoint {
            case .hello: .hello
            case .push: .push
            case .changes: .changes(after: 7, limit: 9)
            case .state: .state
            case .live: .live
            case .blobs: .blob(BlobRequest(verb: .head, hash: hash))
            }
            #expect(operation == expected)
            #expect(operation.endpoint == endpoint)
            let other = endpoint.methods.contains("GET") ? "POST" : "GET"
            #expect(throws: GatewayRefusal.self) { try GatewayRequestHead.operation(method: other, uri: target) }
        }
        #expect(GatewayEndpoint.live.path == "/v1/live")
        #expect(GatewayEndpoint(method: "POST", name: "push") == .push)
        #expect(GatewayEndpoint(method: "GET", name: "pushy") == nil)
    }

    /// A page of the state is asked with a cursor the request target carries (the first page without
    /// one); the whole state, as devices before paged resyncs ask it, without a query. A cursor or a
    /// limit that is not one is refused in one line, before anything is read.
    @Test func aStatePageIsAskedWithACursorAndTheWholeStateWithoutAQuery() throws {
        #expect(try GatewayRequestHead.operation(method: "GET", uri: "/v1/state") == .state)
        #expect(try GatewayRequestHead.operation(method: "GET", uri: GatewayEndpoint.state(after: nil, limit: 50))
                == .statePage(after: nil, limit: 50))
        // The longest cursor (names of 200 bytes, a key of 511) fits the request target's 2,048 bytes.
        let cursors = [StateCursor(kind: "collection", name: "notes", key: Array("k7".utf8)),
                       StateCursor(kind: String(repeating: "é", count: 100), name: String(repeating: "n", count: 200),
                                   key: [UInt8](repeating: 0xFF, count: 511)),
                       StateCursor(kind: "", name: "", key: [])]
        for cursor in cursors {
            let target = GatewayEndpoint.state(after: cursor, limit: GatewayRequestHead.maxPageChanges)
            #expect(try GatewayRequestHead.operation(method: "GET", uri: target)
                    == .statePage(after: cursor, limit: GatewayRequestHead.maxPageChanges), "\(target)")
            #expect(try StateCursor(text: cursor.text) == cursor)
        }
        let refused = ["/v1/state?limit=0", "/v1/state?limit=10001", "/v1/state?after=00", "/v1/state?after=zz&limit=1",
                       "/v1/state?after=0&limit=1", "/v1/state?limit=5&group=x", "/v1/state?after=&limit=1",
                       // A NUL in a name (PostgreSQL's text holds none), a kind over 200 bytes, bytes after the key.
                       "/v1/state?after=\(Hex.encode([1, 0, 0, 0]))&limit=1",
                       "/v1/state?after=\(Hex.encode([0xC9, 0x01] + [UInt8](repeating: 0x61, count: 201) + [0, 0]))&limit=1",
                       "/v1/state?after=\(StateCursor(kind: "a", name: "b", key: [1]).text)00&limit=1"]
        for target in refused {
            do {
                _ = try GatewayRequestHead.operation(method: "GET", uri: target)
                Issue.record("\(target) was admitted")
            } catch {
                #expect(error.status == 400 && !error.line.contains("\n"), "\(target): \(error)")
            }
        }
    }

    /// A page of the state round-trips, its cursor with it; what does not decode is one line.
    @Test func aStatePageRoundTrips() throws {
        let rows = [ServerChange(sequence: 7, device: "d", kind: "collection", name: "notes", key: [1, 2], value: [3], clock: 1 << 20, token: 9),
                    ServerChange(sequence: 8, device: "e", kind: "collection", name: "notes", key: [4], value: nil, clock: 5, token: 1,
                                 problem: "its value is 20 bytes, over the 10-byte limit", valueKept: false)]
        for next in [nil, StateCursor(kind: "collection", name: "notes", key: [4])] {
            let page = StatePage(prunedThrough: 3, lastSequence: 12, rows: rows, unnameable: next == nil ? [] : [rows[1]], next: next)
            #expect(try StatePage(decoding: page.encoded(), maxValueBytes: 16) == page)
        }
        let bytes = StatePage(prunedThrough: 3, lastSequence: 12, rows: rows, next: nil).encoded()
        #expect(throws: GatewayWireError.self) { try StatePage(decoding: Array(bytes.dropLast()), maxValueBytes: 16) }
        #expect(throws: GatewayWireError.self) { try StatePage(decoding: bytes + [0], maxValueBytes: 16) }
    }

    /// What the gateway frames, the client parses back; heartbeats and unknown events are not events,
    /// and a name that only begins like a known one is not that one.
    @Test func eventsRoundTripAndParseExactly() {
        for event in GatewayEvent.allCases {
            let frame = event.frame(data: "revoked\nat noon")
            #expect(frame.hasSuffix("\n\n"))
            let parsed = GatewayEvent.parse(frame.dropLast(2))
            #expect(parsed?.event == event)
            #expect(parsed?.data == "revoked at noon")
        }
        #expect(GatewayEvent.parse(GatewayEvent.heartbeat.dropLast(2)) == nil)
        #expect(GatewayEvent.parse("event: changes\ndata: ") == nil)
        #expect(GatewayEvent.parse("event: problem\ndata: x") == nil)
        #expect(GatewayEvent.parse("event:closed\r\ndata:a\ndata: b")?.data == "a\nb")
        #expect(GatewayEvent.parse(": comment\nevent: change")?.event == .change)
    }
}
