#if PostgreSQL
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPServerKit
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import SyncKitPostgres
import SyncWire

/// The live devices of one gateway, by group: one `LISTEN` for the whole gateway, and a commit of a
/// group wakes that group's streams only. A stream is its channel's ``LiveStream`` handler: the hub
/// hands each event to the streams' event loops (one hop per loop, not per stream), and no task
/// waits for a stream.
final class LiveHub: Sendable {
    enum Event: Sendable {
        case change
        case heartbeat
        case closed(String)
    }

    private struct State {
        var groups: [String: [UInt64: LiveStream]] = [:]
        var count = 0
        var perCredential: [String: Int] = [:]
        var lastID: UInt64 = 0
        var closed = false
    }

    /// Why a stream was not admitted.
    enum Full: Error {
        case gateway
        case credential
    }

    private let state = Locked(State())
    let maxStreams: Int
    let maxStreamsPerCredential: Int

    init(maxStreams: Int, maxStreamsPerCredential: Int) {
        self.maxStreams = maxStreams
        self.maxStreamsPerCredential = maxStreamsPerCredential
    }

    var count: Int { state.withLock { $0.count } }

    /// Subscribes `stream` to its group's events; refused when the gateway has `maxStreams` open (or is
    /// draining), or the principal has `maxStreamsPerCredential` (so that one device cannot take every
    /// slot, however many copies of its credential it holds).
    func subscribe(_ stream: LiveStream) throws(Full) {
        let result: Result<Void, Full> = state.withLock { state in
            guard !state.closed, state.count < maxStreams else { return .failure(.gateway) }
            guard state.perCredential[stream.key, default: 0] < maxStreamsPerCredential else { return .failure(.credential) }
            state.lastID += 1
            state.count += 1
            state.perCredential[stream.key, default: 0] += 1
            stream.id = state.lastID
            state.groups[stream.group, default: [:]][state.lastID] = stream
            return .success(())
        }
        try result.get()
    }

    func unsubscribe(_ stream: LiveStream) {
        let (group, id) = (stream.group, stream.id)
        state.withLock { state in
            guard let gone = state.groups[group]?.removeValue(forKey: id) else { return }
            state.count -= 1
            state.perCredential[gone.key, default: 1] -= 1
            if state.perCredential[gone.key] == 0 { state.perCredential[gone.key] = nil }
            if state.groups[group]?.isEmpty == true { state.groups[group] = nil }
        }
    }

    /// Wakes the streams of `group` (every group's when `nil`: after the `LISTEN` reconnected, a
    /// notification may have been missed).
    func notify(group: String?) {
        let targets = state.withLock { state in
            if let group { return state.groups[group].map { Array($0.values) } ?? [] }
            return state.groups.values.flatMap(\.values)
        }
        deliver(.change, to: targets)
    }

    /// A comment to every stream, so that devices (and the gateway, which then finds the streams of
    /// devices that left) know the connection still carries.
    func heartbeat() {
        deliver(.heartbeat, to: state.withLock { $0.groups.values.flatMap(\.values) })
    }

    /// Ends the streams of these credentials (revoked) and of those whose time is up.
    func close(credentials revoked: Set<Int64>, expiredBy now: Date) {
        let ending = state.withLock { state in
            state.groups.values.flatMap(\.values).compactMap { stream -> (LiveStream, String)? in
                if let id = stream.credential, revoked.contains(id) { return (stream, "the credential was revoked") }
                if let expiry = stream.expiresAt, expiry <= now { return (stream, "the credential has expired") }
                return nil
            }
        }
        for (stream, reason) in ending { deliver(.closed(reason), to: [stream]) }
    }

    /// Ends every stream (the gateway is draining); no new one is admitted.
    func closeAll() {
        let all = state.withLock { state in
            state.closed = true
            return state.groups.values.flatMap(\.values)
        }
        deliver(.closed("the gateway is shutting down"), to: all)
    }

