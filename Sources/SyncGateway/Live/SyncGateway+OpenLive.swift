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

extension SyncGateway {
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

    /// Checks a live stream's credential (in a transaction), subscribes it and hands the channel to it;
    /// false when it is refused (the refusal written).
    private func openLive(_ request: Admitted, to answers: AnswerWriter) async throws -> Bool {
        let principal: Principal
        do {
            let logger = options.logger
            let started = ContinuousClock.now
            defer { metrics.transaction(ContinuousClock.now - started) }
            principal = try await pool(for: request.head.group).withTransaction(logger: logger) { connection in
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
}
#endif
