#if PostgreSQL
import Foundation
import HTTPServerKit
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import PostgresNIO
import SyncKitPostgres

/// A stateless sync gateway between devices and the replication database.
///
/// A device presents a credential (``SyncTokens``) with every request. The gateway checks it, then
/// runs the request in one database transaction as the role `kvsync_gateway`, scoped to the
/// credential's group: that role owns nothing, bypasses no row-level security, and the policies and
/// `kvsync_push` read the scope, so PostgreSQL itself keeps each group to its own rows, whatever the
/// gateway's code does. Several gateways can serve one database; none keeps state of its own.
///
/// ```swift
/// let gateway = try SyncGateway(database: ServerURL("postgres://kv@127.0.0.1/kv"))
/// try await gateway.run(host: "0.0.0.0", port: 8443) { url in print("gateway listening on \(url)") }
/// ```
public final class SyncGateway: Sendable {
    /// What one device or connection may ask of the gateway.
    public struct Limits: Sendable {
        /// The largest request body (a push batch; devices split theirs to stay under it).
        public var maxBodyBytes = 32 << 20
        /// Request bodies buffered at once, over every connection: past this, a request gets 503 (so
        /// that many connections each sending a large body cannot make the gateway allocate without
        /// bound).
        public var maxBufferedBytes = 256 << 20
        /// Open connections; past this, new ones get 503 and are closed.
        public var maxConnections = 4_096
        /// A request's head and body must arrive within this (a client that trickles them cannot hold
        /// a connection); a connection silent this long between requests is closed too.
        public var requestTimeout: Duration = .seconds(30)
        /// Requests per second per credential, and the burst allowed above it.
        public var requestsPerSecond = 50.0
        public var burst = 200.0
        /// A page of changes holds this many bytes of keys and values at most (its first change whatever
        /// its size); the bound is applied in the statement.
        public var maxPageBytes = ChangesPage.maxBytes
        /// PostgreSQL connections the gateway holds at most (and one more for its `LISTEN`).
        public var databaseConnections = 16
        /// Live streams (`GET /v1/live`) open at once; past this, devices get 503 and poll.
        public var maxStreams = 20_000
        /// Live streams one credential may hold open (a device needs one).
        public var maxStreamsPerCredential = 16
        public init() {}
    }

    public struct Options: Sendable {
        public var limits = Limits()
        /// PEM certificate chain and private key: serve HTTPS (else plain HTTP, for loopback or a
        /// network that is trusted).
        public var tlsCertificate: String?
        public var tlsKey: String?
        /// JWTs an app's backend signs, accepted beside the database's tokens (`nil`: tokens only).
        public var jwt: JWTVerifier?
        /// The largest value read from the database.
        public var maxValueBytes = 16 << 20
        public var logger = Logger(label: "kvstore.gateway", factory: { _ in SwiftLogNoOpLogHandler() })
        public init() {}
    }

    let database: ServerURL
    let options: Options
    let client: PostgresClient
    private let sslContext: NIOSSLContext?
    private let state = Locked(State())
    let limiter: RateLimiter
    let hub: LiveHub

    struct State {
        var connections = 0
        var bufferedBytes = 0
        /// Each open connection, and whether it is between requests (closed at once on a drain).
        var open: [ObjectIdentifier: (channel: Channel, idle: Bool)] = [:]
        var draining = false
        var server: Channel?
    }

    /// - Throws: ``ReplicationError/server(_:)`` if the TLS certificate or key cannot be read.
    public init(database: ServerURL, options: Options = Options()) throws {
        self.database = database
        self.options = options
        client = PostgresClient(configuration: try database.poolConfiguration(connections: options.limits.databaseConnections),
                                backgroundLogger: options.logger)
        limiter = RateLimiter(perSecond: options.limits.requestsPerSecond, burst: options.limits.burst)
        hub = LiveHub(maxStreams: options.limits.maxStreams, maxStreamsPerCredential: options.limits.maxStreamsPerCredential)
        switch (options.tlsCertificate, options.tlsKey) {
        case (nil, nil):
            sslContext = nil
        case (let certificate?, let key?):
            do {
                let chain = try NIOSSLCertificate.fromPEMFile(certificate).map { NIOSSLCertificateSource.certificate($0) }
                var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain,
                                                                               privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
                configuration.minimumTLSVersion = .tlsv12
                sslContext = try NIOSSLContext(configuration: configuration)
            } catch {
                throw ReplicationError.server("cannot use the TLS certificate \(certificate) and key \(key): \(error)")
            }
        default:
            throw ReplicationError.server("TLS needs both a certificate and a key")
        }
    }

