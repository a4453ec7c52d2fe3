import SyncWire
import Testing

/// The `closed` event's reason is a typed code read by its exact text: the texts are the ones every
/// gateway has sent since live streams began, so old devices and old gateways keep understanding
/// each other.
@Suite struct GatewayCloseReasonTests {
    /// The wire texts are the historical ones (a device of any release compares them), each reads back
    /// as its own case, and only revoked and expired refuse the credential.
    @Test func everyReasonReadsBackFromTheTextOlderReleasesSend() {
        let historical: [(GatewayCloseReason, String)] = [(.revoked, "the credential was revoked"),
                                                          (.expired, "the credential has expired"),
                                                          (.draining, "the gateway is shutting down")]
        #expect(historical.map(\.0) == GatewayCloseReason.sent)
        for (reason, text) in historical {
            #expect(reason.text == text)
            #expect(GatewayCloseReason(text: text) == reason)
        }
        #expect(GatewayCloseReason.sent.filter(\.refusesCredential) == [.revoked, .expired])
    }

    /// A reason this release does not know is kept as sent and does not refuse the credential, even
    /// when its words mention a revocation (the client read "revoked" out of any text before).
    @Test func anUnknownReasonIsKeptAndRefusesNothing() {
        let unknown = GatewayCloseReason(text: "maintenance: not revoked")
        #expect(unknown == .other("maintenance: not revoked"))
        #expect(!unknown.refusesCredential)
        #expect(unknown.text == "maintenance: not revoked")
        #expect(GatewayCloseReason(text: "").text == "closed")
    }

    /// Every status a gateway answers means something to the device: 414 (a request target over 2 KiB)
    /// is one of them, and a protocol refusal.
    @Test func everyStatusTheGatewayAnswersIsListed() throws {
        #expect(GatewayStatus(rawValue: 414)?.meaning == .protocol)
        #expect(Set(GatewayStatus.allCases.map(\.rawValue)).count == GatewayStatus.allCases.count)
        // What GatewayRequestHead refuses with is a listed status.
        do {
            _ = try GatewayRequestHead.operation(method: "GET", uri: "/v1/changes?" + String(repeating: "a", count: 3_000))
            Issue.record("a 3,000-byte request target was admitted")
        } catch {
            #expect(GatewayStatus(rawValue: error.status) == .uriTooLong)
        }
    }
}
