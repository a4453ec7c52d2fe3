#if PostgreSQL
import Foundation
import HTTPServerKit
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import SyncWire

/// A replicator's connection to a sync gateway: each operation is one HTTP/1.1 request (TLS when the
/// URL says https), bounded by the statement timeout. Connections are kept alive between requests (a
/// few, idle, for the next ones), so that a push of many batches or a pull of many pages pays one TLS
/// handshake, not one per request.
final class GatewayConnection: ReplicationServer, Sendable {
    let url: SyncGatewayURL
    let token: String
    let group: String
    let maxValueBytes: Int
    let operationTimeout: Duration
    let connectTimeout: Duration
    /// The container's install id (`InstallID`), sent with every request; `nil` for a client that
    /// pushes nothing (a live stream's follower).
    let install: String?
    /// How long a connection is kept idle between requests (``defaultIdleLifetime``).
    let idleLifetime: TimeAmount
    private let sslContext: NIOSSLContext?
    /// Whether ``close()`` was called, and the kept-alive connections between requests.
    private let pool = Locked(Pool())
    private let greeting = Locked<GatewayHello?>(nil)
    /// The largest version this connection's pushes were answered with: sent with each pull
    /// (``GatewayHeader/through``) so that a gateway reading from a replica reads this device's own
    /// writes (issue 51). Never lowered; 0 before a push.
    private let through = Locked<Int64>(0)

    /// Set to now whenever the gateway answers a request with 200 (a replicator's sign that its
    /// server answers).
    let answered: Locked<ContinuousClock.Instant?>?

    /// The largest answer read: a resync's whole state may be large, but not without bound.
    static let maxResponseBytes = 1 << 30

    init(url: SyncGatewayURL, token: String, group: String, maxValueBytes: Int, operationTimeout: Duration, connectTimeout: Duration,
         install: String? = nil, answered: Locked<ContinuousClock.Instant?>? = nil, idleLifetime: TimeAmount = GatewayConnection.defaultIdleLifetime) throws {
        guard SyncTokens.isPresentable(token) else {
            throw ReplicationError.invalidCredential("the token is not one `kvtool sync token issue` prints (\(SyncTokens.prefix) and 43 characters), nor a JWT")
        }
        self.url = url
        self.token = token
        self.group = group
        self.maxValueBytes = maxValueBytes
        self.operationTimeout = operationTimeout
        self.connectTimeout = connectTimeout
        self.install = install
        self.answered = answered
        self.idleLifetime = idleLifetime
        sslContext = url.tls ? try GatewayTLS.context(trusting: url.caFile, for: url.description) : nil
    }

    var isClosed: Bool { pool.withLock { $0.closed } }

    var readOnly: Bool { greeting.withLock { $0?.readOnly ?? false } }

    func close() async {
        let idle = pool.withLock { pool -> [KeptConnection] in
            pool.closed = true
            defer { pool.idle.removeAll() }
            return pool.idle
        }
        // Awaited: when close returns, no connection of this one is still open.
        for connection in idle { try? await connection.channel.close() }
    }

    deinit {
        for connection in pool.withLock({ $0.idle }) { connection.channel.close(promise: nil) }
    }

    // MARK: - Operations

    func hello() async throws -> GatewayHello {
        let answer = try await request(.hello)
        return try decoding { try GatewayHello(decoding: answer) }
    }

    func serverID() async throws -> String {
        let hello = try await hello()
        guard hello.group == group else {
            throw ReplicationError.credentialRefused("it is for another group than \(group)")
        }
        greeting.withLock { $0 = hello }
        return hello.serverID
    }

    /// The device id the gateway records this credential's pushes under (its hello's).
    var assignedDevice: String? { greeting.withLock { $0?.device } }

