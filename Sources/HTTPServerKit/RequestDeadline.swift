#if PostgreSQL || Serve
import NIOCore
import NIOHTTP1

/// What the project's two HTTP servers share: the sync gateway (`SyncGateway`) and `kvtool serve`.

/// Closes a connection whose request (head and body) has not arrived within `timeout` of the
/// connection opening or of the previous response: a client that trickles a byte a second, or says
/// nothing, holds its slot that long and no longer. Disarmed while a request is being answered.
///
/// `@unchecked Sendable`: no lock; its mutable state (the armed timer, whether a request is being
/// answered) is touched only on its channel's event loop, which NIO's handler calls always run on.
public final class RequestDeadline: ChannelDuplexHandler, RemovableChannelHandler, @unchecked Sendable {
    public typealias InboundIn = HTTPServerRequestPart
    public typealias InboundOut = HTTPServerRequestPart
    public typealias OutboundIn = HTTPServerResponsePart
    public typealias OutboundOut = HTTPServerResponsePart

    private let timeout: TimeAmount
    private var timer: Scheduled<Void>?

    public init(timeout: Duration) {
        self.timeout = TimeAmount(timeout)
    }

    private func arm(_ context: ChannelHandlerContext) {
        timer?.cancel()
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context) }
    }

    public func channelActive(context: ChannelHandlerContext) {
        arm(context)
        context.fireChannelActive()
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    public func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .end = unwrapInboundIn(data) {
            timer?.cancel()
            timer = nil
        }
        context.fireChannelRead(data)
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { arm(context) }
        context.write(data, promise: promise)
    }
}
#endif
