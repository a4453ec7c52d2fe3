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
import SyncWire

/// A stateless sync gateway between devices and the replication database.
///
/// A device presents a credential (``SyncTokens``) with every request. The gateway checks it from the
/// request's headers before it reads a byte of the body, then runs the request in one database
/// transaction as the role `kvsync_gateway`, scoped to the credential's group and device: that role
/// owns nothing, bypasses no row-level security, and the policies and `kvsync_push` read the scope, so
/// PostgreSQL itself keeps each group to its own rows, whatever the gateway's code does. Who pushes,
/// and how far ahead a stamp may be, come from the credential and the gateway, never from the
/// request. Several gateways can serve one database; none keeps state of its own.
///
/// The gateway logs in as a role that is only a member of `kvsync_gateway` (`kvtool sync setup
/// --gateway-login NAME` makes one), and refuses to start as the schema's owner, a superuser, or a
/// role that bypasses row-level security or may create roles (``Options/allowPrivilegedRole``).
///
/// ```swift
/// let gateway = try SyncGateway(database: ServerURL("postgres://kvsync_gateway_login@127.0.0.1/kv"))
/// try await gateway.run(host: "0.0.0.0", port: 8443) { url in print(GatewayReadyLine(url: "\(url)")) }
/// ```
public final class SyncGateway: Sendable {
    /// What one device or connection may ask of the gateway.
    public struct Limits: Sendable {
        /// The largest request body (a push batch; devices split theirs to stay under it). A declared
        /// `Content-Length` over it is refused (413) before the body is read.
        public var maxBodyBytes = GatewayWire.maxBodyBytes
        /// Request bodies buffered at once, over every connection: past this, a request gets 503 (so
        /// that many connections each sending a large body cannot make the gateway allocate without
        /// bound). A body is counted from its declared length, once its credential is verified.
        public var maxBufferedBytes = 256 << 20
        /// Answers being written at once, over every connection, so that devices that never read their
        /// answers cannot make the gateway hold them without bound. A page (of the log, or of a resync)
        /// reserves its room before it is read (its statement is bounded by what it got: alone, its
        /// whole ``maxPageBytes``; beside other answers, at most a quarter of the room left); with no
        /// room, it gets 503 and nothing is read. Another answer that would pass it is dropped (503).
        public var maxAnswerBytes = 128 << 20
        /// A connection whose writes make no progress this long (its device stopped reading an answer,
        /// or a live stream: a write waited this long and none completed meanwhile) is closed, and what
        /// it held released. A device must take each 256 KiB slice of an answer within it.
        public var answerTimeout: Duration = .seconds(30)
        /// A request's transaction must end within this, or the device gets 503 (`Retry-After`) and the
        /// transaction's connection is closed (PostgreSQL rolls it back); one whose connection closes
        /// under it (a primary killed mid-request) is answered 503 at once. Either way a push may have
        /// committed: the device sends it again and is answered `duplicate`.
        public var transactionTimeout: Duration = .seconds(60)
        /// Open connections; past this, new ones get 503 and are closed.
        public var maxConnections = 4_096
        /// Connections accepted in the last second whose first request has not come yet: at this many,
        /// the gateway accepts the next connection only once one of them has sent its request's head
        /// (or a second has passed), so that devices connecting all at once are accepted as fast as
        /// their requests are read (``ConnectionsAwaitingRequest``: it halved one gateway's peak RSS
        /// at 10,000 devices connecting at once).
        public var maxConnectionsAwaitingRequest = 256
        /// A request's head and body must arrive within this (a client that trickles them cannot hold
        /// a connection); a connection silent this long between requests is closed too.
        public var requestTimeout: Duration = .seconds(30)
        /// Requests per second per verified principal (a group's device, or a JWT without one), and
        /// the burst allowed above it.
        public var requestsPerSecond = 50.0
        public var burst = 200.0
        /// Principals whose rate is remembered at once: the least recently seen is forgotten first.
        public var maxRememberedPrincipals = 100_000
        /// Failed authentications per second from one source address (an IPv4 address, an IPv6 /64;
        /// the client's, from a `--trusted-proxy`'s PROXY header), and the burst allowed above it: past
        /// it, the address's unknown credentials are checked at 1 a second, the others get 429 before
        /// anything is looked up. A credential that verified in the last 10 minutes is checked
        /// whatever its address's failures.
        public var failedAuthenticationsPerSecond = 2.0
        public var failedAuthenticationBurst = 20.0
        /// Source addresses whose failures are remembered at once.
        public var maxRememberedAddresses = 100_000
        /// A page of changes, or of a group's state (a resync), holds this many bytes of keys and values
        /// at most (its first row whatever its size); the bound is applied in the statement.
        public var maxPageBytes = ChangesPage.maxBytes
        /// PostgreSQL connections the gateway holds at most (and one more for its `LISTEN`, one for
        /// following revocations, and one that watches whether the database answers).
        public var databaseConnections = 16
        /// Live streams (`GET /v1/live`) open at once; past this, devices get 503 and poll.
        public var maxStreams = 20_000
        /// Live streams one principal may hold open (a device needs one).
        public var maxStreamsPerCredential = 16
        /// Resyncs (`GET /v1/state`, a page or the whole state) read at once over the gateway. Besides,
        /// one credential has one resync read or written at a time (its others wait, up to 8), and
        /// waiting resyncs are taken one group after the other, so that one member's many resyncs
        /// delay another group's by one read at most.
        public var resyncsAtOnce = 4
        /// What one push may add to its group's log, in changes and in bytes of keys and values; past
        /// either, the push is refused whole (``GatewayPushResponse/refused(_:)``: the reason, the limit,
        /// what the batch came to), and nothing of it is applied. A device of this release sends at most
        /// 50,000 changes a request.
        public var maxPushChanges = 100_000
        public var maxPushBytes = 32 << 20
        /// What one device (a credential's group and device name, whatever its installs) may add in a
        /// minute, and a whole group in an hour: sliding budgets (refilled evenly over their period),
        /// counted by this gateway from the pushes it admits. A push past one is refused whole, with the
        /// seconds until it fits. Sized so that the demo and the benchmarks never meet them (the
        /// gateway benchmark pushes 50,000 changes of 100 bytes), while one member can no longer grow
        /// every device's store at the database's speed.
        public var deviceChangesPerMinute = 200_000
        public var deviceBytesPerMinute = 256 << 20
        public var groupChangesPerHour = 2_000_000
        public var groupBytesPerHour = 4 << 30
        /// A file's largest size (issue 49): an upload that declares more (`Upload-Length`) is refused
        /// 413 `too_large`, naming this limit, before its body is read; the database refuses it too.
        public var maxFileBytes: Int64 = BlobWire.defaultMaxFileBytes
        /// The bytes of files one group may hold on the server, an upload's whole size counted from its
        /// first chunk: a chunk that would pass it is refused 507 `quota_exceeded`, naming this limit
        /// (the database counts, in the chunk's transaction).
        public var maxGroupBlobBytes: Int64 = BlobWire.defaultMaxGroupBytes
        public init() {}
    }