    /// Pushes as the credential's device: the body names the device the gateway's hello gave (or
    /// none, before a hello), whatever `device` says, and the clock bound is the gateway's (the body's
    /// field is read by no gateway): a refusal names the bound the gateway applied, not `maxClockSkew`.
    func push(group: String, device: String, changes: [OutgoingChange], maxClockSkew: Duration) async throws -> [PushOutcome] {
        // What the gateway would refuse is not sent (``ServerStatements/refuseUndecodable(_:)``).
        try ServerStatements.refuseUndecodable(changes)
        let milliseconds = maxClockSkew.wholeMilliseconds
        // Requests stay under the gateway's body limit: a batch of large values goes in several.
        var outcomes: [PushOutcome] = []
        var start = 0
        while start < changes.count {
            var end = start
            var bytes = 0
            while end < changes.count && end - start < Self.maxRequestChanges
                    && (end == start || bytes + Self.size(of: changes[end]) <= Self.maxRequestBytes / 2) {
                bytes += Self.size(of: changes[end])
                end += 1
            }
            let body = GatewayPushRequest(device: assignedDevice ?? "", maxClockSkewMilliseconds: milliseconds,
                                          changes: Array(changes[start..<end])).encoded()
            let answer = try await request(.push, body: body)
            switch try decoding({ try GatewayPushResponse(decoding: answer, maxValueBytes: maxValueBytes) }) {
            case .clockAhead(let ahead, let limit):
                throw ReplicationError.clockAhead(by: .milliseconds(ahead), limit: .milliseconds(limit))
            case .undecodableValue(let reason):
                throw ReplicationError.undecodableValue(String(reason.prefix(1024)))
            case .refused(let reasons):
                throw ReplicationError.pushRefused(reason: reasons[0].reason, limit: reasons[0].limit,
                                                   detail: reasons.map(\.description).joined(separator: "; "))
            case .outcomes(let some):
                guard some.count == end - start else {
                    throw ReplicationError.server("the sync gateway answered \(some.count) outcomes for \(end - start) changes")
                }
                outcomes += some
                let newest = some.lazy.compactMap(\.version).max() ?? 0
                through.withLock { $0 = max($0, newest) }
            }
            start = end
        }
        return outcomes
    }

    func changes(group: String, after cursor: Int64, limit: Int) async throws -> ChangesPage {
        let known = through.withLock { $0 }
        let answer = try await request(.changes, target: GatewayEndpoint.changes(after: cursor, limit: limit),
                                       headers: known > cursor ? [(GatewayHeader.through.rawValue, String(known))] : [])
        return try decoding { try ChangesPage(decoding: answer, maxValueBytes: maxValueBytes) }
    }

    /// A page of the state after `cursor` (`GET /v1/state?after=CURSOR&limit=N`, at most the
    /// protocol's largest page). A gateway from before paged resyncs refuses the query: the whole
    /// state is asked of it then, as one last page.
    func statePage(group: String, after cursor: StateCursor?, limit: Int) async throws -> StatePage {
        let answer: [UInt8]
        do {
            answer = try await request(.state, target: GatewayEndpoint.state(after: cursor, limit: min(limit, GatewayRequestHead.maxPageChanges)))
        } catch ReplicationError.server(let message) where cursor == nil && message.hasSuffix(Self.olderGatewaysRefusal) {
            let whole = try await request(.state)
            let state = try decoding { try GatewayState(decoding: whole, maxValueBytes: maxValueBytes) }
            return StatePage(prunedThrough: 0, lastSequence: state.lastSequence, rows: state.rows, next: nil)
        }
        return try decoding { try StatePage(decoding: answer, maxValueBytes: maxValueBytes) }
    }

    /// How a gateway from before paged resyncs refuses a query on `/v1/state` (400).
    static let olderGatewaysRefusal = "400: \(GatewayEndpoint.state.path) takes no query"

    func prune(group: String, olderThan age: Duration) async throws -> ServerPruning {
        throw ReplicationError.server("pruning is the database owner's: run it with a postgres:// URL, not through a gateway")
    }

    /// The gateway's body limit this client keeps under (``SyncGateway/Limits``' default).
    static let maxRequestBytes = GatewayWire.maxBodyBytes
    /// Changes in one push request at most: well under a gateway's default budget of changes per push
    /// (100,000), so that a device with many small changes pending is never refused for their number
    /// (and the gateway benchmark's 50,000 still go in one request, as before budgets).
    static let maxRequestChanges = 50_000

    private static func size(of change: OutgoingChange) -> Int {
        40 + change.kind.utf8.count + change.name.utf8.count + change.key.count + (change.value?.count ?? 0)
    }

    private func decoding<R>(_ body: () throws -> R) throws -> R {
        do {
            return try body()
        } catch let error as GatewayWireError {
            throw ReplicationError.server("the sync gateway's answer is malformed: \(error)")
        }
    }

    // MARK: - HTTP

    /// One request to `endpoint` (at `target`, its path with a query, if it takes one) on a connection
    /// of its own; the answer's body, or the refusal as a typed error.
    func request(_ endpoint: GatewayEndpoint, target: String? = nil, headers extra: [(String, String)] = [],
                 body: [UInt8]? = nil) async throws -> [UInt8] {
        let (status, headers, answer) = try await exchange(HTTPMethod(rawValue: endpoint.method), target ?? endpoint.path,
                                                           headers: extra, body: body)
        // Any answer, a refusal too: the server is not silent (`kvtool sync run --give-up-after` gives
        // up on a server that answers nothing, and reports a refusal as the refusal it is).
        answered?.withLock { $0 = .now }
        guard status == .ok else { throw Self.refusal(status, headers, answer) }
        return answer
    }

