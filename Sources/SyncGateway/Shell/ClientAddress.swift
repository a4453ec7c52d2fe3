#if PostgreSQL
import KVStore
import NIOCore

/// Where a connection's client is: its socket's peer, or, for a connection from a trusted proxy
/// (``SyncGateway/Options/trustedProxies``), the source its PROXY header names. Set by
/// ``ProxyHeaderHandler`` before any byte of the request is passed on, so that the request's limits,
/// metrics and log lines read the client's address.
final class ClientAddress: Sendable {
    private let value: Locked<SocketAddress?>

    init(_ address: SocketAddress?) { value = Locked(address) }

    var address: SocketAddress? { value.withLock { $0 } }

    func set(_ address: SocketAddress?) { value.withLock { $0 = address } }
}
#endif
