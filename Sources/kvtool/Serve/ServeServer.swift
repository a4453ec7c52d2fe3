#if Serve
import Foundation
import HTTPServerKit
import KVStore
import NIOCore
import NIOHTTP1
import NIOPosix

/// `kvtool serve`'s HTTP/1.1 server on SwiftNIO: bound to 127.0.0.1 only, every request checked for
/// the access token, the Host header and its origin before anything else, store work on a small thread
/// pool (LMDB reads block), and server-sent events from ``CommitFeed``.
final class ServeServer: Sendable {
    let api: ServeAPI
    let feed: CommitFeed
    /// The secret in the printed URL: 32 random bytes as hex.
    let token: String
    private let threadPool: NIOThreadPool
    private let connections = ConnectionLimit(max: ServeLimits.connections)
    private let port = Locked(0)
    private let requestTimeout: Duration

    /// The token's cookie, named for the port as Jupyter does: a browser sends a cookie of 127.0.0.1
    /// to every port of it, so two servers (or another service) would otherwise share one name.
    static func cookieName(port: Int) -> String { "kvtool_token_\(port)" }

    init(api: ServeAPI, feed: CommitFeed, token: String = ServeServer.randomToken(),
         requestTimeout: Duration = ServeLimits.requestTimeout) {
        self.api = api
        self.feed = feed
        self.token = token
        self.requestTimeout = requestTimeout
        threadPool = NIOThreadPool(numberOfThreads: 2)
    }

    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// Binds 127.0.0.1:`port` (0: any free port), calls `ready` with the port bound, and serves until
    /// the process ends.
    func run(port requested: Int, ready: @Sendable (Int) -> Void) async throws {
        threadPool.start()
        try feed.start()
        defer { feed.stop() }
        let requestTimeout = requestTimeout
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: requested) { channel in
                channel.eventLoop.makeCompletedFuture {
                    // A connection silent both ways for a minute is closed (an event stream is not: it
                    // sends a comment every 15 s), so idle clients cannot hold the connection slots.
                    try channel.pipeline.syncOperations.addHandlers([IdleStateHandler(allTimeout: .seconds(60)), CloseWhenIdle()])
                    // A request whose head and body take longer is cut off: bytes that keep trickling
                    // in reset the idle timer, not this one.
                    return try channel.httpServerConnection(requestTimeout: requestTimeout)
                }
            }
        let bound = server.channel.localAddress?.port ?? requested
        port.withLock { $0 = bound }
        ready(bound)
        try await withThrowingDiscardingTaskGroup { group in
            try await server.executeThenClose { inbound in
                for try await connection in inbound {
                    group.addTask { await self.serve(connection) }
                }
            }
        }
    }

    // MARK: - One connection

    private func serve(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>) async {
        let admitted = connections.enter()
        defer { if admitted { connections.leave() } }
        try? await connection.executeThenClose { inbound, outbound in
            var head: HTTPRequestHead?
            var body: [UInt8] = []
            var tooLarge = false
            for try await part in inbound {
                switch part {
                case .head(let requestHead):
                    (head, body, tooLarge) = (requestHead, [], false)
                case .body(var buffer):
                    if body.count + buffer.readableBytes > ServeLimits.requestBody {
                        tooLarge = true
                        body = []
                    } else if !tooLarge {
                        body += buffer.readBytes(length: buffer.readableBytes) ?? []
                    }
                case .end:
                    guard let requestHead = head else { continue }
                    head = nil
                    guard admitted else {
                        try await write(.error(.serviceUnavailable, connections.refusalLine), keepAlive: false, to: outbound)
                        return
                    }
                    guard !tooLarge else {
                        try await write(.error(.payloadTooLarge, "the request body is over \(ServeLimits.requestBody) bytes"), keepAlive: false, to: outbound)
                        return
                    }
                    let request = ServeRequest(head: requestHead, body: body)
                    if var refusal = authorize(request) {
                        if request.path == "/" || request.path == "/index.html" { refusal = Self.deniedPage(refusal) }
                        try await write(refusal, keepAlive: requestHead.isKeepAlive, to: outbound)
                    } else if request.path == "/api/events" && request.method == .GET {
                        try await streamEvents(request, on: connection.channel, to: outbound)
                        return
                    } else {
                        var response = await respond(request)
                        if request.query["token"] != nil && (request.path == "/" || request.path == "/index.html") {
                            // As Jupyter does: the page's own requests then carry the token as a cookie.
                            let name = Self.cookieName(port: port.withLock { $0 })
                            response.headers.append(("Set-Cookie", "\(name)=\(token); Path=/; HttpOnly; SameSite=Strict"))
                        }
                        try await write(response, keepAlive: requestHead.isKeepAlive, to: outbound)
                    }
                    if !requestHead.isKeepAlive { return }
                }
            }
        }
    }

    /// 403 unless the request names this server in its Host header (which a page of another site,
    /// rebinding its name to 127.0.0.1, cannot), comes from no page of another origin, and carries the
    /// token (query, header or cookie).
    ///
    /// A browser says where a request comes from: `Origin` on every state-changing request and on a
    /// cross-origin event stream, `Sec-Fetch-Site` on every request. A page of another port of
    /// 127.0.0.1 is another origin but the same *site*: it gets the cookie sent along, so its requests
    /// are refused here by their origin, whatever they carry. Clients that are not browsers send
    /// neither header and need the token.
    func authorize(_ request: ServeRequest) -> ServeResponse? {
        let port = port.withLock { $0 }
        let host = request.headers["host"].first ?? ""
        guard host == "127.0.0.1:\(port)" || host == "localhost:\(port)" else {
            return .error(.forbidden, "the Host header \(JSONText.quoted(host)) is not this server's address, 127.0.0.1:\(port)")
        }
        if let origin = request.headers["origin"].first, origin != "http://127.0.0.1:\(port)" && origin != "http://localhost:\(port)" {
            return .error(.forbidden, "the request comes from another origin, \(JSONText.quoted(origin)): only this server's own page may call it")
        }
        if let site = request.headers["sec-fetch-site"].first, site != "same-origin" && site != "none" {
            return .error(.forbidden, "the request comes from a page of another origin (Sec-Fetch-Site: \(site)): only this server's own page may call it")
        }
        let presented = request.query["token"] ?? request.headers["x-kvtool-token"].first ?? request.cookie(Self.cookieName(port: port))
        guard let presented, Self.constantTimeEqual(presented, token) else {
            return .error(.forbidden, presented == nil
                ? "no access token: open the URL kvtool serve printed, with its ?token="
                : "wrong access token: open the URL kvtool serve printed, with its ?token=")
        }
        return nil
    }

    /// The refusal of the page itself, as a page a browser shows (no script, nothing of the container).
    static func deniedPage(_ refusal: ServeResponse) -> ServeResponse {
        let reason = refusal.message ?? ""
        let escaped = reason.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
        let html = """
            <!doctype html><html lang="en"><head><meta charset="utf-8"><title>403 - kvtool serve</title></head>
            <body><h1>403: access denied</h1><p>Open the URL with its token, as printed by kvtool serve.</p>
            <p><code>\(escaped)</code></p></body></html>

            """
        return ServeResponse(status: refusal.status, contentType: "text/html; charset=utf-8", body: Array(html.utf8))
    }

    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let (x, y) = (Array(a.utf8), Array(b.utf8))
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// The handler's answer, computed on the thread pool.
    private func respond(_ request: ServeRequest) async -> ServeResponse {
        do {
            return try await threadPool.runIfActive { [api] in api.respond(request) }
        } catch {
            return .error(.internalServerError, "\(error)")
        }
    }

    private func write(_ response: ServeResponse, keepAlive: Bool,
                       to outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws {
        var headers = Self.commonHeaders
        headers.add(name: "Content-Type", value: response.contentType)
        headers.add(name: "Content-Length", value: String(response.body.count))
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        for (name, value) in response.headers { headers.add(name: name, value: value) }
        try await outbound.write(.head(HTTPResponseHead(version: .http1_1, status: response.status, headers: headers)))
        try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: response.body))))
        try await outbound.write(.end(nil))
    }

    /// Headers on every response: nothing cached, nothing framed, no referrer (the URL holds the
    /// token), and the page may load only its own script, style and images.
    static let commonHeaders: HTTPHeaders = [
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
    ]

    // MARK: - Server-sent events

    /// `/api/events`: a hello with the current transaction, then one event per commit until the
    /// client goes away (its connection's close ends the stream).
    private func streamEvents(_ request: ServeRequest, on channel: Channel,
                              to outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws {
        guard let stream = feed.subscribe() else {
            try await write(.error(.serviceUnavailable, "too many open event streams (\(ServeLimits.eventStreams))"), keepAlive: false, to: outbound)
            return
        }
        var headers = Self.commonHeaders
        headers.add(name: "Content-Type", value: "text/event-stream; charset=utf-8")
        headers.add(name: "Connection", value: "close")
        try await outbound.write(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers)))
        let transaction = (try? await threadPool.runIfActive { [api] in try api.container.store.read { $0.transactionID } }) ?? 0
        try await outbound.write(.body(.byteBuffer(ByteBuffer(string: "retry: 1000\nevent: hello\ndata: \(try Output.line(["transaction": .integer(transaction)]))\n\n"))))
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await channel.closeFuture.get() }
            group.addTask {
                for await event in stream {
                    do {
                        try await outbound.write(.body(.byteBuffer(ByteBuffer(string: event))))
                    } catch {
                        return
                    }
                }
            }
            // Whichever ends first (the client left, or a write failed) ends the other.
            await group.next()
            group.cancelAll()
        }
    }
}
#endif