    /// A refusal's typed error, from its status, its `Retry-After` and its first line.
    static func refusal(_ status: HTTPResponseStatus, _ headers: HTTPHeaders, _ answer: [UInt8]) -> ReplicationError {
        ReplicationError(gatewayStatus: Int(status.code), line: line(answer), retryAfter: headers.first(name: GatewayHeader.retryAfter.rawValue))
    }

    /// One request (`method` on `path`, with `headers` besides the protocol's and `body`, of
    /// `contentType`) on a connection of its own or a kept-alive one, within the operation's deadline:
    /// the answer's status, headers and body, whatever the status.
    func exchange(_ method: HTTPMethod, _ path: String, headers: [(String, String)] = [], body: [UInt8]?,
                  contentType: String = GatewayWire.contentType) async throws -> (HTTPResponseStatus, HTTPHeaders, [UInt8]) {
        guard !isClosed else { throw ReplicationError.server("the connection to the sync gateway is closed") }
        // The connection the request is on, closed if the deadline passes first (and then the request
        // is not sent again).
        let current = Locked(InFlight())
        let head = requestHead(method, path, bodyLength: body?.count, keepAlive: true, headers: headers, contentType: contentType)
        return try await withDeadline(operationTimeout, what: "the sync gateway", onTimeout: {
            current.withLock { state -> Channel? in
                state.expired = true
                return state.channel
            }?.close(promise: nil)
        }) { [self] in
            try await exchange(head, body: body, current: current)
        }
    }

    /// Follows the gateway's live stream (`GET /v1/live`) until it ends: `onChange` is called when it
    /// opens (a change may have come while it was closed) and for every commit of the group. A stream
    /// silent for ``GatewayWire/silence`` (over twice the gateway's heartbeat) is dropped. Throws the refusal, or
    /// ``ReplicationError/credentialRefused(_:)`` when the gateway closes it for a revoked or expired
    /// credential.
    func live(onChange: @Sendable () -> Void) async throws {
        let channel = try await openChannel(silence: .milliseconds(GatewayWire.silence.wholeMilliseconds))
        let head = requestHead(HTTPMethod(rawValue: GatewayEndpoint.live.method), GatewayEndpoint.live.path, bodyLength: nil)
        var closedBecause: GatewayCloseReason?
        do {
            try await channel.executeThenClose { inbound, outbound in
                try await outbound.write(.head(head))
                try await outbound.write(.end(nil))
                var status: HTTPResponseStatus?
                var retryAfter: String?
                var refusal: [UInt8] = []
                var pending = ""
                for try await part in inbound {
                    switch part {
                    case .head(let received): (status, retryAfter) = (received.status, received.headers.first(name: GatewayHeader.retryAfter.rawValue))
                    case .body(let buffer):
                        guard status == .ok else {
                            if refusal.count < 4096 { refusal += buffer.readableBytesView.prefix(4096 - refusal.count) }
                            continue
                        }
                        pending += String(decoding: buffer.readableBytesView, as: UTF8.self)
                        guard pending.utf8.count < 65_536 else { throw ReplicationError.server("the sync gateway's live stream sent an event over 64 KiB") }
                        while let end = pending.range(of: "\n\n") {
                            let block = pending[..<end.lowerBound]
                            pending = String(pending[end.upperBound...])
                            switch GatewayEvent.parse(block) {
                            case (.hello, _)?, (.change, _)?: onChange()
                            case (.closed, let reason)?: closedBecause = GatewayCloseReason(text: reason)
                            case nil: continue   // a heartbeat, or an event this client does not know
                            }
                        }
                    case .end:
                        guard let status, status != .ok else { return }
                        throw ReplicationError(gatewayStatus: Int(status.code), line: Self.line(refusal), retryAfter: retryAfter)
                    }
                }
            }
        } catch let error as ReplicationError {
            throw error
        } catch {
            throw ReplicationError.server("the sync gateway's live stream: \(describeTLS(error))")
        }
        if let closedBecause, closedBecause.refusesCredential {
            throw ReplicationError.credentialRefused(closedBecause.text)
        }
    }

