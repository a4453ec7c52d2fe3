#if PostgreSQL
import Foundation
import KVStore
import Logging
import PostgresNIO
import SyncKitPostgres

/// One database the gateway serves groups from: the home database (`--database`, named
/// ``SyncDirectory/home``) or one of `--group-database NAME=URL`. Each has its own pool and link
/// (``DatabaseLink``), its own watch (whose connection also carries its `LISTEN`) and revocation
/// sweep (on its pool), so that one database that does not answer refuses its own groups' requests
/// (503, at once) and nothing else. Each costs the gateway its pool and one connection more
/// (``SyncGateway/Limits/databaseConnections`` + 1) in PostgreSQL.
final class GroupDatabase: Sendable {
    let name: String
    let url: ServerURL
    let link: DatabaseLink
    /// The groups its `LISTEN` was notified of since the gateway's poll of this database last read
    /// their ends (``SyncGateway/pollLiveGroups(of:)``).
    let notified = NotifiedGroups()

    init(name: String, url: ServerURL, link: DatabaseLink) {
        (self.name, self.url, self.link) = (name, url, link)
    }

    /// The pool to lease a connection from, or ``DatabaseLink/Unreachable`` when the database does not
    /// answer (the request is refused at once, and nothing is asked of the database).
    func pool() throws -> PostgresClient {
        let status = link.status
        guard status.up else { throw DatabaseLink.Unreachable(reason: status.reason) }
        return link.client
    }
}
/// Groups notified and not yet read, and a signal for the loop that reads them (the newest only: one
/// signal stands for any number of notifications).
final class NotifiedGroups: Sendable {
    /// The groups, and whether a round of every live group is asked for before its time (``roundNow()``).
    private let groups = Locked((notified: Set<String>(), round: false))
    let signals: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() {
        (signals, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    func add(_ group: String) {
        groups.withLock { _ = $0.notified.insert(group) }
        continuation.yield()
    }

    /// Asks the loop for a round of every live group now (the `LISTEN` started again: notifications
    /// may have been missed), not at its time.
    func roundNow() {
        groups.withLock { $0.round = true }
        continuation.yield()
    }

    /// Whether a round was asked for since the last call.
    func takeRound() -> Bool { groups.withLock { state in defer { state.round = false }; return state.round } }

    /// Wakes the loop without a group (its round is due).
    func signal() { continuation.yield() }

    func take() -> Set<String> { groups.withLock { state in defer { state.notified = [] }; return state.notified } }
}
#endif
