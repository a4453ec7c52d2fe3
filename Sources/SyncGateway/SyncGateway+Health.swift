#if PostgreSQL
import Foundation
import HTTPServerKit
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import PostgresNIO
import SyncKitPostgres

/// One refusal or error, as the gateway logs it (``SyncGateway/Options/log``): never a credential,
/// an `Authorization` header or the database's URL, only what the refusal's own line says.
public struct GatewayLogEvent: Sendable {
    public enum Level: String, Sendable { case info, warning, error }

    public var time = Date()
    public var level: Level
    /// `refusal`, `error`, or `recovered` (the revocation sweep reaches the database again).
    public var event: String
    /// A refusal's reason (``GatewayMetrics/RefusalReason``'s label).
    public var reason: String?
    public var status: Int?
    /// The request's method and endpoint (`POST`, `push`; an unknown path is `other`, a method that is
    /// not one of HTTP's own is `other`).
    public var method: String?
    public var endpoint: String?
    /// The client's address.
    public var peer: String?
    /// The line the client was answered with, or the error's.
    public var message: String

    /// One JSON object, on one line, keys in a fixed order.
    public var jsonLine: String {
        var fields: [(String, String)] = [("ts", Self.quoted(Self.timestamp(time))), ("level", Self.quoted(level.rawValue)),
                                          ("event", Self.quoted(event))]
        if let reason { fields.append(("reason", Self.quoted(reason))) }
        if let status { fields.append(("status", String(status))) }
        if let method { fields.append(("method", Self.quoted(method))) }
        if let endpoint { fields.append(("endpoint", Self.quoted(endpoint))) }
        if let peer { fields.append(("peer", Self.quoted(peer))) }
        fields.append(("message", Self.quoted(message)))
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    /// One line of text: `refusal credential 401 POST push from 127.0.0.1: LINE`.
    public var textLine: String {
        var parts = [event]
        if let reason { parts.append(reason) }
        if let status { parts.append(String(status)) }
        if let method { parts.append(method) }
        if let endpoint { parts.append(endpoint) }
        if let peer { parts.append("from \(peer)") }
        return parts.joined(separator: " ") + ": " + message.replacingOccurrences(of: "\n", with: " ")
    }

    static func timestamp(_ date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        var seconds = time_t(milliseconds / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let fraction = String(milliseconds % 1000)
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))."
            + String(repeating: "0", count: 3 - fraction.count) + fraction + "Z"
    }

    /// A JSON string: quotes, backslashes and control characters escaped.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value)
                || scalar.value == 0x2028 || scalar.value == 0x2029:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

/// The metrics address cannot be listened on (in use, or not this machine's): one line naming it.
public struct GatewayListenError: Error, CustomStringConvertible {
    public let description: String
}

extension SyncGateway {
    /// How long a readiness check's answer is reused: a load balancer (or anyone: the checks take no
    /// credential) asking often costs the database one query a second at most.
    static let readinessReuse: Duration = .seconds(1)
    /// How long a readiness check waits for the database before it answers 503.
    static let readinessTimeout: Duration = .seconds(2)

