#if PostgreSQL
import Foundation
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import SyncKitPostgres

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
        /// The presented credential's SHA-256 (its streams are counted by it).
        var key: [UInt8]
    }

    private struct State {
        var groups: [String: [UInt64: Subscriber]] = [:]
        var count = 0
        var perCredential: [[UInt8]: Int] = [:]
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
    /// draining), or the credential `key` has `maxStreamsPerCredential` (so that one device cannot take
    /// every slot).
    func subscribe(_ principal: SyncGateway.Principal, key: [UInt8]) throws(Full) -> (id: UInt64, events: AsyncStream<Event>) {
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

    /// `GET /v1/live`: after the credential is checked, server-sent events: `hello`, then `change`
    /// whenever a device commits to the group, a comment every ``heartbeat``, and `closed` with the
    /// reason when the credential is revoked or expires, or the gateway drains.
    func streamLive(_ head: HTTPRequestHead, to outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws {
        let principal: Principal
        let presented: Presented
        do {
            presented = try self.presented(head).get()
            let logger = options.logger
            principal = try await client.withTransaction(logger: logger) { connection in
                try await Self.principal(of: presented, on: connection, logger: logger)
            }
        } catch {
            try await write(refusal(for: error), keepAlive: false, to: outbound)
            return
        }
        let id: UInt64, events: AsyncStream<LiveHub.Event>
        do {
            (id, events) = try hub.subscribe(principal, key: presented.hash)
        } catch .gateway {
            try await write(.refusal(.serviceUnavailable, "too many live streams (\(hub.maxStreams)); poll instead"), keepAlive: false, to: outbound)
            return
        } catch .credential {
            try await write(.refusal(.tooManyRequests, "too many live streams for this credential (\(hub.maxStreamsPerCredential))", retryAfter: 15),
                            keepAlive: false, to: outbound)
            return
        }
        defer { hub.unsubscribe(group: principal.group, id: id) }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/event-stream")
        headers.add(name: "Cache-Control", value: "no-store")
        headers.add(name: "Connection", value: "close")
        try await outbound.write(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers)))
        try await outbound.write(.body(.byteBuffer(ByteBuffer(string: "event: hello\ndata: \(GatewayWire.version)\n\n"))))
        // One task per stream, woken by the hub for changes, heartbeats and the end: no timer of its
        // own (a stream costs its connection, this task and a small buffer). A device that left is
        // found at the next write.
        for await event in events {
            switch event {
            case .change:
                try await outbound.write(.body(.byteBuffer(ByteBuffer(string: "event: change\ndata: \n\n"))))
            case .heartbeat:
                try await outbound.write(.body(.byteBuffer(ByteBuffer(string: ": still here\n\n"))))
            case .closed(let reason):
                try await outbound.write(.body(.byteBuffer(ByteBuffer(string: "event: closed\ndata: \(reason)\n\n"))))
            }
        }
        try? await outbound.write(.end(nil))
    }

    func refusal(for error: any Error) -> GatewayResponse {
        if let refusal = error as? Refusal { return .refusal(refusal.status, refusal.line, retryAfter: refusal.retryAfter) }
        if let error = error as? PostgresTransactionError, let refusal = error.closureError as? Refusal {
            return .refusal(refusal.status, refusal.line, retryAfter: refusal.retryAfter)
        }
        return .refusal(.serviceUnavailable, "the database: \(ServerStatements.describe(error))")
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

    /// Every ``revocationSweep``, ends the streams of credentials revoked since (and of expired ones).
    func sweepRevocations() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: Self.revocationSweep)
            guard hub.count > 0 else { continue }
            var revoked = Set<Int64>()
            do {
                let logger = options.logger
                let window = Double(Self.revocationSweep.components.seconds) * 5
                revoked = try await client.withTransaction(logger: logger) { connection in
                    try await connection.query("SELECT set_config('role', \(ServerStatements.gatewayRole), true)", logger: logger)
                    var found = Set<Int64>()
                    for try await id in try await connection.query("SELECT kvsync_revoked_recently(\(window))", logger: logger)
                        .decode(Int64.self) {
                        found.insert(id)
                    }
                    return found
                }
            } catch {
                options.logger.warning("cannot look for revoked credentials: \(ServerStatements.describe(error))")
            }
            hub.close(credentials: revoked, expiredBy: Date())
        }
    }
}
#endif
