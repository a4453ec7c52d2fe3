#if PostgreSQL || Serve
import NIOCore

/// Closes a connection that stays unwritable for `timeout`: its peer stopped reading, the socket's
/// buffer is full, and more than the channel's high watermark waits to be written. An answer that
/// makes no progress is abandoned then, and what it held is released; a peer that reads, however
/// slowly, makes the channel writable again and disarms the deadline. One timer per stall, not per
/// write.
public final class WriteStallDeadline: ChannelInboundHandler, @unchecked Sendable {
    public typealias InboundIn = NIOAny

    private let timeout: TimeAmount
    private var timer: Scheduled<Void>?

    public init(timeout: Duration) {
        let (seconds, attoseconds) = timeout.components
        self.timeout = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    public func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            timer?.cancel()
            timer = nil
        } else if timer == nil {
            let channel = context.channel
            timer = context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        }
        context.fireChannelWritabilityChanged()
    }

    public func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }
}
#endif
