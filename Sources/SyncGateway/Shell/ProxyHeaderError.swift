#if PostgreSQL
/// A PROXY header that cannot be used, or a block of `--trusted-proxy` that cannot be read: one line.
public struct ProxyHeaderError: Error, Sendable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
#endif
