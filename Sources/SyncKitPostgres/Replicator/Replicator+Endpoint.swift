#if PostgreSQL
import KVStore
import SyncKit

extension Replicator {
    /// What a replicator syncs with.
    public enum Endpoint: Hashable, Sendable, CustomStringConvertible, CustomReflectable {
        /// The database itself, for a device trusted with it (the direct path).
        case database(ServerURL)
        /// A sync gateway (its URL holds its TLS options), with a device credential (`kvtool sync
        /// token issue`), for a device that is not trusted with the database: it reads and writes its
        /// group only, and a read-only credential only pulls.
        case gateway(SyncGatewayURL, token: String)

        /// The URL; never the credential.
        public var description: String {
            switch self {
            case .database(let url): url.description
            case .gateway(let url, _): url.description
            }
        }

        /// What `dump` and debuggers show: the URL, never the credential.
        public var customMirror: Mirror { Mirror(self, children: ["url": description]) }
    }

    /// A replicator on the direct path: ``init(container:endpoint:targets:options:events:)`` with
    /// ``Endpoint/database(_:)``.
    public convenience init(container: SharedContainer, server: ServerURL, targets: [ReplicatedTarget], options: Options = Options(),
                            events: @escaping @Sendable (SyncEvent) -> Void = { _ in }) throws {
        try self.init(container: container, endpoint: .database(server), targets: targets, options: options, events: events)
    }

    /// A replicator through a sync gateway: ``init(container:endpoint:targets:options:events:)`` with
    /// ``Endpoint/gateway(_:token:)``.
    public convenience init(container: SharedContainer, gateway: SyncGatewayURL, token: String, targets: [ReplicatedTarget],
                            options: Options = Options(), events: @escaping @Sendable (SyncEvent) -> Void = { _ in }) throws {
        try self.init(container: container, endpoint: .gateway(gateway, token: token), targets: targets, options: options, events: events)
    }

    /// A replicator without a server: ``init(container:endpoint:targets:options:events:)`` with none.
    public convenience init(container: SharedContainer, targets: [ReplicatedTarget], options: Options = Options(),
                            events: @escaping @Sendable (SyncEvent) -> Void = { _ in }) throws {
        try self.init(container: container, endpoint: nil, targets: targets, options: options, events: events)
    }
}
#endif
