#if PostgreSQL
import Foundation
import KVStore
import NIOHTTP1
import SyncWire

/// What a gateway counts, for Prometheus (`GET /metrics` on ``SyncGateway/Options/metricsHost``):
/// requests by endpoint and status, refusals by reason, errors, bytes, changes, and the database
/// transactions' latency as a histogram. Every label takes a value from a fixed set (an unknown
/// path counts as `other`, an unlisted status as `other`), so a client cannot grow the exposition.
/// Updated once per request (one lock held for a few additions), once per live event, and once per
/// transaction; gauges (connections, live streams, the revocation sweep's lag, whether the database
/// answers) are read at a scrape.
public final class GatewayMetrics: Sendable {
    /// The endpoints requests are counted by: the protocol's (``GatewayEndpoint``), the operators'
    /// (``OperationsEndpoint``), and `other`. A new endpoint in either list does not compile until it
    /// has its case here (the switches below have no `default:`), and is then counted and shown.
    public enum Endpoint: Int, CaseIterable, Sendable {
        case hello, push, changes, state, live, blobs, healthz, readyz, metrics, other

        /// The protocol's endpoint a request is counted under.
        init(_ endpoint: GatewayEndpoint) {
            switch endpoint {
            case .hello: self = .hello
            case .push: self = .push
            case .changes: self = .changes
            case .state: self = .state
            case .live: self = .live
            case .blobs: self = .blobs
            }
        }

        /// The operators' endpoint a request is counted under.
        init(_ endpoint: OperationsEndpoint) {
            switch endpoint {
            case .healthz: self = .healthz
            case .readyz: self = .readyz
            case .metrics: self = .metrics
            }
        }

        /// Where the case comes from: the protocol's endpoint, the operators', or neither (`other`).
        var source: (wire: GatewayEndpoint?, operations: OperationsEndpoint?) {
            switch self {
            case .hello: (.hello, nil)
            case .push: (.push, nil)
            case .changes: (.changes, nil)
            case .state: (.state, nil)
            case .live: (.live, nil)
            case .blobs: (.blobs, nil)
            case .healthz: (nil, .healthz)
            case .readyz: (nil, .readyz)
            case .metrics: (nil, .metrics)
            case .other: (nil, nil)
            }
        }

        /// Whether it is one of the protocol's (a device's request).
        var isProtocol: Bool { source.wire != nil }

        public var label: String { source.wire?.rawValue ?? source.operations?.rawValue ?? "other" }

        /// The endpoint a request target names (its path, whatever its method or query: every
        /// `/v1/blobs/…` is `blobs`, so that a client's hashes never become labels).
        public init(uri: String) {
            let path = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? uri
            if let endpoint = GatewayEndpoint(path: path) {
                self.init(endpoint)
            } else if let endpoint = OperationsEndpoint.allCases.first(where: { $0.path == path }) {
                self.init(endpoint)
            } else {
                self = .other
            }
        }
    }

    /// Why a request was refused (an answer that is the device's or the client's to act on, as opposed
    /// to an error of the gateway or its database).
    public enum RefusalReason: Int, CaseIterable, Sendable {
        /// No credential, an unknown, revoked or expired one, or one refused what it asked (another
        /// group, a push of a read-only credential, as another device).
        case credential
        /// Over a rate: the principal's requests, or the address's failed authentications (429).
        case rate
        /// Over a capacity: connections, buffered bodies, answers being written, live streams, a body
        /// over the largest (413, 503).
        case caps
        /// A push stamped too far ahead of the server's clock (answered 200 with the skew).
        case skew
        /// A request the protocol does not take (400, 404, 405, 411, …).
        case `protocol`
        /// A push with a value no device can decode (answered 200 with the reason; issue 47).
        case undecodable
        /// A push past a budget of its device or group (answered 200 with the budgets it broke).
        case budget

        public var label: String {
            switch self {
            case .credential: "credential"
            case .rate: "rate"
            case .caps: "caps"
            case .skew: "skew"
            case .protocol: "protocol"
            case .undecodable: "undecodable"
            case .budget: "budget"
            }
        }