    public struct Options: Sendable {
        public var limits = Limits()
        /// PEM certificate chain and private key: serve HTTPS (else plain HTTP, for loopback or a
        /// network that is trusted). TLS 1.2 offers only ECDHE key exchange with AEAD ciphers; TLS 1.3
        /// is as BoringSSL has it. The key's file is a secret file: refused when a user other than its
        /// owner can read it (root's may let its group read it), as `ssh` refuses such a key.
        public var tlsCertificate: String?
        public var tlsKey: String?
        /// JWTs an app's backend signs, accepted beside the database's tokens (`nil`: tokens only).
        public var jwt: JWTVerifier?
        /// How far ahead of the server's clock a pushed stamp may be (within the server's own bound,
        /// which only the database's owner sets): a device never chooses it.
        public var maxClockSkew: Duration = .seconds(60)
        /// Start even when the database login is the schema's owner, a superuser, or a role that
        /// bypasses row-level security or creates roles (a deployment that knowingly gives up the
        /// second line of isolation; `--allow-privileged-role`).
        public var allowPrivilegedRole = false
        /// The largest value read from the database.
        public var maxValueBytes = 16 << 20
        /// How long ``SyncGateway/run(host:port:ready:)`` waits for a database that nothing answers
        /// for (not started yet, say) before it fails with ``ReplicationError/unreachable(_:)``.
        public var databaseTimeout: Duration = .seconds(30)
        /// Told once, with a line saying what it waits for, when the database does not answer the
        /// first attempt to connect (`kvtool sync gateway` prints it on standard error).
        public var waitingForDatabase: (@Sendable (String) -> Void)?
        public var logger = Logger(label: "kvstore.gateway", factory: { _ in SwiftLogNoOpLogHandler() })
        /// Where to serve `GET /metrics` (Prometheus's text format), `/healthz` and `/readyz` apart from
        /// the devices' address (`nil`: nowhere; the main address answers the health checks anyway).
        /// Port 0: any free port.
        public var metricsHost: String?
        public var metricsPort = 0
        /// Told once, with the metrics listener's URL (`http://HOST:PORT/metrics`), before the ready
        /// callback of ``SyncGateway/run(host:port:ready:)``.
        public var metricsListening: (@Sendable (String) -> Void)?
        /// The peers whose PROXY protocol header (version 2 or 1, as HAProxy's `send-proxy-v2` and
        /// `send-proxy` send it) names the client a connection is from (`--trusted-proxy CIDR`): the
        /// address that limits, metrics and the log then count. A header from any other peer is refused.
        public var trustedProxies: [ProxyNetwork] = []
        /// Told of each refusal and error (`kvtool sync gateway --log-format json|text` writes them on
        /// standard error), on the thread that answers: it must not block for long.
        public var log: (@Sendable (GatewayLogEvent) -> Void)?
        /// A hot standby of the database for reads (`--read-database-url`; issue 51): pulls read their
        /// pages there, waiting (at most 2 s, then reading the primary) until it holds the device's own
        /// last push; live streams are woken once it has replayed the commit that woke them. Pushes,
        /// credentials, revocations, resyncs and `LISTEN` stay on the primary. `nil`: every read on
        /// the primary. Its login, as the primary's, is a member of `kvsync_gateway`.
        public var readDatabase: ServerURL?
        /// The other databases groups may live in, by the name the directory gives them
        /// (`--group-database NAME=URL`, issue 51): each request of a group goes to the database the
        /// home database's directory places it in (``SyncDirectory``; a group without an entry stays
        /// in the home database). Each has its own pool, watch, `LISTEN` and revocation sweep; the
        /// name `home` is the home database's own.
        public var groupDatabases: [String: ServerURL] = [:]
        /// Wake-ups after the commit (issue 51): how often the gateway reads the newest sequence of
        /// the groups it has live streams for, and wakes the streams of a group that moved, so that a
        /// wake-up lost (its pusher died after the commit, or its `NOTIFY` failed) costs at most this
        /// (`--wake-poll-interval`). And the window within which the wake-ups of one group's pushes
        /// through this gateway are sent as one (``WakeUps``).
        public var wakePollInterval: Duration = .seconds(1)
        public var wakeWindow: Duration = WakeUps.defaultWindow
        public init() {}
    }

