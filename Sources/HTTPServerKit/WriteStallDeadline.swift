#if PostgreSQL || Serve
import NIOCore

/// Closes a connection whose writes make no progress for `timeout`: a write waits that long and no
/// write completes meanwhile (its peer stopped reading, and the socket's buffer is full). The answer
/// is abandoned then, failing its write, and what it held is released; a peer that reads, however
/// slowly, completes writes and keeps the connection. One timer per stall, re-armed from the last
/// progress, not one per write, and none while no write waits: a connection that is quiet (a live
/// stream between events) holds no scheduled task, which costs the event loop about 0.4 KiB each.
///
/// Progress is a write's promise completing, not the channel's writability: a stalled write whose
/// unwritten rest is below the channel's high watermark leaves the channel writable for good, and a
/// deadline armed by writability never fires (a device that stopped reading held a 24 MiB answer of
/// the gateway's memory until it read again, issue 35's CI run).
///
/// `@unchecked Sendable`: no lock; its mutable state (the armed timer, the writes waiting) is touched
/// only on its channel's event loop, which NIO's handler calls always run on.
public final class WriteStallDeadline: ChannelDuplexHandler, @unchecked Sendable {
    public typealias InboundIn = NIOAny
    public typealias OutboundIn = NIOAny

    private let timeout: TimeAmount
    private var timer: Scheduled<Void>?
    /// Writes passed on and not yet completed (written, or failed).
    private var waiting = 0
    /// When a write last completed, or the first of the waiting ones was passed on.
    private var progress = NIODeadline.now()

    public init(timeout: Duration) {
        self.timeout = TimeAmount(timeout)
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let promise = promise ?? context.eventLoop.makePromise()
        if waiting == 0 { progress = .now() }
        waiting += 1
        promise.futureResult.whenComplete { _ in
            self.waiting -= 1
            self.progress = .now()
            if self.waiting == 0 {
                self.timer?.cancel()
                self.timer = nil
            }
        }
        if timer == nil { arm(context.eventLoop, context.channel, at: progress + timeout) }
        context.write(data, promise: promise)
    }

    private func arm(_ eventLoop: any EventLoop, _ channel: any Channel, at deadline: NIODeadline) {
        timer = eventLoop.scheduleTask(deadline: deadline) { [self] in
            timer = nil
            guard waiting > 0 else { return }
            if NIODeadline.now() - progress >= timeout {
                channel.close(promise: nil)
            } else {
                arm(eventLoop, channel, at: progress + timeout)
            }
        }
    }

    public func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }
}
#endif
