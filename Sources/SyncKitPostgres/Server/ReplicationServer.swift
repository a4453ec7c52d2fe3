#if PostgreSQL
import SyncWire

/// What a replicator asks of its server: PostgreSQL itself (``ServerConnection``, the direct path of
/// trusted machines) or a sync gateway (``GatewayConnection``, devices with a credential).
protocol ReplicationServer: AnyObject, Sendable {
    /// The server's id: a device that finds another one starts over.
    func serverID() async throws -> String
    /// Sends one batch; one outcome per change, in order.
    func push(group: String, device: String, changes: [OutgoingChange], maxClockSkew: Duration) async throws -> [PushOutcome]
    /// The group's log after `cursor`: up to `limit` changes.
    func changes(group: String, after cursor: Int64, limit: Int) async throws -> ChangesPage
    /// One page of the group's current state after `cursor` (from its start when `nil`), up to `limit`
    /// rows and the server's byte bound for a page (a resync, a page at a time).
    func statePage(group: String, after cursor: StateCursor?, limit: Int) async throws -> StatePage
    /// Removes the group's log older than `age`, and the tombstones it covered; says what it removed.
    func prune(group: String, olderThan age: Duration) async throws -> ServerPruning
    /// Whether this device may only pull (a read-only credential): its local writes wait unsent.
    var readOnly: Bool { get }
    /// The device id this server records this device's pushes under, when the server decides it (a
    /// gateway: the credential's device); `nil` on the direct path, where the container's own id is used.
    var assignedDevice: String? { get }
    var isClosed: Bool { get }
    func close() async
}

extension ServerConnection: ReplicationServer {
    var readOnly: Bool { false }
    var assignedDevice: String? { nil }
}
#endif
