#if PostgreSQL
import SyncKitPostgres
import Testing

/// The line a gateway process prints once it listens, as the processes that start one read it.
@Suite struct GatewayReadyLineTests {
    @Test func theLinePrintedIsTheLineParsed() {
        let line = GatewayReadyLine(url: "https://127.0.0.1:8443")
        #expect(line.description == "gateway listening on https://127.0.0.1:8443")
        #expect(GatewayReadyLine(line.description) == line)
        #expect(GatewayReadyLine(line.description + "\n")?.url == "https://127.0.0.1:8443")
    }

    @Test func otherLinesAreNotReady() {
        #expect(GatewayReadyLine("gateway listening on ") == nil)
        #expect(GatewayReadyLine("the gateway listening on http://x:1") == nil)
        #expect(GatewayReadyLine("gateway listening on http://x:1 (draining)") == nil)
        #expect(GatewayReadyLine("Error: Address already in use") == nil)
    }
}
#endif
