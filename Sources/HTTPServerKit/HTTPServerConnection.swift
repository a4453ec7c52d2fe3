#if PostgreSQL || Serve
import NIOCore
import NIOHTTP1

extension Channel {
    /// This accepted channel as an HTTP/1.1 server connection, as the project's servers serve one (the
    /// sync gateway, its metrics listener, `kvtool serve`): NIO's server handlers with their error
    /// handling (a request that does not parse is answered 400 and its connection closed), a
    /// ``RequestDeadline`` of `requestTimeout`, then `handlers` in order, and the channel wrapped for
    /// `async` reading and writing. Called on the channel's event loop, in a child channel initializer.
    public func httpServerConnection(requestTimeout: Duration, then handlers: [any ChannelHandler & Sendable] = []) throws
        -> NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart> {
        let pipeline = self.pipeline.syncOperations
        try pipeline.configureHTTPServerPipeline(withErrorHandling: true)
        try pipeline.addHandler(RequestDeadline(timeout: requestTimeout))
        for handler in handlers { try pipeline.addHandler(handler) }
        return try NIOAsyncChannel(wrappingChannelSynchronously: self)
    }
}
#endif
