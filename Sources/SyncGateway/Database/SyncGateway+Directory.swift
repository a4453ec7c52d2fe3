#if PostgreSQL
import Foundation
import KVStore
import Logging
import PostgresNIO
import SyncKitPostgres

extension SyncGateway {
    /// The home database and each of ``Options/groupDatabases``, by name, each with a pool of its own
    /// (``Limits/databaseConnections`` connections each). A name the directory could not hold, or the
    /// home database's own, is refused in one line.
    static func groupDatabases(home: GroupDatabase, options: Options) throws -> [String: GroupDatabase] {
        var databases = [home.name: home]
        for (name, url) in options.groupDatabases.sorted(by: { $0.key < $1.key }) {
            guard SyncDirectory.isValidName(name) else {
                throw ReplicationError.server("'\(name)' cannot name a database of the directory: 1 to 63 letters, digits, - and _")
            }
            guard name != SyncDirectory.home else {
                throw ReplicationError.server("the name \(SyncDirectory.home) is the home database's (--database): give the other database another name")
            }
            let link = DatabaseLink(configuration: try url.poolConfiguration(connections: options.limits.databaseConnections),
                                    host: "\(url.endpoint)", logger: options.logger)
            databases[name] = GroupDatabase(name: name, url: url, link: link)
        }
        return databases
    }

    /// The pool of `group`'s database, or a refusal (``database(of:)``).
    func pool(for group: String) async throws -> PostgresClient {
        try await database(of: group).pool()
    }

    /// The database that holds `group`, as the directory in the home database places it
    /// (``SyncDirectory``; read once per ``DirectoryCache/lifetime``, and its last answer kept while
    /// the home database does not answer). A group the directory holds (being moved), or places in a
    /// database this gateway was not given, is refused with 503 and `Retry-After`, in a line that says
    /// which: another gateway, or this one restarted with the name, serves it. The directory is read
    /// whether or not other databases were given, so that a gateway started without them never
    /// serves a group from the wrong database.
    func database(of group: String) async throws -> GroupDatabase {
        let place = try await place(of: group)
        switch place {
        case .home:
            return home
        case .named(let name):
            if let found = databases[name] { return found }
            throw Refusal(status: .serviceUnavailable, line: "the directory places this group in the database '\(name)', which this gateway was not given (kvtool sync gateway --group-database \(name)=URL); try again",
                          retryAfter: Self.unreachableRetryAfter)
        case .held:
            throw Refusal(status: .serviceUnavailable, line: "this group is being moved to another database; try again",
                          retryAfter: Self.unreachableRetryAfter)
        }
    }

    /// Where the directory places `group`: remembered, or read in the home database.
    func place(of group: String) async throws -> SyncDirectory.Place {
        let remembered = directory.place(of: group)
        if let remembered, remembered.current { return remembered.place }
        do {
            let logger = options.logger
            let place = try await pool().withTransaction(logger: logger) { connection in
                try await ServerStatements.assumeGatewayRole(connection, local: true, logger: logger)
                return try await SyncDirectory.place(of: group, on: connection, logger: logger)
            }
            directory.remember(place, of: group)
            return place
        } catch {
            // The home database does not answer: the last place known still serves the group (its own
            // database may well answer); a group never seen waits for the directory.
            if let remembered { return remembered.place }
            throw error
        }
    }
}
#endif