    /// The first line of a refusal, at most 300 characters, control characters dropped.
    static func line(_ bytes: [UInt8]) -> String {
        let text = String(decoding: bytes.prefix(1200), as: UTF8.self)
        let first = text.split(separator: "\n", omittingEmptySubsequences: true).first.map(String.init) ?? "(no reason given)"
        return String(String.UnicodeScalarView(first.unicodeScalars.filter { $0.properties.generalCategory != .control }).prefix(300))
    }

    /// A connection to the gateway, TLS first if the URL says https. `silence`: closed when nothing
    /// arrives for that long (a live stream's heartbeat stopped: a network that drops packets).
    private func openChannel(silence: TimeAmount? = nil) async throws -> NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart> {
        let (host, port, sslContext) = (url.host, url.port, self.sslContext)
        do {
            return try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(.milliseconds(connectTimeout.wholeMilliseconds))
                .connect(host: host, port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if let sslContext {
                            try channel.pipeline.syncOperations.addHandler(try GatewayTLS.handler(context: sslContext, host: host))
                        }
                        if let silence {
                            try channel.pipeline.syncOperations.addHandlers([IdleStateHandler(readTimeout: silence), CloseWhenIdle()])
                        }
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch {
            if let reason = unreachableReason(error) {
                throw ReplicationError.unreachable("cannot connect to the sync gateway at \(url.host.contains(":") ? "[\(url.host)]" : url.host):\(url.port): \(reason); check that the gateway is running there and that --server is right")
            }
            throw ReplicationError.server("cannot connect to the sync gateway \(url): \(describeTLS(error))")
        }
    }

    private func requestHead(_ method: HTTPMethod, _ path: String, bodyLength: Int?, keepAlive: Bool = false,
                             headers extra: [(String, String)] = [], contentType: String = GatewayWire.contentType) -> HTTPRequestHead {
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: url.host.contains(":") ? "[\(url.host)]:\(url.port)" : "\(url.host):\(url.port)")
        headers.add(name: GatewayHeader.authorization.rawValue, value: "Bearer \(token)")
        headers.add(name: GatewayHeader.group.rawValue, value: group)
        if let install { headers.add(name: GatewayHeader.install.rawValue, value: install) }
        headers.add(name: "Content-Length", value: String(bodyLength ?? 0))
        if bodyLength != nil { headers.add(name: GatewayHeader.contentType.rawValue, value: contentType) }
        for (name, value) in extra { headers.add(name: name, value: value) }
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        return HTTPRequestHead(version: .http1_1, method: method, uri: path, headers: headers)
    }

    /// Sends the request on a kept-alive connection, or a new one. A kept-alive connection that fails
    /// before any of its answer arrived was closed by the gateway while it was idle (its 30 s, a drain,
    /// a restart): the request goes again on the next one. A new connection that does so is replaced,
    /// twice at most (``newConnectionAttempts``). So a request may be sent more than once: a push is
    /// idempotent by its tokens, a blob's chunk sent again is answered with the offset the first one
    /// reached, the others only read.
    private func exchange(_ head: HTTPRequestHead, body: [UInt8]?,
                          current: Locked<InFlight>) async throws -> (HTTPResponseStatus, HTTPHeaders, [UInt8]) {
        let body = body.map { ByteBuffer(bytes: $0) }
        do {
            while let kept = pool.withLock({ $0.idle.popLast() }) {
                do {
                    return try await send(head, body, on: kept, current: current)
                } catch let lost as ConnectionLost where !lost.answerBegan {
                    kept.channel.close(promise: nil)
                }
            }
            guard !current.withLock({ $0.expired }) else {
                throw ReplicationError.server("no answer from the sync gateway within \(operationTimeout)")
            }
            // A new connection the gateway closed before any of its answer came: it gave up waiting for
            // the TLS handshake or the request head while this machine was too busy to finish them, or
            // it was restarted. Up to twice more, on others (the deadline still holds: `send` refuses
            // once it has passed). One that failed on an error of its own (a certificate refused) is not
            // tried again.
            var attempt = 1
            while true {
                do {
                    return try await send(head, body, on: try await connect(), current: current)
                } catch let lost as ConnectionLost where !lost.answerBegan && !lost.failed && attempt < Self.newConnectionAttempts {
                    attempt += 1
                }
            }
        } catch let lost as ConnectionLost {
            throw ReplicationError.server("the sync gateway \(url): \(lost.reason)")
        }
    }

    private func send(_ head: HTTPRequestHead, _ body: ByteBuffer?, on connection: KeptConnection,
                      current: Locked<InFlight>) async throws -> (HTTPResponseStatus, HTTPHeaders, [UInt8]) {
        let expired = current.withLock { state -> Bool in
            state.channel = connection.channel
            return state.expired
        }
        guard !expired else {
            connection.channel.close(promise: nil)
            throw ReplicationError.server("no answer from the sync gateway within \(operationTimeout)")
        }
        let channel = connection.channel, collector = connection.collector
        let answer = try await channel.eventLoop.flatSubmit { () -> EventLoopFuture<ResponseCollector.Answer> in
            let promise = channel.eventLoop.makePromise(of: ResponseCollector.Answer.self)
            collector.expect(promise, on: channel)
            channel.write(HTTPClientRequestPart.head(head), promise: nil)
            if let body { channel.write(HTTPClientRequestPart.body(.byteBuffer(body)), promise: nil) }
            channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
            return promise.futureResult
        }.get()
        if !answer.head.isKeepAlive || !channel.isActive || !keep(connection) { channel.close(promise: nil) }
        return (answer.head.status, answer.head.headers, Array(answer.body.readableBytesView))
    }

    /// A new connection for requests, TLS first if the URL says https.
    private func connect() async throws -> KeptConnection {
        let (host, port, sslContext) = (url.host, url.port, self.sslContext)
        let collector = ResponseCollector(maxBytes: Self.maxResponseBytes)
        do {
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(.milliseconds(connectTimeout.wholeMilliseconds))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if let sslContext {
                            try channel.pipeline.syncOperations.addHandler(try GatewayTLS.handler(context: sslContext, host: host))
                        }
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(collector)
                    }
                }
                .connect(host: host, port: port).get()
            pool.withLock { $0.opened += 1 }
            return KeptConnection(channel: channel, collector: collector)
        } catch {
            if let reason = unreachableReason(error) {
                throw ReplicationError.unreachable("cannot connect to the sync gateway at \(url.host.contains(":") ? "[\(url.host)]" : url.host):\(url.port): \(reason); check that the gateway is running there and that --server is right")
            }
            throw ReplicationError.server("cannot connect to the sync gateway \(url): \(describeTLS(error))")
        }
    }

    /// How many new connections a request is tried on when the gateway closes each before answering.
    static let newConnectionAttempts = 3
    /// Idle connections kept for the next requests (a pipelined push has two batches in flight).
    static let maxIdleConnections = 2
    /// How long a connection is kept idle: a device between syncs holds no connection of a gateway
    /// whose connections are counted (``SyncGateway/Limits/maxConnections``) for long.
    static let defaultIdleLifetime = TimeAmount.seconds(5)

    /// Keeps `connection` for the next request, for `idleLifetime` at most; false if the pool is
    /// closed or full.
    private func keep(_ connection: KeptConnection) -> Bool {
        let pool = self.pool
        guard let generation = pool.withLock({ pool -> Int? in
            guard !pool.closed, pool.idle.count < Self.maxIdleConnections else { return nil }
            pool.generation += 1
            pool.idle.append(KeptConnection(channel: connection.channel, collector: connection.collector, generation: pool.generation))
            return pool.generation
        }) else { return false }
        connection.channel.eventLoop.scheduleTask(in: idleLifetime) {
            // Still idle (not taken for a request since): closed.
            let expired = pool.withLock { pool -> Bool in
                guard let index = pool.idle.firstIndex(where: { $0.generation == generation }) else { return false }
                pool.idle.remove(at: index)
                return true
            }
            if expired { connection.channel.close(promise: nil) }
        }
        return true
    }

    /// The connection a request is on, and whether its deadline passed.
    struct InFlight: Sendable {
        var channel: Channel?
        var expired = false
    }

    struct Pool {
        var closed = false
        var idle: [KeptConnection] = []
        var generation = 0
        /// Connections opened for requests, over this object's life.
        var opened = 0
    }

    /// How many connections requests have opened so far (one per TLS handshake).
    var connectionsOpened: Int { pool.withLock { $0.opened } }
    /// How many of the idle connections are still open at this end (the others were closed by the
    /// gateway, and this end finds out on its next request).
    var idleConnectionsStillOpen: Int { pool.withLock { $0.idle.filter { $0.channel.isActive }.count } }
    /// How many are kept idle now.
    var idleConnections: Int { pool.withLock { $0.idle.count } }

    struct KeptConnection: Sendable {
        let channel: Channel
        let collector: ResponseCollector
        /// Which time it was kept (tells its idle timer whether it was taken since).
        var generation = 0
    }

}

#endif
