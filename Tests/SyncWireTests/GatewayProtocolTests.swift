import SyncWire
import Testing

/// The gateway's endpoints and live events: the one list both sides route and parse by.
@Suite struct GatewayProtocolTests {
    /// Every endpoint's request line is admitted as that endpoint by the gateway's parser, and the
    /// other method on its path is not.
    @Test func everyEndpointRoutesToItself() throws {
        for endpoint in GatewayEndpoint.allCases {
            let target = endpoint == .changes ? GatewayEndpoint.changes(after: 7, limit: 9) : endpoint.path
            let operation = try GatewayRequestHead.operation(method: endpoint.method, uri: target)
            let expected: GatewayOperation = switch endpoint {
            case .hello: .hello
            case .push: .push
            case .changes: .changes(after: 7, limit: 9)
            case .state: .state
            case .live: .live
            }
            #expect(operation == expected)
            let other = endpoint.method == "GET" ? "POST" : "GET"
            #expect(throws: GatewayRefusal.self) { try GatewayRequestHead.operation(method: other, uri: target) }
        }
        #expect(GatewayEndpoint.live.path == "/v1/live")
        #expect(GatewayEndpoint(method: "POST", name: "push") == .push)
        #expect(GatewayEndpoint(method: "GET", name: "pushy") == nil)
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
