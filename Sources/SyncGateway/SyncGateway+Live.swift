#if PostgreSQL
import Foundation
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import SyncKitPostgres
import SyncWire

/// The live devices of one gateway, by group: one `LISTEN` for the whole gateway, and a commit of a
/// group wakes that group's streams only.
final class LiveHub: Sendable {
    enum Event: Sendable {
        case change
        case heartbeat
        case closed(String)
    }

    private struct Subscriber {
        var continuation: AsyncStream<Event>.Continuation
        var credential: Int64?
        var expiresAt: Date?
        /// The principal's key (its streams are counted by it).
        var key: String
    }

    private struct State {
        var groups: [String: [UInt64: Subscriber]] = [:]
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

    /// A stream of `principal`'s group's events; refused when the gateway has `maxStreams` open (or is
    /// draining), or the principal has `maxStreamsPerCredential` (so that one device cannot take every
    /// slot, however many copies of its credential it holds).
    func subscribe(_ principal: SyncGateway.Principal) throws(Full) -> (id: UInt64, events: AsyncStream<Event>) {
        let key = principal.key
        let (events, continuation) = AsyncStream<Event>.makeStream(bufferingPolicy: .bufferingNewest(4))
        let id: Result<UInt64, Full> = state.withLock { state in
            guard !state.closed, state.count < maxStreams else { return .failure(.gateway) }
            guard state.perCredential[key, default: 0] < maxStreamsPerCredential else { return .failure(.credential) }
            state.lastID += 1
            state.count += 1
            state.perCredential[key, default: 0] += 1
            state.groups[principal.group, default: [:]][state.lastID] = Subscriber(
                continuation: continuation, credential: principal.id > 0 ? principal.id : nil, expiresAt: principal.expiresAt, key: key)
            return .success(state.lastID)
        }
        return (try id.get(), events)
    }

    func unsubscribe(group: String, id: UInt64) {
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
        for subscriber in targets { subscriber.continuation.yield(.change) }
    }

    /// A comment to every stream, so that devices (and the gateway, which then finds the streams of
    /// devices that left) know the connection still carries.
    func heartbeat() {
        let all = state.withLock { $0.groups.values.flatMap(\.values) }
        for subscriber in all { subscriber.continuation.yield(.heartbeat) }
    }

    /// Ends the streams of these credentials (revoked) and of those whose time is up.
    func close(credentials revoked: Set<Int64>, expiredBy now: Date) {
        let ending = state.withLock { state in
            state.groups.values.flatMap(\.values).compactMap { subscriber -> (Subscriber, String)? in
                if let id = subscriber.credential, revoked.contains(id) { return (subscriber, "the credential was revoked") }
                if let expiry = subscriber.expiresAt, expiry <= now { return (subscriber, "the credential has expired") }
                return nil
            }
        }
        for (subscriber, reason) in ending {
            subscriber.continuation.yield(.closed(reason))
            subscriber.continuation.finish()
        }
    }

    /// Ends every stream (the gateway is draining); no new one is admitted.
    func closeAll() {
        let all = state.withLock { state in
            state.closed = true
            return state.groups.values.flatMap(\.values)
        }
        for subscriber in all {
            subscriber.continuation.yield(.closed("the gateway is shutting down"))
            subscriber.continuation.finish()
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
    @inline(never)
    func streamLive(_ request: Admitted, to answers: AnswerWriter) async throws {
        // Everything before the first event (the credential's transaction, a refusal, the stream's
        // head) runs in a task of its own, whose memory is freed when it ends: the connection's task
        // lives as long as the stream and keeps the memory its deepest frames ever took (a task's
        // frames come from slabs it holds until it ends, and a database transaction's are deep). At
        // most ``liveOpenings`` at once: the devices waiting beyond them (10,000 connecting at once)
        // wait as a continuation each, not as a task in the database pool's queue.
        await liveOpenings.acquire()
        let opened = try await Task { [self] in
            defer { liveOpenings.release() }
            return try await openLive(request, to: answers)
        }.value
        guard let opened else { return }
        defer { hub.unsubscribe(group: opened.group, id: opened.id) }
        try await followLive(opened.events, to: answers)
    }

    /// Checks a live stream's credential (in a transaction) and subscribes it, then writes its head and
    /// `hello`; `nil` when it is refused (the refusal written).
    private func openLive(_ request: Admitted, to answers: AnswerWriter) async throws
        -> (group: String, id: UInt64, events: AsyncStream<LiveHub.Event>)? {
        let principal: Principal
        do {
            let logger = options.logger
            let started = ContinuousClock.now
            defer { metrics.transaction(ContinuousClock.now - started) }
            principal = try await client.withTransaction(logger: logger) { connection in
                let principal = try await self.principal(of: request.credential, on: connection, logger: logger)
                if !request.counted { try check(principal, against: request.head) }
                return principal
            }
        } catch {
            try await answers.write(refusal(for: error, from: SourceAddress(answers.channel.remoteAddress)), keepAlive: false,
                                    endpoint: .live, method: .GET)
            return nil
        }
        let id: UInt64, events: AsyncStream<LiveHub.Event>
        do {
            (id, events) = try hub.subscribe(principal)
        } catch .gateway {
            try await answers.write(.refusal(.serviceUnavailable, "too many live streams (\(hub.maxStreams)); poll instead"), keepAlive: false,
                                    endpoint: .live, method: .GET)
            return nil
        } catch .credential {
            try await answers.write(.refusal(.tooManyRequests, "too many live streams for this credential (\(hub.maxStreamsPerCredential))", retryAfter: 15),
                                    keepAlive: false, endpoint: .live, method: .GET)
            return nil
        }
        metrics.request(.live, status: .ok, sent: 0, outcome: .answered)
        do {
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/event-stream")
            headers.add(name: "Cache-Control", value: "no-store")
            headers.add(name: "Connection", value: "close")
            try await answers.event(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers)))
            try await answers.event(.body(.byteBuffer(ByteBuffer(string: GatewayEvent.hello.frame(data: "\(GatewayWire.version)")))))
        } catch {
            hub.unsubscribe(group: principal.group, id: id)
            throw error
        }
        return (principal.group, id, events)
    }

    /// Writes a subscribed stream's events until it ends. One task per stream (the connection's),
    /// woken by the hub for changes, heartbeats and the end: no timer of its own (a stream costs its
    /// connection, this task and a small buffer). A device that left is found at the next write, and
    /// one that stopped reading at the write's deadline. Not inlined, so that the stream's task holds
    /// this small frame while it waits, not its caller's.
    @inline(never)
    private func followLive(_ events: AsyncStream<LiveHub.Event>, to answers: AnswerWriter) async throws {
        for await event in events {
            switch event {
            case .change:
                try await answers.event(.body(.byteBuffer(ByteBuffer(string: GatewayEvent.change.frame()))))
            case .heartbeat:
                try await answers.event(.body(.byteBuffer(ByteBuffer(string: GatewayEvent.heartbeat))))
            case .closed(let reason):
                try await answers.event(.body(.byteBuffer(ByteBuffer(string: GatewayEvent.closed.frame(data: reason)))))
            }
        }
        try? await answers.event(.end(nil))
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