    /// `GET /healthz`, `GET /readyz` and (on the metrics listener) `GET /metrics`; `nil` for any
    /// other request. They take no credential and no rate: a load balancer's checks must not be
    /// refused by the limits devices are held to.
    func operationsAnswer(method: HTTPMethod, endpoint: GatewayMetrics.Endpoint, metrics served: Bool) async -> GatewayResponse? {
        guard endpoint == .healthz || endpoint == .readyz || (served && endpoint == .metrics) else { return nil }
        guard method == .GET || method == .HEAD else {
            return GatewayResponse(status: .methodNotAllowed, body: ByteBuffer(string: "\(endpoint.label) takes GET\n"), outcome: .refused(.protocol))
        }
        switch endpoint {
        case .healthz:
            return GatewayResponse(status: .ok, body: ByteBuffer(string: "ok\n"), contentType: "text/plain; charset=utf-8")
        case .readyz:
            // Not ready is an answer, not an error: counted by its status, and not logged (a load
            // balancer asks every few seconds).
            let (ready, reason) = await readiness()
            // The devices' address says why in general terms only: the database's own words (its
            // address, say) are for the metrics address, which only operators reach.
            let line = !ready && !served && reason.hasPrefix("not ready: the database")
                ? "not ready: the database does not answer, or its schema is not this gateway's" : reason
            return GatewayResponse(status: ready ? .ok : .serviceUnavailable, body: ByteBuffer(string: line + "\n"),
                                   contentType: "text/plain; charset=utf-8")
        default:
            let (connections, inFlight, draining) = state.withLock { state in
                (state.connections, state.open.values.count { !$0.idle }, state.draining)
            }
            let text = metrics.exposition(connections: connections, inFlight: inFlight, liveStreams: hub.count, draining: draining,
                                          databaseUp: link.status.up)
            return GatewayResponse(status: .ok, body: ByteBuffer(string: text),
                                   contentType: "text/plain; version=0.0.4; charset=utf-8")
        }
    }

    /// Whether the gateway takes requests: not draining, the database answers, and its schema is this
    /// gateway's version; with one line saying so, or why not.
    func readiness() async -> (Bool, String) {
        if state.withLock({ $0.draining }) { return (false, "draining: the gateway is shutting down") }
        // The watch's answer, at once, while the database is unreachable (and no query waits on it).
        let status = link.status
        if !status.up {
            return (false, "not ready: the database at \(database.shownEndpoint) is unreachable (\(status.reason)), for \(Self.seconds(.now - status.since))")
        }
        await readinessChecks.acquire()
        defer { readinessChecks.release() }
        // A check's answer is reused for a second, unless the watch changed its mind since.
        if let (at, changes, result) = readinessCache.withLock({ $0 }), changes == status.changes,
           ContinuousClock.now - at < Self.readinessReuse {
            return result
        }
        let result: (Bool, String)
        do {
            let (client, logger) = (try pool(), options.logger)
            try await withDeadline(Self.readinessTimeout, what: "the database") {
                try await client.withTransaction(logger: logger) { connection in
                    try await connection.query("SELECT set_config('role', \(ServerStatements.gatewayRole), true)", logger: logger)
                    try await ServerStatements.checkSchema(connection, logger: logger)
                }
            }
            result = (true, "ready")
        } catch {
            let inner = (error as? PostgresTransactionError)?.closureError ?? error
            if case ReplicationError.server(let message)? = inner as? ReplicationError, message.hasPrefix("no answer from") {
                result = (false, "not ready: the database at \(database.shownEndpoint) does not answer within \(Self.seconds(Self.readinessTimeout))")
            } else if Self.isConnectionFailure(inner) || inner is DatabaseLink.Unreachable {
                result = (false, "not ready: the database at \(database.shownEndpoint) is unreachable (\(Self.unreachableWords(inner)))")
            } else {
                result = (false, "not ready: the database: \(ServerStatements.describe(inner))")
            }
        }
        readinessCache.withLock { $0 = (.now, status.changes, result) }
        if state.withLock({ $0.draining }) { return (false, "draining: the gateway is shutting down") }
        return result
    }