        /// The reason a refusal with `status` has, unless its maker says otherwise: what the status
        /// means (``GatewayStatus/meaning``, the table devices read too).
        static func of(_ status: GatewayStatus) -> RefusalReason {
            switch status.meaning {
            case .credential, .deviceInUse: .credential
            case .rate: .rate
            case .capacity: .caps
            case .protocol, .failure, .answered: .protocol
            }
        }
    }

    /// The statuses requests are counted by (every one a gateway answers: ``GatewayStatus``); any other
    /// is `other`.
    static let statuses: [UInt] = GatewayStatus.allCases.map { UInt($0.rawValue) }
    /// The histogram's upper bounds, in seconds (and +Inf).
    public static let transactionBuckets: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    struct Counts {
        var requests = [Int](repeating: 0, count: Endpoint.allCases.count * (GatewayMetrics.statuses.count + 1))
        var refusals = [Int](repeating: 0, count: RefusalReason.allCases.count)
        var errors = 0
        var bytesReceived = 0
        var bytesSent = 0
        var changesPushed = 0
        var changesPulled = 0
        /// Per bucket (not cumulative; summed at a scrape), the last one +Inf.
        var transactionBuckets = [Int](repeating: 0, count: GatewayMetrics.transactionBuckets.count + 1)
        var transactionSum = 0.0
        var transactionCount = 0
    }

    private let counts = Locked(Counts())
    /// When the revocation sweep was last current (it ran, or had no stream to look after).
    private let sweptAt = Locked(ContinuousClock.now)
    private let started = Date()

    public init() {}

    /// One answered request: its endpoint and status, the bytes of its body and its answer, and why
    /// it was refused or whether it failed.
    func request(_ endpoint: Endpoint, status: GatewayStatus, received: Int = 0, sent: Int, outcome: GatewayResponse.Outcome) {
        let statusIndex = Self.statuses.firstIndex(of: UInt(status.rawValue)) ?? Self.statuses.count
        counts.withLock { counts in
            counts.requests[endpoint.rawValue * (Self.statuses.count + 1) + statusIndex] += 1
            counts.bytesReceived += received
            counts.bytesSent += sent
            switch outcome {
            case .answered: break
            case .refused(let reason): counts.refusals[reason.rawValue] += 1
            case .failed: counts.errors += 1
            }
        }
    }

    /// Bytes of a live stream's event, written.
    func sent(_ bytes: Int) {
        counts.withLock { $0.bytesSent += bytes }
    }

    func changes(pushed: Int, pulled: Int) {
        guard pushed > 0 || pulled > 0 else { return }
        counts.withLock { counts in
            counts.changesPushed += pushed
            counts.changesPulled += pulled
        }
    }

    /// An error that answered no request (a failed revocation sweep).
    func error() {
        counts.withLock { $0.errors += 1 }
    }

    /// One database transaction of a request, and how long it took.
    func transaction(_ elapsed: Duration) {
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let bucket = Self.transactionBuckets.firstIndex { seconds <= $0 } ?? Self.transactionBuckets.count
        counts.withLock { counts in
            counts.transactionBuckets[bucket] += 1
            counts.transactionSum += seconds
            counts.transactionCount += 1
        }
    }

    /// The revocation sweep is current now.
    func swept(at now: ContinuousClock.Instant = .now) {
        sweptAt.withLock { $0 = now }
    }

    /// Seconds since the revocation sweep was last current.
    var sweepLag: Double {
        let lag = ContinuousClock.now - sweptAt.withLock { $0 }
        return Double(lag.components.seconds) + Double(lag.components.attoseconds) / 1e18
    }