    let database: ServerURL
    let options: Options
    /// The database's pool (``pool()``), and whether the database answers (``watchDatabase(_:listening:)``).
    let link: DatabaseLink
    /// The replica of the home database that its groups' pulls read from (``Options/readDatabase``), if any.
    let replica: ReadReplica?
    /// The home database (``database`` and ``link``), and every database by its directory name (the
    /// home one too), and where the directory placed each group lately.
    let home: GroupDatabase
    let databases: [String: GroupDatabase]
    let directory: DirectoryCache
    private let sslContext: NIOSSLContext?
    let state = Locked(State())
    /// The connections served at once (``Limits/maxConnections``).
    let connections: ConnectionLimit
    /// The connections accepted that have not sent a request yet (``Limits/maxConnectionsAwaitingRequest``).
    let awaitingRequest: ConnectionsAwaitingRequest
    /// Requests of verified principals.
    let limiter: RateLimiter<String>
    /// Failed authentications of source addresses.
    let failures: RateLimiter<SourceAddress>
    /// Unknown credentials checked from an address past its failures' budget (1 a second).
    let pastBudget: RateLimiter<SourceAddress>
    /// Credentials that verified in the last 10 minutes: served whatever their address's failures.
    let known: KnownCredentials
    let hub: LiveHub
    /// The wake-ups this gateway sends after its pushes commit, on a connection of the pool of the
    /// group's database: one ``WakeUps`` per database, by its directory name.
    let wakeUps: [String: WakeUps]
    /// The rounds of the polls of the live groups' sequences done, every database's (``pollLiveGroups(of:)``): what a test waits for.
    let wakePolls = Locked(0)
    /// Resyncs (`/v1/state`, whole or a page) in turn: ``Limits/resyncsAtOnce`` read at once, one per
    /// credential at a time, the groups served in turn.
    let resyncs: ResyncQueue
    /// Live streams being opened at once (each holds a database connection for its credential's
    /// transaction): twice the pool, so that the pool stays busy; the others wait in its queue.
    let liveOpenings: LiveOpenings
    /// What each device and group may still push (``Limits/maxPushChanges`` and the others).
    let budgets: PushBudgets
    /// Tokens verified in the last 10 s: a push's head is admitted on them before its body.
    let verified: RecentlyVerified
    /// What the gateway counts, for `GET /metrics`.
    public let metrics = GatewayMetrics()
    /// One readiness check at a time, and its answer reused for ``readinessReuse``.
    let readinessChecks = AsyncSemaphore(permits: 1)
    /// The last readiness check's answer, when it was made, and the database's status changes then.
    let readinessCache = Locked<(ContinuousClock.Instant, Int, (Bool, String))?>(nil)
    /// The metrics listener and its open connections (closed at the end of a drain).
    let metricsConnections = Locked(MetricsListener())