    /// Binds the metrics listener (`/metrics`, `/healthz`, `/readyz`), or throws a one-line error
    /// naming the address.
    func bindMetrics(host: String, port: Int) async throws -> NIOAsyncChannel<NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, Never> {
        let timeout = options.limits.requestTimeout
        do {
            return try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .bind(host: host, port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                        try channel.pipeline.syncOperations.addHandler(RequestDeadline(timeout: timeout))
                        return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch {
            let shown = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
            if "\(error)".contains("Address already in use") {
                throw GatewayListenError(description: "the metrics address \(shown) is in use: pass --metrics-listen HOST:PORT (port 0: any free port), or --metrics-listen off")
            }
            throw GatewayListenError(description: "cannot listen for metrics on \(shown): \(error)")
        }
    }

    /// Serves the metrics listener until it is closed (at the end of a drain); each connection one
    /// request at a time, closed after its answer.
    func serveMetrics(_ server: NIOAsyncChannel<NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, Never>) async {
        try? await withThrowingDiscardingTaskGroup { connections in
            try await server.executeThenClose { inbound in
                for try await connection in inbound {
                    connections.addTask { await self.serveMetricsConnection(connection) }
                }
            }
        }
    }

    private func serveMetricsConnection(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>) async {
        let channel = connection.channel
        let key = ObjectIdentifier(channel)
        let closed = metricsConnections.withLock { state -> Bool in
            if state.closed { return true }
            state.open[key] = channel
            return false
        }
        if closed { channel.close(promise: nil); return }
        defer { metricsConnections.withLock { _ = $0.open.removeValue(forKey: key) } }
        try? await connection.executeThenClose { inbound, outbound in
            var head: HTTPRequestHead?
            for try await part in inbound {
                switch part {
                case .head(let received): head = received
                case .body: continue
                case .end:
                    guard let request = head else { return }
                    let endpoint = GatewayMetrics.Endpoint(uri: request.uri)
                    let response = await operationsAnswer(method: request.method, endpoint: endpoint, metrics: true)
                        ?? GatewayResponse(status: .notFound, body: ByteBuffer(string: "no such endpoint: this address serves /metrics, /healthz and /readyz\n"),
                                           outcome: .refused(.protocol))
                    if endpoint != .metrics { metrics.request(endpoint, status: response.status, sent: response.body.readableBytes, outcome: response.outcome) }
                    var headers = HTTPHeaders()
                    headers.add(name: "Content-Type", value: response.contentType ?? "text/plain; charset=utf-8")
                    headers.add(name: "Content-Length", value: String(response.body.readableBytes))
                    headers.add(name: "Cache-Control", value: "no-store")
                    headers.add(name: "Connection", value: "close")
                    try await outbound.write(.head(HTTPResponseHead(version: .http1_1, status: response.status, headers: headers)))
                    if request.method != .HEAD { try await outbound.write(.body(.byteBuffer(response.body))) }
                    try await outbound.write(.end(nil))
                    return
                }
            }
        }
    }

    /// Closes the metrics listener and its connections (the drain has ended).
    func closeMetrics() {
        let (server, open) = metricsConnections.withLock { state in
            state.closed = true
            return (state.server, Array(state.open.values))
        }
        server?.close(promise: nil)
        for channel in open { channel.close(promise: nil) }
    }

    /// Tells ``Options/log`` of a refusal or an error answered to `endpoint`.
    func log(_ response: GatewayResponse, method: HTTPMethod?, endpoint: GatewayMetrics.Endpoint, peer: SocketAddress?) {
        guard let log = options.log else { return }
        let reason: String?
        switch response.outcome {
        case .answered: return
        case .refused(let refused): reason = refused.label
        case .failed: reason = nil
        }
        let line = response.logLine ?? String(decoding: response.body.readableBytesView.prefix(1_000), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        log(GatewayLogEvent(level: reason == nil ? .error : .warning, event: reason == nil ? "error" : "refusal", reason: reason,
                            status: Int(response.status.code), method: method.map(Self.logged), endpoint: endpoint.label,
                            peer: peer?.ipAddress, message: line))
    }

    /// A request's method as the log shows it: HTTP's own methods by name, any other `other`, so that
    /// a client never writes its text into the log through its method (nor through its path: the
    /// endpoint is one of a fixed set, and a refusal's line holds nothing of the request).
    static func logged(_ method: HTTPMethod) -> String {
        switch method {
        case .GET, .HEAD, .POST, .PUT, .DELETE, .OPTIONS, .PATCH, .CONNECT, .TRACE: method.rawValue
        default: "other"
        }
    }
}
#endif