    /// `event` to each of `streams`, on their event loops: one task per loop for all its streams.
    private func deliver(_ event: Event, to streams: [LiveStream]) {
        guard let first = streams.first else { return }
        if streams.allSatisfy({ $0.eventLoop === first.eventLoop }) {
            first.eventLoop.execute { for stream in streams { stream.handle(event) } }
            return
        }
        var byLoop: [ObjectIdentifier: (EventLoop, [LiveStream])] = [:]
        for stream in streams { byLoop[ObjectIdentifier(stream.eventLoop), default: (stream.eventLoop, [])].1.append(stream) }
        for (loop, streams) in byLoop.values { loop.execute { for stream in streams { stream.handle(event) } } }
    }
}

/// A live stream admitted from its request's head, waiting for its credential's check.
struct LiveOpening: Sendable {
    let request: SyncGateway.Admitted
    let answers: AnswerWriter
}

/// The live streams being opened (at most `permits` at once) and those waiting, in order: a waiting
/// one is an entry here, not a task.
final class LiveOpenings: Sendable {
    private let state: Locked<(permits: Int, waiting: CircularBuffer<LiveOpening>, opened: Int)>
    /// Every this many openings, the memory freed is given back (``SyncGateway/returnFreedMemory()``).
    static let trimEvery = 250

    init(permits: Int) { state = Locked((permits, CircularBuffer(), 0)) }

    /// Counts an opening done; true once every ``trimEvery``.
    func counted() -> Bool {
        state.withLock { state in
            state.opened += 1
            return state.opened % Self.trimEvery == 0
        }
    }

    /// Takes a permit for `opening` (true: the caller opens it), or queues it (false).
    func enter(_ opening: LiveOpening) -> Bool {
        state.withLock { state in
            guard state.permits > 0 else {
                state.waiting.append(opening)
                return false
            }
            state.permits -= 1
            return true
        }
    }

    /// The next waiting opening, which takes over the caller's permit; `nil` (the permit returned) if none.
    func leave() -> LiveOpening? {
        state.withLock { state in
            guard let next = state.waiting.popFirst() else {
                state.permits += 1
                return nil
            }
            return next
        }
    }
}

