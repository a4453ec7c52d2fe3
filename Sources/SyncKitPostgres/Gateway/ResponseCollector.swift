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

/// A connection failed or closed while a request was out on it; `answerBegan`: after some of its
/// answer had arrived; `failed`: on an error of its own (a TLS handshake refused, a reset), not a
/// plain close by the gateway.
struct ConnectionLost: Error {
    var answerBegan: Bool
    var reason: String
    var failed = false
}

/// Collects the answer to the one request out on its connection. Touched only on the connection's
/// event loop.
/// `@unchecked Sendable`: no lock; `pending`, `head`, `body` and `error` are touched only on that
/// event loop (the request is written, and its promise made, there).
final class ResponseCollector: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPClientResponsePart

    struct Answer: Sendable {
        var head: HTTPResponseHead
        var body: ByteBuffer
    }

    private let maxBytes: Int
    private var pending: EventLoopPromise<Answer>?
    private var head: HTTPResponseHead?
    private var body = ByteBuffer()
    /// The error the connection failed on, if one came before the request did (a TLS handshake that
    /// failed as soon as it connected): what its request is told.
    private var error: String?

    init(maxBytes: Int) { self.maxBytes = maxBytes }

    /// Waits for the answer to the request about to be written (on the channel's event loop).
    func expect(_ promise: EventLoopPromise<Answer>, on channel: Channel) {
        head = nil
        body.clear()
        guard channel.isActive else {
            promise.fail(ConnectionLost(answerBegan: false, reason: error ?? "the connection was closed", failed: error != nil))
            return
        }
        pending = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let received):
            head = received
        case .body(var buffer):
            guard body.readableBytes + buffer.readableBytes <= maxBytes else {
                fail(ConnectionLost(answerBegan: true, reason: "its answer is over \(maxBytes) bytes"))
                context.close(promise: nil)
                return
            }
            body.writeBuffer(&buffer)
        case .end:
            // An answer nobody asked for: the connection is out of step, and closed.
            guard let promise = pending, let head else {
                context.close(promise: nil)
                return
            }
            pending = nil
            promise.succeed(Answer(head: head, body: body))
            self.head = nil
            body = ByteBuffer()
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.error = self.error ?? describeTLS(error)
        fail(ConnectionLost(answerBegan: head != nil, reason: describeTLS(error), failed: true))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(ConnectionLost(answerBegan: head != nil, reason: error ?? "it closed the connection before answering", failed: error != nil))
        context.fireChannelInactive()
    }

    private func fail(_ error: ConnectionLost) {
        pending?.fail(error)
        pending = nil
    }
}
#endif