    struct MetricsListener {
        var server: Channel?
        var open: [ObjectIdentifier: Channel] = [:]
        var closed = false
    }

    struct State {
        var bufferedBytes = 0
        var answerBytes = 0
        /// Each open connection, and whether it is between requests (closed at once on a drain).
        var open: [ObjectIdentifier: (channel: Channel, idle: Bool)] = [:]
        var draining = false
        var server: Channel?
    }

    /// TLS 1.2's cipher suites: ECDHE (forward secrecy) with AES-GCM or ChaCha20-Poly1305 (AEAD)
    /// only, never RSA key exchange or CBC. TLS 1.3's are AEAD by definition.
    static let tls12CipherSuites: [NIOTLSCipher] = [
        .TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, .TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        .TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, .TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        .TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, .TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ]

    /// - Throws: ``ReplicationError/server(_:)`` if the TLS certificate or key cannot be read.
    /// The longest TLS key file read (a PEM key is a few kB).
    package static let maxTLSKeyBytes = 1 << 20

    public init(database: ServerURL, options: Options = Options()) throws {
        self.database = database
        self.options = options
        link = DatabaseLink(configuration: try database.poolConfiguration(connections: options.limits.databaseConnections),
                            host: "\(database.endpoint)", logger: options.logger)
        replica = try options.readDatabase.map {
            try ReadReplica(url: $0, connections: options.limits.databaseConnections, logger: options.logger)
        }
        home = GroupDatabase(name: SyncDirectory.home, url: database, link: link)
        databases = try Self.groupDatabases(home: home, options: options)
        let limits = options.limits
        directory = DirectoryCache(capacity: limits.maxRememberedPrincipals)
        connections = ConnectionLimit(max: limits.maxConnections)
        awaitingRequest = ConnectionsAwaitingRequest(limit: limits.maxConnectionsAwaitingRequest)
        limiter = RateLimiter(perSecond: limits.requestsPerSecond, burst: limits.burst, capacity: limits.maxRememberedPrincipals)
        failures = RateLimiter(perSecond: limits.failedAuthenticationsPerSecond, burst: limits.failedAuthenticationBurst,
                               capacity: limits.maxRememberedAddresses)
        pastBudget = RateLimiter(perSecond: 1, burst: 1, capacity: limits.maxRememberedAddresses)
        known = KnownCredentials(capacity: limits.maxRememberedPrincipals)
        hub = LiveHub(maxStreams: limits.maxStreams, maxStreamsPerCredential: limits.maxStreamsPerCredential)
        verified = RecentlyVerified(capacity: limits.maxRememberedPrincipals, lifetime: .seconds(10))
        liveOpenings = LiveOpenings(permits: max(2, 2 * limits.databaseConnections))
        resyncs = ResyncQueue(permits: limits.resyncsAtOnce)
        budgets = PushBudgets(limits)
        wakeUps = databases.mapValues { Self.wakeUps(link: $0.link, options: options) }
        switch (options.tlsCertificate, options.tlsKey) {
        case (nil, nil):
            sslContext = nil
        case (let certificate?, let key?):
            do {
                let chain = try NIOSSLCertificate.fromPEMFile(certificate).map { NIOSSLCertificateSource.certificate($0) }
                let keyBytes = try SecretFile.read(key, what: "TLS key", maxBytes: Self.maxTLSKeyBytes)
                var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain,
                                                                               privateKey: .privateKey(try NIOSSLPrivateKey(bytes: keyBytes, format: .pem)))
                configuration.minimumTLSVersion = .tlsv12
                configuration.cipherSuiteValues = Self.tls12CipherSuites
                sslContext = try NIOSSLContext(configuration: configuration)
            } catch {
                throw ReplicationError.server("cannot use the TLS certificate \(certificate) and key \(key): \(describeTLS(error))")
            }
        default:
            throw ReplicationError.server("TLS needs both a certificate and a key")
        }
    }

    /// Binds `host:port` (0: any free port), calls `ready` with the URL devices use, and serves until
    /// ``shutdown()`` (then drains: requests in flight finish) or cancellation.
    ///
    /// - Throws: ``ReplicationError/server(_:)`` when the database's schema is not this gateway's
    ///   version (`kvtool sync setup` creates and migrates it), or its login is privileged;
    ///   ``GatewayListenError`` when ``Options/metricsHost`` cannot be listened on.
    public func run(host: String = "127.0.0.1", port: Int = 0, ready: @Sendable (String) -> Void) async throws {
        try await withThrowingDiscardingTaskGroup { tasks in
            // Checked before the pool runs: a database that cannot be used fails the start at once.
            var revocations: [String: Int64] = [:]
            for named in databases.values.sorted(by: { $0.name < $1.name }) {
                revocations[named.name] = try await checkDatabase(named)
            }
            metrics.swept()
            if let metricsHost = options.metricsHost {
                let server = try await bindMetrics(host: metricsHost, port: options.metricsPort)
                metricsConnections.withLock { $0.server = server.channel }
                let bound = server.channel.localAddress?.port ?? options.metricsPort
                options.metricsListening?("http://\(metricsHost.contains(":") ? "[\(metricsHost)]" : metricsHost):\(bound)/metrics")
                tasks.addTask { await self.serveMetrics(server) }
            }
            if let replica {
                tasks.addTask { await replica.link.run() }
                // A hot standby refuses LISTEN: the replica's watch does not carry one.
                tasks.addTask { await self.watchDatabase(GroupDatabase(name: ReadReplica.watchName, url: replica.url, link: replica.link), listening: false) }
                tasks.addTask { await self.gateWakes(through: replica) }
            }
            for named in databases.values {
                tasks.addTask { await named.link.run() }
                // The watch's connection carries the LISTEN; the sweep leases the pool's: the pool and
                // one connection more per database.
                tasks.addTask { await self.watchDatabase(named, listening: true) }
                let after = revocations[named.name] ?? 0  // (a `let`: the task must not share the `var`)
                tasks.addTask { await self.followRevocations(in: named, after: after) }
                tasks.addTask { await self.pollLiveGroups(of: named) }
            }
            tasks.addTask { await self.beat() }
            let limits = options.limits
            let sslContext = self.sslContext
            let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                // Connections the gateway has not accepted yet wait here (the accept loop's gate holds
                // them while many accepted ones have sent no request): 4,096, Linux's default
                // somaxconn, which caps it. With 1,024, 50,000 devices connecting at once to 5
                // gateways overflowed it, and 194 – 302 of them were reset (SYN cookies) and connected
                // again; with 4,096, none in 2 runs.
                .serverChannelOption(.backlog, value: 4096)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                // A connection keeps its first read's buffer for the next (NIO's pool), so its first size
                // is kept by every connection, a live stream's for its whole life: 512 bytes hold a
                // request's head with a token (2,048 by default); larger reads grow it from there.
                .childChannelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65_536))
                .bind(host: host, port: port) { [self] channel in
                    channel.eventLoop.makeCompletedFuture {
                        // Before TLS: a proxy's PROXY header comes first, in clear.
                        let peer = channel.remoteAddress
                        let client = ClientAddress(peer)
                        let trusted = ProxyNetwork.bytes(of: peer).map { bytes in options.trustedProxies.contains { $0.contains(bytes) } } ?? false
                        try channel.pipeline.syncOperations.addHandler(
                            ProxyHeaderHandler(trusted: trusted, client: client, timeout: TimeAmount(limits.requestTimeout)) { [self] peer, line in
                                metrics.request(.other, status: .badRequest, sent: 0, outcome: .refused(.protocol))
                                options.log?(GatewayLogEvent(level: .warning, event: "refusal", reason: GatewayMetrics.RefusalReason.protocol.label,
                                                             status: 400, peer: peer?.ipAddress, message: line))
                            })
                        if let sslContext {
                            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                        }
                        // Answers are written on the channel itself (``AnswerWriter``, ``LiveStream``).
                        return (try channel.httpServerConnection(requestTimeout: limits.requestTimeout,
                                                                 then: [WriteStallDeadline(timeout: limits.answerTimeout)],
                                                                 writesAnswers: false), client)
                    }
                }
            state.withLock { $0.server = server.channel }
            let bound = server.channel.localAddress?.port ?? port
            let shown = host.contains(":") ? "[\(host)]" : host
            ready("\(sslContext == nil ? "http" : "https")://\(shown):\(bound)")
            do {
                try await withThrowingDiscardingTaskGroup { connections in
                    try await server.executeThenClose { inbound in
                        for try await (connection, client) in inbound {
                            let awaiting = awaitingRequest.accepted()
                            connections.addTask { await self.serve(connection, client: client, awaiting: awaiting) }
                            // The next connection waits in the kernel's backlog meanwhile (NIO stops
                            // accepting when this loop does not take what it accepted).
                            while awaitingRequest.isFull(), !Task.isCancelled { try? await Task.sleep(for: .milliseconds(1)) }
                        }
                    }
                }
            } catch {
                await endLiveStreams()
                throw error
            }
            await endLiveStreams()
            // Every connection has ended (drained): stop the metrics listener, the database pool, the
            // LISTEN and the sweep.
            closeMetrics()
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

    // MARK: - One connection

    private func serve(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, client: ClientAddress,
                       awaiting: ConnectionsAwaitingRequest.Entry) async {
        let admitted = connections.enter()
        let channel = connection.channel
        let key = ObjectIdentifier(channel)
        if admitted { state.withLock { $0.open[key] = (channel, true) } }
        @Sendable func forget() {
            guard admitted else { return }
            state.withLock { $0.open[key] = nil }
            connections.leave()
        }
        // The requests are read and answered in a task of their own: a task keeps the memory its
        // frames ever took until it is freed (its frames come from slabs it holds). A live stream's
        // request ends them, and the stream is handed to its channel (``LiveStream``, on the event
        // loop): this task ends then, and the channel stays open without it, counted until it closes.
        // So the connection's inbound and outbound are taken without `executeThenClose` (which
        // closes the channel when its body returns), and closed here as it would close them.
        // Answers are written on the channel itself (each write awaited until it is in the socket).
        let (inbound, _) = connection.unscoped  // (its writer was finished when it was accepted)
        let answers = AnswerWriter(channel: channel, gateway: self, client: client)
        do {
            if let live = try await requests(inbound, answers: answers, admitted: admitted, awaiting: awaiting) {
                // Opened (or refused, and closed) without this task: the channel is counted until it closes.
                if admitted {
                    state.withLock { $0.open[key]?.idle = false }
                    channel.closeFuture.whenComplete { _ in forget() }
                }
                streamLive(live, to: answers)
                return
            }
        } catch {}
        channel.close(promise: nil)
        try? await channel.closeFuture.get()
        forget()
    }

    /// The live streams' channels still open, waited for until they close: at the end of a drain
    /// (``shutdown()`` ended them; the rest, when ``run(host:port:ready:)`` ends otherwise, are ended
    /// here), so that `run` returns once every stream has ended.
    func endLiveStreams() async {
        hub.closeAll()
        let open = state.withLock { $0.open.values.map(\.channel) }
        for channel in open { try? await channel.closeFuture.get() }
    }

    /// ``serveRequests(_:answers:admitted:awaiting:)`` in a task of its own, cancelled with the caller's;
    /// that task is freed when this returns (nothing holds it after), and its memory with it.
    @inline(never)
    private func requests(_ inbound: NIOAsyncChannelInboundStream<HTTPServerRequestPart>, answers: AnswerWriter,
                          admitted: Bool, awaiting: ConnectionsAwaitingRequest.Entry) async throws -> Admitted? {
        let task = Task { try await self.serveRequests(inbound, answers: answers, admitted: admitted, awaiting: awaiting) }
        return try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
    }

    /// Reads and answers a connection's requests until it ends; returns a live stream's request (admitted,
    /// its body read), which ends them: the caller serves the stream.
    @inline(never)
    private func serveRequests(_ inbound: NIOAsyncChannelInboundStream<HTTPServerRequestPart>, answers: AnswerWriter,
                               admitted: Bool, awaiting: ConnectionsAwaitingRequest.Entry) async throws -> Admitted? {
        // The connection no longer holds the accept loop back once its first head came, or it ended.
        defer { awaitingRequest.requestArrived(awaiting) }
        let channel = answers.channel
        // The client's address, as the PROXY header of a trusted proxy named it, else the socket's
        // peer: read at each request's head (the header was read before any byte of it was passed on;
        // this task starts with the connection, before the header may have arrived).
        var source = SourceAddress(nil)
        let key = ObjectIdentifier(channel)
        func idle(_ idle: Bool) {
            let draining = state.withLock { state -> Bool in
                state.open[key]?.idle = idle
                return state.draining
            }
            if idle && draining { channel.close(promise: nil) }
        }
        // The request admitted from its head, waiting for the end of its body.
        var pending: (head: HTTPRequestHead, request: Admitted)?
        // A health check, answered at the end of its request.
        var healthCheck: (head: HTTPRequestHead, answer: GatewayResponse)?
        var body = ByteBuffer()
        // Bytes of this request's body counted against the gateway's budget for all bodies.
        var reserved = 0
        defer { release(reserved) }
        // Refused at its head: the answer is out and the output closed; what the client still sends
        // is read and dropped (never kept) until it closes or ``lingerTimeout`` passes, so that its
        // socket does not reset before it read the refusal.
        var lingering = false
        // The request being answered: what it is counted and logged under.
        var endpoint = GatewayMetrics.Endpoint.other
        var method = HTTPMethod.GET
        func refuse(_ refusal: GatewayResponse) async throws {
            try await answers.write(refusal, keepAlive: false, endpoint: endpoint, method: method, withBody: method != .HEAD)
            lingering = true
            channel.close(mode: .output, promise: nil)
            channel.eventLoop.scheduleTask(in: Self.lingerTimeout) { channel.close(promise: nil) }
        }
        for try await part in inbound {
            if lingering { continue }
            switch part {
            case .head(let head):
                awaitingRequest.requestArrived(awaiting)
                idle(false)
                source = SourceAddress(answers.client.address)
                release(reserved)
                reserved = 0
                body = ByteBuffer()
                endpoint = GatewayMetrics.Endpoint(uri: head.uri)
                method = head.method
                // The health checks: no credential, no rate, no body; answered on the connection.
                if endpoint == .healthz || endpoint == .readyz, admitted,
                   let answer = await operationsAnswer(method: head.method, endpoint: endpoint, metrics: false) {
                    pending = nil
                    healthCheck = (head, answer)
                    continue
                }
                // Over the connection limit: refused at once, before any body is read.
                guard admitted else {
                    try await refuse(.refusal(.serviceUnavailable, connections.refusalLine))
                    continue
                }
                // The credential is checked from the headers alone: a refusal answers and closes the
                // connection, and no byte of the body is kept.
                let request: Admitted
                var admission = admit(head, from: source)
                if case .lookUp(let head, let hash) = admission { admission = await admit(head, hash: hash, from: source) }
                switch admission {
                case .refused(let refusal):
                    try await refuse(refusal)
                    continue
                case .admitted(let admittedRequest):
                    request = admittedRequest
                case .lookUp:
                    try await refuse(.refusal(.serviceUnavailable, "the credential could not be looked up; try again", retryAfter: 1))
                    continue
                }
                // A blob's PUT of a credential that may not write is refused before its body is read.
                if let refusal = refuseBlobBeforeBody(request) {
                    try await refuse(refusal)
                    continue
                }
                if request.head.bodyLength > 0 {
                    guard reserve(request.head.bodyLength) else {
                        try await refuse(.refusal(.serviceUnavailable, "the gateway is busy with other requests' bodies; try again", retryAfter: 1))
                        continue
                    }
                    reserved = request.head.bodyLength
                    body.reserveCapacity(reserved)
                }
                pending = (head, request)
            case .body(var buffer):
                // HTTP's framing holds a body to its Content-Length; a body without an admitted
                // request (or longer than it said) ends the connection.
                guard pending != nil, body.readableBytes + buffer.readableBytes <= reserved else { return nil }
                body.writeBuffer(&buffer)
            case .end:
                if let (head, answer) = healthCheck {
                    healthCheck = nil
                    let keepAlive = !state.withLock { $0.draining } && head.isKeepAlive
                    try await answers.write(answer, keepAlive: keepAlive, endpoint: endpoint, method: method,
                                            withBody: head.method != .HEAD)
                    if !keepAlive { return nil }
                    idle(true)
                    continue
                }
                guard let (head, request) = pending else { continue }
                pending = nil
                if request.head.operation == .live { return request }
                let received = body.readableBytes
                let response: GatewayResponse
                if case .blob(let blob) = request.head.operation {
                    response = await respond(to: blob, of: request, body: body, from: source)
                } else {
                    response = await respond(to: request, body: Array(body.readableBytesView), from: source)
                }
                body = ByteBuffer()
                release(reserved)
                reserved = 0
                let draining = state.withLock { $0.draining }
                let keepAlive = !response.closes && !draining && head.isKeepAlive
                // A HEAD's answer has the head a GET's would have, and no body (a blob's HEAD).
                try await answers.write(response, keepAlive: keepAlive, endpoint: endpoint, method: method, received: received,
                                        withBody: head.method != .HEAD)
                if !keepAlive { return nil }
                idle(true)
            }
        }
        return nil
    }

    /// How long a connection refused at its request's head goes on taking (and dropping) what its client
    /// still sends.
    static let lingerTimeout: TimeAmount = .seconds(5)

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

    /// Whether answers may be made now: those being written are under ``Limits/maxAnswerBytes``.
    func answersHaveRoom() -> Bool {
        state.withLock { $0.answerBytes < options.limits.maxAnswerBytes }
    }

    /// Reserves room in ``Limits/maxAnswerBytes`` for an answer of up to `bound` bytes, before anything
    /// of it is read: the bytes the read may make (its statement's bound), or `nil` when the answers
    /// being written fill the budget (then nothing is read). Alone (no other answer in the budget), an
    /// answer gets its whole bound, whatever the budget, so that one device always makes progress; with
    /// others, at most a quarter of the room left (at least ``smallAnswer``), so that one large read
    /// does not keep every other device's page out.
    func reserveAnswer(upTo bound: Int) -> Int? {
        state.withLock { state in
            let room = options.limits.maxAnswerBytes - state.answerBytes
            let granted: Int
            if state.answerBytes == 0 {
                granted = bound
            } else if room > 0 {
                granted = min(bound, max(Self.smallAnswer, room / 4))
            } else {
                return nil
            }
            state.answerBytes += granted
            return granted
        }
    }

    /// Reserves exactly `bytes` for an answer whose size is known before it is read (a whole state):
    /// false when they do not fit beside the answers being written (alone, they always do).
    func reserveAnswer(exactly bytes: Int) -> Bool {
        state.withLock { state in
            guard state.answerBytes == 0 || state.answerBytes + bytes <= options.limits.maxAnswerBytes else { return false }
            state.answerBytes += bytes
            return true
        }
    }

    /// Counts an answer being written (negative: written, or abandoned).
    func countAnswer(_ bytes: Int) {
        state.withLock { $0.answerBytes += bytes }
    }

    /// The bytes of answers being written now.
    var answerBytes: Int { state.withLock { $0.answerBytes } }
}
#endif