    /// The Prometheus text exposition (version 0.0.4) of every metric, with the gauges given.
    func exposition(connections: Int, inFlight: Int, liveStreams: Int, draining: Bool, databaseUp: Bool) -> String {
        let counts = self.counts.withLock { $0 }
        var text = ""
        func family(_ name: String, _ type: String, _ help: String) {
            text += "# HELP kvsync_gateway_\(name) \(help)\n# TYPE kvsync_gateway_\(name) \(type)\n"
        }
        func sample(_ name: String, _ labels: String = "", _ value: String) {
            text += "kvsync_gateway_\(name)\(labels.isEmpty ? "" : "{\(labels)}") \(value)\n"
        }
        family("requests_total", "counter", "Requests answered, by endpoint and HTTP status.")
        for endpoint in Endpoint.allCases {
            for (index, status) in (Self.statuses.map(String.init) + ["other"]).enumerated() {
                let value = counts.requests[endpoint.rawValue * (Self.statuses.count + 1) + index]
                // The protocol's endpoints with 200 are always shown (a rate over them starts at zero).
                guard value > 0 || (status == GatewayStatus.ok.label && endpoint.isProtocol) else { continue }
                sample("requests_total", "endpoint=\"\(endpoint.label)\",status=\"\(status)\"", "\(value)")
            }
        }
        family("refusals_total", "counter", "Requests refused, by reason: \(RefusalReason.allCases.map(\.label).joined(separator: ", ")).")
        for reason in RefusalReason.allCases {
            sample("refusals_total", "reason=\"\(reason.label)\"", "\(counts.refusals[reason.rawValue])")
        }
        family("errors_total", "counter", "Errors: requests the database failed (503), and failed revocation sweeps.")
        sample("errors_total", "", "\(counts.errors)")
        family("connections", "gauge", "Open client connections.")
        sample("connections", "", "\(connections)")
        family("requests_in_flight", "gauge", "Connections in the middle of a request (a live stream included).")
        sample("requests_in_flight", "", "\(inFlight)")
        family("live_streams", "gauge", "Open live streams (GET /v1/live).")
        sample("live_streams", "", "\(liveStreams)")
        family("bytes_received_total", "counter", "Bytes of request bodies received.")
        sample("bytes_received_total", "", "\(counts.bytesReceived)")
        family("bytes_sent_total", "counter", "Bytes of answer bodies and live events sent.")
        sample("bytes_sent_total", "", "\(counts.bytesSent)")
        family("changes_pushed_total", "counter", "Changes in pushes the database applied or answered.")
        sample("changes_pushed_total", "", "\(counts.changesPushed)")
        family("changes_pulled_total", "counter", "Changes in pages and resyncs sent.")
        sample("changes_pulled_total", "", "\(counts.changesPulled)")
        family("db_transaction_seconds", "histogram", "Database transactions of requests, by duration.")
        var cumulative = 0
        for (index, bound) in Self.transactionBuckets.enumerated() {
            cumulative += counts.transactionBuckets[index]
            sample("db_transaction_seconds_bucket", "le=\"\(Self.number(bound))\"", "\(cumulative)")
        }
        cumulative += counts.transactionBuckets[Self.transactionBuckets.count]
        sample("db_transaction_seconds_bucket", "le=\"+Inf\"", "\(cumulative)")
        sample("db_transaction_seconds_sum", "", Self.number(counts.transactionSum))
        sample("db_transaction_seconds_count", "", "\(counts.transactionCount)")
        family("revocation_sweep_lag_seconds", "gauge", "Seconds since the revocation sweep was last current (it runs every 2 s while streams are open).")
        sample("revocation_sweep_lag_seconds", "", Self.number(sweepLag))
        family("database_up", "gauge", "1 while the gateway reaches its database (a probe every 0.5 s), else 0: requests are answered 503 then.")
        sample("database_up", "", databaseUp ? "1" : "0")
        family("draining", "gauge", "1 while the gateway drains (SIGTERM), else 0.")
        sample("draining", "", draining ? "1" : "0")
        family("start_time_seconds", "gauge", "When the gateway started, in seconds since the Unix epoch.")
        sample("start_time_seconds", "", Self.number(started.timeIntervalSince1970.rounded()))
        return text
    }

    /// A value as the exposition format writes it.
    static func number(_ value: Double) -> String {
        if value == value.rounded() && abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }
}
#endif
