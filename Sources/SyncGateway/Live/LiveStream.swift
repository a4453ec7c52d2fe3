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

/// A live stream, served from its channel's event loop once its request is admitted: this handler
/// takes the place of the connection's HTTP handlers (a live stream reads no more requests), writes
/// the stream's head, `hello` and each event the ``LiveHub`` hands it as a chunk of the response, and
/// ends the stream (a `closed` event, the last chunk, the close). What the device sends meanwhile is
/// dropped, never kept, and a device that sends more than ``maxInput`` bytes is closed. The
/// connection's ``WriteStallDeadline`` stays before it: a device that stopped reading is closed at the
/// answer deadline. At most one event waits unwritten: a change while one waits is written after it
/// (a change says only that there is something to pull), a heartbeat while one waits is dropped.
///
/// `@unchecked Sendable`: the ``LiveHub`` holds streams under its lock and hands them to their event
/// loops. Its `let`s never change; ``id`` is written once, under the hub's lock, before the stream
/// is in the hub, and read only after that subscription returned (by the task that subscribed it, or
/// on the event loop the stream was handed to after it); every other `var` (the context, what waits to
/// be written, whether it ended) is read and written on ``eventLoop`` only: ``handle(_:)`` asserts it,
/// and the handler's callbacks and its writes' completions run there.
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
    private var ending: GatewayCloseReason?
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
    private func end(_ reason: GatewayCloseReason) {
        guard let context, !ended else { return }
        ended = true
        let closed = Self.chunk(GatewayEvent.closed.frame(data: reason.text))
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
#endif
