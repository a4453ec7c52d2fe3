#if PostgreSQL
import NIOHTTP1
import SyncWire
@testable import SyncGateway
import Testing

/// What `/metrics` renders (``GatewayMetrics/exposition(connections:inFlight:liveStreams:draining:databaseUp:)``):
/// each count where it belongs, the histogram cumulative, the gauges as given, and a well-formed
/// Prometheus text exposition whatever was counted.
@Suite struct MetricsTests {
    static func exposition(_ metrics: GatewayMetrics, connections: Int = 0, inFlight: Int = 0, liveStreams: Int = 0,
                           draining: Bool = false, databaseUp: Bool = true) -> String {
        metrics.exposition(connections: connections, inFlight: inFlight, liveStreams: liveStreams, draining: draining,
                           databaseUp: databaseUp)
    }

    /// The value of one sample (`kvsync_gateway_` + `name`, with exactly `labels`), or `nil` when the
    /// exposition has no such line.
    static func sample(_ metrics: GatewayMetrics, _ name: String, _ labels: String = "") -> String? {
        let prefix = "kvsync_gateway_\(name)\(labels.isEmpty ? "" : "{\(labels)}") "
        return exposition(metrics).split(separator: "\n").first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
    }

    @Test func aFreshGatewayShowsTheProtocolsEndpointsAtZeroAndEveryReason() {
        let metrics = GatewayMetrics()
        for endpoint in ["hello", "push", "changes", "state", "live"] {
            #expect(Self.sample(metrics, "requests_total", "endpoint=\"\(endpoint)\",status=\"200\"") == "0")
        }
        // The rest appear once counted (the label sets are fixed, and the unseen ones not written).
        #expect(Self.sample(metrics, "requests_total", "endpoint=\"healthz\",status=\"200\"") == nil)
        #expect(Self.sample(metrics, "requests_total", "endpoint=\"push\",status=\"503\"") == nil)
        for reason in GatewayMetrics.RefusalReason.allCases {
            #expect(Self.sample(metrics, "refusals_total", "reason=\"\(reason.label)\"") == "0")
        }
        #expect(Self.sample(metrics, "errors_total") == "0")
        #expect(Self.sample(metrics, "db_transaction_seconds_count") == "0")
    }

    @Test func eachRequestIsCountedUnderItsEndpointStatusAndOutcome() {
        let metrics = GatewayMetrics()
        metrics.request(.push, status: .ok, received: 100, sent: 20, outcome: .answered)
        metrics.request(.push, status: .ok, received: 50, sent: 10, outcome: .refused(.skew))
        metrics.request(.hello, status: .unauthorized, sent: 5, outcome: .refused(.credential))
        metrics.request(.state, status: .serviceUnavailable, sent: 1, outcome: .failed)
        // A path outside the protocol is counted under the endpoint `other`, never as a label of its own;
        // a status outside the protocol's list does not compile (`GatewayStatus`).
        metrics.request(.other, status: .uriTooLong, sent: 0, outcome: .refused(.protocol))
        #expect(Self.sample(metrics, "requests_total", "endpoint=\"push\",status=\"200\"") == "2")
        #expect(Self.sample(metrics, "requests_total", "endpoint=\"hello\",status=\"401\"") == "1")
        #expect(Self.sample(metrics, "requests_total", "endpoint=\"state\",status=\"503\"") == "1")
        #expect(Self.sample(metrics, "requests_total", "endpoint=\"other\",status=\"414\"") == "1")
        #expect(Self.sample(metrics, "requests_total", "endpoint=\"other\",status=\"other\"") == nil)
        // (As a label: the start time's digits once held "418", and the whole text did.)
        #expect(!Self.exposition(metrics).contains("status=\"418\""))
        #expect(Self.sample(metrics, "refusals_total", "reason=\"skew\"") == "1")
        #expect(Self.sample(metrics, "refusals_total", "reason=\"credential\"") == "1")
        #expect(Self.sample(metrics, "refusals_total", "reason=\"protocol\"") == "1")
        #expect(Self.sample(metrics, "refusals_total", "reason=\"rate\"") == "0")
        #expect(Self.sample(metrics, "errors_total") == "1")
        #expect(Self.sample(metrics, "bytes_received_total") == "150")
        #expect(Self.sample(metrics, "bytes_sent_total") == "36")
        metrics.changes(pushed: 3, pulled: 0)
        metrics.changes(pushed: 0, pulled: 4)
        metrics.error()
        metrics.sent(7)
        #expect(Self.sample(metrics, "changes_pushed_total") == "3" && Self.sample(metrics, "changes_pulled_total") == "4")
        #expect(Self.sample(metrics, "errors_total") == "2" && Self.sample(metrics, "bytes_sent_total") == "43")
    }

