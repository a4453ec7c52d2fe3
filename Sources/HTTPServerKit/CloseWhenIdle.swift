#if PostgreSQL || Serve
import NIOCore

/// Closes its connection on ``IdleStateHandler``'s event: behind an `IdleStateHandler`, a connection
/// silent for its timeout is closed (by the servers, and by the gateway's client on a connection that
/// stopped answering).
public final class CloseWhenIdle: ChannelInboundHandler, Sendable {
    public typealias InboundIn = NIOAny

    public init() {}

    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}
#endif