    /// Binds `host:port` (0: any free port), calls `ready` with the URL devices use, and serves until
    /// ``shutdown()`` (then drains: requests in flight finish) or cancellation.
    public func run(host: String = "127.0.0.1", port: Int = 0, ready: @Sendable (String) -> Void) async throws {
        try await withThrowingDiscardingTaskGroup { tasks in
            tasks.addTask { await self.client.run() }
            try await checkSchema()
            tasks.addTask { await self.listen() }
            tasks.addTask { await self.sweepRevocations() }
            tasks.addTask { await self.beat() }
            let limits = options.limits
            let sslContext = self.sslContext
            let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.backlog, value: 1024)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .bind(host: host, port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if let sslContext {
                            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                        }
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                        try channel.pipeline.syncOperations.addHandler(RequestDeadline(timeout: limits.requestTimeout))
                        return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(wrappingChannelSynchronously: channel)
                    }
                }
            state.withLock { $0.server = server.channel }
            let bound = server.channel.localAddress?.port ?? port
            let shown = host.contains(":") ? "[\(host)]" : host
            ready("\(sslContext == nil ? "http" : "https")://\(shown):\(bound)")
            try await withThrowingDiscardingTaskGroup { connections in
                try await server.executeThenClose { inbound in
                    for try await connection in inbound {
                        connections.addTask { await self.serve(connection) }
                    }
                }
            }
            // Every connection has ended (drained): stop the database pool, the LISTEN and the sweep.
            tasks.cancelAll()
        }
    }

    /// Stops accepting connections; requests in flight finish, live streams end with a `closed`
    /// event, then ``run(host:port:ready:)`` returns.
    public func shutdown() {
        let (server, idle) = state.withLock { state -> (Channel?, [Channel]) in
            state.draining = true
            return (state.server, state.open.values.filter(\.idle).map(\.channel))
        }
        server?.close(promise: nil)
        hub.closeAll()
        // Connections between requests are closed now; those mid-request close after their answer.
        for channel in idle { channel.close(promise: nil) }
    }

    /// Brings the schema up to date if this login may, and checks that it is.
    func checkSchema() async throws {
        do {
            try await client.withConnection { connection in
                try await ServerStatements.migrate(connection, logger: options.logger)
            }
        } catch let error as ReplicationError {
            throw error
        } catch {
            throw ReplicationError.server("cannot prepare the database \(database): \(String(reflecting: error).prefix(300))")
        }
    }

    // MARK: - One connection

    private func serve(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>) async {
        let admitted = state.withLock { state in
            guard state.connections < options.limits.maxConnections else { return false }
            state.connections += 1
            return true
        }
        let key = ObjectIdentifier(connection.channel)
        if admitted { state.withLock { $0.open[key] = (connection.channel, true) } }
        defer {
            if admitted {
                state.withLock { state in
                    state.connections -= 1
                    state.open[key] = nil
                }
            }
        }
        func idle(_ idle: Bool) {
            let draining = state.withLock { state -> Bool in
                state.open[key]?.idle = idle
                return state.draining
            }
            if idle && draining { connection.channel.close(promise: nil) }
        }
        let limits = options.limits
        try? await connection.executeThenClose { inbound, outbound in
            var head: HTTPRequestHead?
            var body = ByteBuffer()
            var refusal: GatewayResponse?
            // Bytes of this request's body counted against the gateway's budget for all bodies.
            var reserved = 0
            defer { release(reserved) }
            for try await part in inbound {
                switch part {
                case .head(let requestHead):
                    head = requestHead
                    idle(false)
                    body.clear()
                    release(reserved)
                    reserved = 0
                    refusal = nil
                    // Over the connection limit: refused at once, before any body is read.
                    guard admitted else {
                        try await write(.refusal(.serviceUnavailable, "too many connections (\(limits.maxConnections)); try again"),
                                        keepAlive: false, to: outbound)
                        return
                    }
                    if let length = requestHead.headers.first(name: "content-length").flatMap(Int.init), length > limits.maxBodyBytes {
                        refusal = .refusal(.payloadTooLarge, "the request body is over \(limits.maxBodyBytes) bytes")
                    }
                case .body(var buffer):
                    guard refusal == nil else { continue }
                    if body.readableBytes + buffer.readableBytes > limits.maxBodyBytes {
                        refusal = .refusal(.payloadTooLarge, "the request body is over \(limits.maxBodyBytes) bytes")
                        body = ByteBuffer()
                    } else if !reserve(buffer.readableBytes) {
                        // Every connection's body together stays under `maxBufferedBytes`.
                        refusal = .refusal(.serviceUnavailable, "the gateway is busy with other requests' bodies; try again")
                        body = ByteBuffer()
                    } else {
                        reserved += buffer.readableBytes
                        body.writeBuffer(&buffer)
                    }
                case .end:
                    guard let requestHead = head else { continue }
                    head = nil
                    let response: GatewayResponse
                    if let refusal {
                        response = refusal
                    } else if requestHead.method == .GET, (try? Self.operation(of: requestHead)) == .live {
                        try await streamLive(requestHead, to: outbound)
                        return
                    } else {
                        response = await respond(to: requestHead, body: Array(body.readableBytesView))
                    }
                    body = ByteBuffer()
                    release(reserved)
                    reserved = 0
                    let draining = state.withLock { $0.draining }
                    let keepAlive = refusal == nil && !draining && requestHead.isKeepAlive
                    try await write(response, keepAlive: keepAlive, to: outbound)
                    if !keepAlive { return }
                    idle(true)
                }
            }
        }
    }

    /// Counts `bytes` of a request body against ``Limits/maxBufferedBytes``; false if over.
    private func reserve(_ bytes: Int) -> Bool {
        state.withLock { state in
            guard state.bufferedBytes + bytes <= options.limits.maxBufferedBytes else { return false }
            state.bufferedBytes += bytes
            return true
        }
    }

    private func release(_ bytes: Int) {
        guard bytes > 0 else { return }
        state.withLock { $0.bufferedBytes -= bytes }
    }

    func write(_ response: GatewayResponse, keepAlive: Bool,
                       to outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: response.status == .ok ? GatewayWire.contentType : "text/plain; charset=utf-8")
        headers.add(name: "Content-Length", value: String(response.body.count))
        headers.add(name: "Cache-Control", value: "no-store")
        if let retryAfter = response.retryAfter { headers.add(name: "Retry-After", value: String(retryAfter)) }
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        try await outbound.write(.head(HTTPResponseHead(version: .http1_1, status: response.status, headers: headers)))
        try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: response.body))))
        try await outbound.write(.end(nil))
    }
}