    @Test func theTransactionHistogramIsCumulativeWithItsSumAndCount() {
        let metrics = GatewayMetrics()
        metrics.transaction(.microseconds(500))
        metrics.transaction(.milliseconds(3))
        metrics.transaction(.milliseconds(3))
        metrics.transaction(.seconds(30))
        #expect(Self.sample(metrics, "db_transaction_seconds_bucket", "le=\"0.001\"") == "1")
        #expect(Self.sample(metrics, "db_transaction_seconds_bucket", "le=\"0.0025\"") == "1")
        #expect(Self.sample(metrics, "db_transaction_seconds_bucket", "le=\"0.005\"") == "3")
        #expect(Self.sample(metrics, "db_transaction_seconds_bucket", "le=\"10\"") == "3")
        #expect(Self.sample(metrics, "db_transaction_seconds_bucket", "le=\"+Inf\"") == "4")
        #expect(Self.sample(metrics, "db_transaction_seconds_count") == "4")
        #expect(Self.sample(metrics, "db_transaction_seconds_sum") == "30.0065")
    }

    @Test func theGaugesAreTheGatewaysAsGiven() {
        let metrics = GatewayMetrics()
        let text = Self.exposition(metrics, connections: 5, inFlight: 2, liveStreams: 3, draining: true, databaseUp: false)
        for line in ["kvsync_gateway_connections 5", "kvsync_gateway_requests_in_flight 2", "kvsync_gateway_live_streams 3",
                     "kvsync_gateway_draining 1", "kvsync_gateway_database_up 0"] {
            #expect(text.split(separator: "\n").contains(Substring(line)), "\(line)")
        }
        // The sweep was current a moment ago: its lag is small, and grows from a sweep in the past.
        metrics.swept(at: .now - .seconds(100))
        let lag = Double(Self.sample(metrics, "revocation_sweep_lag_seconds") ?? "") ?? -1
        #expect(lag >= 100)
    }

    /// Every line is a `# HELP`, a `# TYPE` or a sample of the family just declared, each family is
    /// declared once, and no sample line repeats: what Prometheus needs to take the scrape.
    @Test func theExpositionIsWellFormedWhateverWasCounted() {
        let metrics = GatewayMetrics()
        for endpoint in GatewayMetrics.Endpoint.allCases {
            for status in GatewayStatus.allCases {
                metrics.request(endpoint, status: status, sent: 1, outcome: .answered)
            }
        }
        let text = Self.exposition(metrics)
        #expect(text.hasSuffix("\n"))
        var families = Set<String>()
        var samples = Set<Substring>()
        var current = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
            if line.hasPrefix("# HELP ") {
                current = String(line.split(separator: " ")[2])
                #expect(families.insert(current).inserted, "\(current) declared twice")
            } else if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                #expect(parts.count == 4 && String(parts[2]) == current && ["counter", "gauge", "histogram"].contains(parts[3]), "\(line)")
            } else {
                let name = line.prefix { $0 != "{" && $0 != " " }
                #expect(name == current || name.hasPrefix(current + "_"), "\(line) outside its family \(current)")
                #expect(Double(line.split(separator: " ").last ?? "") != nil, "\(line)")
                #expect(samples.insert(line).inserted, "\(line) twice")
            }
        }
        #expect(families.count >= 15)
        // Every endpoint's label with every status of the protocol, each counted once.
        for endpoint in GatewayMetrics.Endpoint.allCases {
            for status in GatewayStatus.allCases {
                #expect(text.contains("endpoint=\"\(endpoint.label)\",status=\"\(status.rawValue)\"} 1"), "\(endpoint) \(status)")
            }
        }
    }

    @Test func anEndpointIsItsPathWhateverTheQuery() {
        #expect(GatewayMetrics.Endpoint(uri: "/v1/changes?after=3&limit=10") == .changes)
        #expect(GatewayMetrics.Endpoint(uri: "/v1/push") == .push)
        #expect(GatewayMetrics.Endpoint(uri: "/v1/push/") == .other)
        #expect(GatewayMetrics.Endpoint(uri: "/V1/PUSH") == .other)
        #expect(GatewayMetrics.Endpoint(uri: "") == .other)
        #expect(GatewayMetrics.Endpoint(uri: "?/v1/push") == .other)
    }
}
#endif
