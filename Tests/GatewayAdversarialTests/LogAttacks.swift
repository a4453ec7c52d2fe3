#if PostgreSQL
import Foundation
import KVStore
import SyncKitPostgres
import SyncTestSupport
import SyncWire
import PostgresTesting
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What a client can write into the gateway's log and metrics: only what the gateway chooses (an
/// endpoint of a fixed set or `other`, one of HTTP's methods or `other`, its own lines).
@Suite(.serialized) struct LogAttacks {
    /// A marker sent in the path, the method, the query and the headers of refused requests never
    /// reaches the log (text or JSON) nor the metrics, while the refusals themselves are logged. On
    /// issue 46's gateway, a 404 logged the raw path and method (up to 2 KB of the client's text a
    /// line), and a query's repeated parameter its name.
    @Test(arguments: ["text", "json"])
    func aMarkerInThePathMethodQueryAndHeadersNeverReachesTheLog(format: String) async throws {
        let arena = try await Arena("log-marker-\(format)", gatewayArguments: ["--log-format", format])
        let token = try await arena.token(["--device", "d"])
        let marker = "zq7Marker\(UInt32.random(in: 0...UInt32.max))"
        let headers = arena.headers(token) + ["X-Note: \(marker)", "User-Agent: \(marker)-agent"]
        var statuses: [Int] = []
        for requestLine in [
            "GET /\(marker)/hello",                       // no such endpoint: the path
            "GET /v1/\(marker)",                          // no such endpoint under /v1/
            "GET /v1/hello?\(marker)=1&\(marker)=2",      // a query's parameter named twice
            "GET /v1/changes?after=0&\(marker)=1",        // a query's parameter the endpoint does not take
            "MKCALENDAR /v1/hello",                       // a method of HTTP's extensions that no endpoint takes
            "PROPFIND /\(marker)",                        // both
            "\(marker.uppercased()) /v1/hello",           // a method HTTP's parser does not know
        ] {
            let answer = try await offPool { [url = arena.url] in try RawHTTP.request(url, requestLine, headers: headers) }
            statuses.append(answer.status)
        }
        // Headers of the client's choosing in the credential and the group, refused.
        for bad in [["Authorization: Bearer \(marker)", "\(GatewayWire.groupHeader): \(arena.group)"],
                    ["Authorization: Bearer \(token)", "\(GatewayWire.groupHeader): \(marker)!"]] {
            let answer = try await offPool { [url = arena.url] in try RawHTTP.request(url, "GET /v1/hello", headers: bad + ["X-Note: \(marker)"]) }
            statuses.append(answer.status)
        }
        print("[adversary] requests carrying a marker (\(format) log): \(statuses)")
        #expect(statuses.allSatisfy { (400...499).contains($0) }, "\(statuses)")
        let metricsBase = try #require(gatewayMetricsBase(arena.gateway))
        let metrics = try await offPool { try RawHTTP.request(metricsBase, "GET /metrics", headers: []) }
        #expect(metrics.status == 200 && !metrics.text.lowercased().contains(marker.lowercased()))
        arena.gateway.kill(SIGTERM)
        let log = try await offPool { arena.gateway.wait(timeout: 30).stderr }
        let lines = log.split(separator: "\n").map(String.init)
        // The refusals are logged (the test would prove nothing otherwise), under fixed names.
        let refusals = lines.filter { $0.contains("refusal") }
        #expect(refusals.count >= 8, "\(log)")
        #expect(refusals.contains { $0.contains(format == "json" ? "\"method\":\"other\"" : " 404 other other ") }, "\(log)")
        #expect(!log.lowercased().contains(marker.lowercased()), "\(log)")
        #expect(!log.contains("MKCALENDAR") && !log.contains("PROPFIND"), "\(log)")
    }
}
#endif