/// A live stream, served from its channel's event loop once its request is admitted: this handler
/// takes the place of the connection's HTTP handlers (a live stream reads no more requests), writes
/// the stream's head, `hello` and each event the ``LiveHub`` hands it as a chunk of the response, and
/// ends the stream (a `closed` event, the last chunk, the close). What the device sends meanwhile is
/// dropped, never kept, and a device that sends more than ``maxInput`` bytes is closed. The
/// connection's ``WriteStallDeadline`` stays before it: a device that stopped reading is closed at the
/// answer deadline. At most one event waits unwritten: a change while one waits is written after it
/// (a change says only that there is something to pull), a heartbeat while one waits is dropped.
final class LiveStream: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Bytes a device may send on its live stream (it has nothing to send), dropped as they come.
    static let maxInput = 4_096

    let eventLoop: EventLoop
    let group: String
    let key: String
    let credential: Int64?
    let expiresAt: Date?
    /// Set by the hub when subscribed (under its lock, before the stream is shared).
    var id: UInt64 = 0
    private let hub: LiveHub
    private let metrics: GatewayMetrics

    // On the event loop only:
    private var context: ChannelHandlerContext?
    /// Writes handed to the channel and not yet done.
    private var unwritten = 0
    /// A change came while a write waited (or before the stream was added): written once it is done.
    private var owesChange = false
    /// Why the stream is to end, when it came before the stream was added.
    private var ending: String?
    private var ended = false
    private var received = 0

    init(eventLoop: EventLoop, principal: SyncGateway.Principal, hub: LiveHub, metrics: GatewayMetrics) {
        self.eventLoop = eventLoop
        group = principal.group
        key = principal.key
        credential = principal.id > 0 ? principal.id : nil
        expiresAt = principal.expiresAt
        self.hub = hub
        self.metrics = metrics
    }

    /// The stream's head, as `HTTPResponseEncoder` would write it (chunked: the stream has no length).
    static let head = ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
                                 + "Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n")
    static let hello = GatewayEvent.hello.frame(data: "\(GatewayWire.version)")
    static let change = chunk(GatewayEvent.change.frame())
    static let heartbeat = chunk(GatewayEvent.heartbeat)
    static let end = ByteBuffer(string: "0\r\n\r\n")

    /// `text` as one chunk of a chunked body, and its length (what the metrics count as sent).
    static func chunk(_ text: String) -> (buffer: ByteBuffer, bytes: Int) {
        let bytes = text.utf8.count
        return (ByteBuffer(string: String(bytes, radix: 16) + "\r\n" + text + "\r\n"), bytes)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let hello = Self.chunk(Self.hello)
        var head = Self.head
        var body = hello.buffer
        head.writeBuffer(&body)
        write(head, counted: hello.bytes)
        if let reason = ending {
            end(reason)
        } else if owesChange {
            owesChange = false
            handle(.change)
        }
        // Reads are asked for here: the handler behind this one no longer does.
        context.read()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        hub.unsubscribe(self)
    }

    func channelInactive(context: ChannelHandlerContext) {
        hub.unsubscribe(self)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        received += unwrapInboundIn(data).readableBytes
        if received > Self.maxInput { context.close(promise: nil) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.read()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    /// On the event loop: writes `event`, or keeps it for when the stream is added.
    func handle(_ event: LiveHub.Event) {
        eventLoop.assertInEventLoop()
        guard !ended else { return }
        guard context != nil else {
            switch event {
            case .change: owesChange = true
            case .heartbeat: break
            case .closed(let reason): ending = reason
            }
            return
        }
        switch event {
        case .change:
            if unwritten > 0 { owesChange = true } else { write(Self.change.buffer, counted: Self.change.bytes) }
        case .heartbeat:
            if unwritten == 0 { write(Self.heartbeat.buffer, counted: Self.heartbeat.bytes) }
        case .closed(let reason):
            end(reason)
        }
    }

    /// The `closed` event and the body's end, then the close once they are written (or failed).
    private func end(_ reason: String) {
        guard let context, !ended else { return }
        ended = true
        let closed = Self.chunk(GatewayEvent.closed.frame(data: reason))
        var buffer = closed.buffer
        var last = Self.end
        buffer.writeBuffer(&last)
        metrics.sent(closed.bytes)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { _ in channel.close(promise: nil) }
    }

    private func write(_ buffer: ByteBuffer, counted bytes: Int) {
        guard let context else { return }
        metrics.sent(bytes)
        unwritten += 1
        context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { [self] result in
            unwritten -= 1
            guard case .success = result else { return }
            if unwritten == 0 && owesChange {
                owesChange = false
                handle(.change)
            }
        }
    }
}

extension SyncGateway {
    /// How often a live stream gets a comment when nothing happens (devices drop a stream silent for
    /// twice as long, and connect again).
    static let heartbeat: Duration = .seconds(15)
    /// How often revoked credentials are looked for (their streams close within this and a query).
    static let revocationSweep: Duration = .seconds(2)
    /// How far back each sweep also looks, whatever its cursor.
    static let revocationWindow: Duration = .seconds(30)
    /// How long a sweep's query may take before the connection is dropped.
    static let sweepTimeout: Duration = .seconds(2)
    /// How long the sweep's connecting may take (a few milliseconds to a database that answers). An
    /// attempt made while the database was unreachable holds the sweep this long after it returns:
    /// with the retry below, a revocation made during an outage closes its streams within about
    /// 1.5 s of the database's return, plus a query (measured: up to 5.07 s on a loaded CI machine
    /// with 2 s and 0.5 s, against the 5 s the streams must close in).
    static let sweepConnectTimeout: Duration = .seconds(1)
    /// How soon a failed sweep is tried again.
    static let revocationRetry: Duration = .milliseconds(250)

    /// `GET /v1/live`: after the credential is checked, server-sent events: `hello`, then `change`
    /// whenever a device commits to the group, a comment every ``heartbeat``, and `closed` with the
    /// reason when the credential is revoked, changed or expires, or the gateway drains. A device that
    /// stops reading is dropped at the answer deadline.
    ///
    /// The stream's opening is queued: at most ``liveOpenings`` credentials are checked at once, by
    /// tasks that take the queued streams one after another and end when none is left, so that the
    /// devices waiting (10,000 connecting at once) hold an entry each in the queue, not a task (a task
    /// keeps the memory its deepest frames took until it ends: 2.4 KiB a waiting connection). An
    /// opened stream is handed to its channel: a ``LiveStream`` handler serves it from the event loop,
    /// in place of the connection's HTTP handlers, and no task waits for it. A refused one (its
    /// refusal written) is closed.
    func streamLive(_ request: Admitted, to answers: AnswerWriter) {
        guard liveOpenings.enter(LiveOpening(request: request, answers: answers)) else { return }
        Task { await openQueued(LiveOpening(request: request, answers: answers)) }
    }

    /// Opens `first`, then the streams queued after it, until none is left.
    private func openQueued(_ first: LiveOpening) async {
        var next: LiveOpening? = first
        while let opening = next {
            let opened = (try? await openLive(opening.request, to: opening.answers)) ?? false
            if !opened { opening.answers.channel.close(promise: nil) }
            if liveOpenings.counted() { returnFreedMemory() }
            next = liveOpenings.leave()
        }
    }

    /// Gives the memory malloc holds free back to the system (glibc's `malloc_trim`). Devices that
    /// connect at once (10,000 after a restart) each take memory while their stream is opened (the
    /// request, its decoder, the credential's transaction) and free most of it once it is open, but
    /// glibc keeps what is freed, in holes between the streams' own allocations, resident: measured
    /// at 10,000 streams, 133 MB of arenas held 41 MB in use and 92 MB free. Called every
    /// ``LiveOpenings/trimEvery`` openings, on the task that opens them (never on an event loop).
    func returnFreedMemory() {
        #if canImport(Glibc)
        // Its result (whether it returned any memory) changes nothing here.
        _ = Self.mallocTrim?(0)
        #endif
    }

    #if canImport(Glibc)
    /// glibc's `malloc_trim`, which its Swift module does not export (`nil` in a libc without it).
    private static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
    }()
    #endif

    /// Checks a live stream's credential (in a transaction), subscribes it and hands the channel to it;
    /// false when it is refused (the refusal written).
    private func openLive(_ request: Admitted, to answers: AnswerWriter) async throws -> Bool {
        let principal: Principal
        do {
            let logger = options.logger
            let started = ContinuousClock.now
            defer { metrics.transaction(ContinuousClock.now - started) }
            principal = try await pool().withTransaction(logger: logger) { connection in
                let principal = try await self.principal(of: request.credential, on: connection, logger: logger)
                if !request.counted { try check(principal, against: request.head) }
                return principal
            }
        } catch {
            try await answers.write(refusal(for: error, from: SourceAddress(answers.client.address)), keepAlive: false,
                                    endpoint: .live, method: .GET)
            return false
        }
        let channel = answers.channel
        let stream = LiveStream(eventLoop: channel.eventLoop, principal: principal, hub: hub, metrics: metrics)
        do {
            try hub.subscribe(stream)
        } catch .gateway {
            try await answers.write(.refusal(.serviceUnavailable, "too many live streams (\(hub.maxStreams)); poll instead"), keepAlive: false,
                                    endpoint: .live, method: .GET)
            return false
        } catch .credential {
            try await answers.write(.refusal(.tooManyRequests, "too many live streams for this credential (\(hub.maxStreamsPerCredential))", retryAfter: 15),
                                    keepAlive: false, endpoint: .live, method: .GET)
            return false
        }
        metrics.request(.live, status: .ok, sent: 0, outcome: .answered)
        do {
            try await channel.eventLoop.submit {
                guard channel.isActive else { throw ChannelError.ioOnClosedChannel }
                let pipeline = channel.pipeline.syncOperations
                // The HTTP handlers go (the stream reads no more requests, and writes its own chunks),
                // then the stream goes behind the write-stall deadline (its writes stay under it).
                let writeStall = try pipeline.handler(type: WriteStallDeadline.self)
                for context in [try pipeline.context(handlerType: RequestDeadline.self),
                                try pipeline.context(handlerType: HTTPServerProtocolErrorHandler.self),
                                try pipeline.context(handlerType: HTTPServerPipelineHandler.self),
                                try pipeline.context(handlerType: NIOHTTPResponseHeadersValidator.self),
                                try pipeline.context(handlerType: ByteToMessageHandler<HTTPRequestDecoder>.self),
                                try pipeline.context(handlerType: HTTPResponseEncoder.self)] {
                    pipeline.removeHandler(context: context, promise: nil)
                }
                try pipeline.addHandler(stream, position: .after(writeStall))
            }.get()
        } catch {
            hub.unsubscribe(stream)
            throw error
        }
        return true
    }

    /// One `LISTEN` on the sync channel for the whole gateway, reconnecting with a backoff; every
    /// notification wakes its group's streams.
    func listen() async {
        var backoff: Duration = .milliseconds(100)
        while !Task.isCancelled {
            do {
                let connection = try await PostgresConnection.connect(configuration: try database.connectionConfiguration(), id: 0,
                                                                      logger: options.logger)
                defer { Task { try? await connection.close() } }
                try await connection.listen(on: ServerStatements.channel) { notifications in
                    backoff = .milliseconds(100)
                    hub.notify(group: nil)
                    for try await notification in notifications { hub.notify(group: notification.payload) }
                }
            } catch {
                if Task.isCancelled { return }
            }
            try? await Task.sleep(for: backoff)
            backoff = min(backoff * 2, .seconds(5))
        }
    }

    /// Every ``heartbeat``, a comment to every stream.
    func beat() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: Self.heartbeat)
            hub.heartbeat()
        }
    }

    /// Every ``revocationSweep``, ends the streams of credentials revoked, changed or deleted since
    /// (and of expired ones). The revocations come from the database's log after a cursor (and from
    /// its last ``revocationWindow``: a revocation numbered before one already seen may commit after
    /// it), on a connection of this sweep's own that is opened anew at the next sweep when it fails:
    /// however long the database was away, no revocation made meanwhile is missed, and the first
    /// sweep after it returns sees them.
    func followRevocations(after start: Int64) async {
        var cursor = start
        // The entries the last sweep saw: the window shows them again, and each is acted on once.
        var seen = Set<Int64>()
        var connection: PostgresConnection?
        let logger = options.logger
        // After a failed sweep the next comes sooner: the first one after the database is back must not
        // wait a whole period.
        var pause = Self.revocationSweep
        // Whether the last sweep failed (its error was logged).
        var failing = false
        while !Task.isCancelled {
            try? await Task.sleep(for: pause)
            pause = Self.revocationSweep
            // No stream to close: the sweep is as current as it needs to be.
            guard hub.count > 0 else { metrics.swept(); continue }
            var revoked = Set<Int64>()
            do {
                // Each step has a deadline: a database behind a network that drops packets silently
                // must not hold the sweep.
                if connection == nil || connection!.isClosed {
                    let configuration = try database.connectionConfiguration()
                    let fresh = try await withDeadline(Self.sweepConnectTimeout, what: "the database") {
                        try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
                    } abandoned: { late in
                        try? await late.close()
                    }
                    connection = fresh
                    try await withDeadline(Self.sweepTimeout, what: "the database", onTimeout: { try? await fresh.close() }) {
                        _ = try await fresh.query("SELECT set_config('role', \(ServerStatements.gatewayRole), false)", logger: logger)
                    }
                }
                let (open, after) = (connection!, cursor)
                let entries = try await withDeadline(Self.sweepTimeout, what: "the database", onTimeout: { try? await open.close() }) {
                    try await ServerStatements.revocations(after: after, window: Self.revocationWindow, on: open, logger: logger)
                }
                // (Those numbered before the gateway started were settled when their devices authenticated.)
                revoked = Set(entries.filter { $0.sequence > start && !seen.contains($0.sequence) }.map(\.credential))
                seen = Set(entries.map(\.sequence))
                cursor = max(cursor, entries.map(\.sequence).max() ?? cursor)
                metrics.swept()
                if failing {
                    failing = false
                    options.log?(GatewayLogEvent(level: .info, event: "recovered", message: "the revocation sweep reaches the database again"))
                }
            } catch {
                options.logger.warning("cannot look for revoked credentials: \(ServerStatements.describe(error))")
                metrics.error()
                // Logged once until a sweep succeeds again (it is tried every 250 ms meanwhile).
                if !failing {
                    failing = true
                    options.log?(GatewayLogEvent(level: .error, event: "error",
                                                 message: "cannot look for revoked credentials: \(ServerStatements.describe(error))"))
                }
                if let open = connection { try? await open.close() }
                connection = nil
                pause = Self.revocationRetry
            }
            hub.close(credentials: revoked, expiredBy: Date())
        }
        if let connection { try? await connection.close() }
    }
}
#endif
