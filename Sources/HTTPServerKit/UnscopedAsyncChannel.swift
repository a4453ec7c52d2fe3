#if PostgreSQL || Serve
import NIOCore

/// A connection's inbound and outbound, taken without `executeThenClose`: a live stream's connection
/// outlives the task that read its request (its handler serves it from the event loop), so the channel
/// cannot be closed when that task ends. The connection's owner closes it (the sync gateway's `serve`).
/// Also how ``Channel/httpServerConnection(requestTimeout:then:writesAnswers:)`` finishes a writer that
/// is never used.
public protocol UnscopedAsyncChannel {
    associatedtype Inbound: Sendable
    associatedtype Outbound: Sendable
    var inbound: NIOAsyncChannelInboundStream<Inbound> { get }
    var outbound: NIOAsyncChannelOutboundWriter<Outbound> { get }
}

extension NIOAsyncChannel: UnscopedAsyncChannel {}

extension UnscopedAsyncChannel {
    public var unscoped: (NIOAsyncChannelInboundStream<Inbound>, NIOAsyncChannelOutboundWriter<Outbound>) { (inbound, outbound) }
}
#endif
