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

extension SyncGateway {
    /// Binds the metrics listener (`/metrics`, `/healthz`, `/readyz`), or throws a one-line error
    /// naming the address.
    func bindMetrics(host: String, port: Int) async throws -> NIOAsyncChannel<NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, Never> {
        let timeout = options.limits.requestTimeout
        do {
            return try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .bind(host: host, port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.httpServerConnection(requestTimeout: timeout)
                    }
                }
        } catch {
            let shown = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
            if isAddressInUse(error) {
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
                    try await outbound.write(.head(HTTPResponseHead(version: .http1_1, status: response.httpStatus, headers: headers)))
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
}
#endif
