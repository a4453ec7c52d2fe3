#if PostgreSQL || Serve
import NIOCore
import NIOHTTP1

extension Channel {
    /// This accepted channel as an HTTP/1.1 server connection, as the project's servers serve one (the
    /// sync gateway, its metrics listener, `kvtool serve`): NIO's server handlers with their error
    /// handling (a request that does not parse is answered 400 and its connection closed), a
    /// ``RequestDeadline`` of `requestTimeout`, then `handlers` in order, and the channel wrapped for
    /// `async` reading and writing. Called on the channel's event loop, in a child channel initializer.
    ///
    /// NIO drops a connection accepted just as its server closes (its initializer finished after the
    /// server's stream of connections did), and a wrapped channel whose writer is dropped unfinished
    /// traps (`NIOAsyncWriter`'s precondition, in release builds too: a gateway draining crashed so in
    /// a CI run). So the writer is finished here when `writesAnswers` is false (the caller writes on the
    /// channel itself), else when the channel closes (after its owner's own finish, which is harmless).
    public func httpServerConnection(requestTimeout: Duration, then handlers: [any ChannelHandler & Sendable] = [],
                                     writesAnswers: Bool = true) throws
        -> NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart> {
        let pipeline = self.pipeline.syncOperations
        try pipeline.configureHTTPServerPipeline(withErrorHandling: true)
        try pipeline.addHandler(RequestDeadline(timeout: requestTimeout))
        for handler in handlers { try pipeline.addHandler(handler) }
        let connection = try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(wrappingChannelSynchronously: self)
        let (_, outbound) = connection.unscoped
        if writesAnswers {
            closeFuture.whenComplete { _ in outbound.finish() }
        } else {
            outbound.finish()
        }
        return connection
    }
}
#endif
