#if PostgreSQL
import Foundation
import KVStore
import Logging
import PostgresNIO
import SyncKitPostgres

/// One database the gateway serves groups from: the home database (`--database`, named
/// ``SyncDirectory/home``) or one of `--group-database NAME=URL`. Each has its own pool and link
/// (``DatabaseLink``), its own watch, `LISTEN` and revocation sweep, so that one database that does
/// not answer refuses its own groups' requests (503, at once) and nothing else.
final class GroupDatabase: Sendable {
    let name: String
    let url: ServerURL
    let link: DatabaseLink

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
#endif