/// One answer: the protocol's bytes, or a refusal as one line of text.
struct GatewayResponse: Sendable {
    var status: HTTPResponseStatus
    var body: [UInt8]
    var retryAfter: Int?

    static func ok(_ body: [UInt8]) -> GatewayResponse { GatewayResponse(status: .ok, body: body) }

    static func refusal(_ status: HTTPResponseStatus, _ line: String, retryAfter: Int? = nil) -> GatewayResponse {
        GatewayResponse(status: status, body: Array((line + "\n").utf8), retryAfter: retryAfter)
    }
}

/// A token bucket per credential (its hash), bounded in the credentials it remembers.
final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var at: ContinuousClock.Instant
    }
    private let perSecond: Double
    private let burst: Double
    private let buckets = Locked([[UInt8]: Bucket]())
    static let maxRemembered = 100_000

    init(perSecond: Double, burst: Double) {
        self.perSecond = perSecond
        self.burst = max(burst, 1)
    }

    /// `nil` if the request may go ahead, else how many seconds to wait.
    func admit(_ key: [UInt8], now: ContinuousClock.Instant = .now) -> Int? {
        buckets.withLock { buckets in
            if buckets.count >= Self.maxRemembered && buckets[key] == nil {
                // Full buckets are forgotten first (they would refill to `burst` anyway).
                buckets = buckets.filter { now - $0.value.at < .seconds(burst / perSecond) }
                if buckets.count >= Self.maxRemembered { buckets.removeAll(keepingCapacity: true) }
            }
            var bucket = buckets[key] ?? Bucket(tokens: burst, at: now)
            let elapsed = now - bucket.at
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            bucket.tokens = min(burst, bucket.tokens + seconds * perSecond)
            bucket.at = now
            guard bucket.tokens >= 1 else {
                buckets[key] = bucket
                return max(1, Int(((1 - bucket.tokens) / perSecond).rounded(.up)))
            }
            bucket.tokens -= 1
            buckets[key] = bucket
            return nil
        }
    }
}
#endif
