#if PostgreSQL
import Foundation
import PostgresNIO

/// Where the replication server is: a libpq-style URL.
///
/// - `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE` connects over TCP (no TLS: loopback or a
///   trusted network; put a TLS-terminating proxy in front of anything else);
/// - `postgres://USER@/DATABASE?host=/run/postgresql[&port=5433]` connects through the Unix socket in
///   that directory, as libpq does (`.s.PGSQL.PORT`, port 5432 unless given);
/// - `postgresql://` is accepted too. `$KVSTORE_SYNC_SERVER` is kvtool's default.
public struct ServerURL: Hashable, Sendable, CustomStringConvertible {
    public enum Endpoint: Hashable, Sendable {
        case tcp(host: String, port: Int)
        /// The socket file itself (`DIRECTORY/.s.PGSQL.PORT`).
        case unixSocket(path: String)
    }

    public var endpoint: Endpoint
    public var user: String
    public var password: String?
    public var database: String

    public init(endpoint: Endpoint, user: String, password: String? = nil, database: String) {
        self.endpoint = endpoint
        self.user = user
        self.password = password
        self.database = database
    }

    /// Parses `text`.
    ///
    /// - Throws: ``ReplicationError/invalidServerURL(_:reason:)`` naming what is wrong.
    public init(_ text: String) throws {
        func invalid(_ reason: String) -> ReplicationError { .invalidServerURL(Self.redacted(text), reason: reason) }
        guard text.utf8.count <= 4096 else { throw invalid("it is longer than 4096 bytes") }
        guard let components = URLComponents(string: text) else { throw invalid("it is not a URL") }
        guard let scheme = components.scheme, scheme == "postgres" || scheme == "postgresql" else {
            throw invalid("the scheme must be postgres:// or postgresql://")
        }
        guard let user = components.user, !user.isEmpty else { throw invalid("it names no user (postgres://USER@HOST/DATABASE)") }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty, !database.contains("/") else { throw invalid("it names no database after the host (…/DATABASE)") }
        var socketDirectory: String?
        var queryPort: Int?
        for item in components.queryItems ?? [] {
            switch item.name {
            case "host":
                guard let value = item.value, value.hasPrefix("/") else { throw invalid("host= must be an absolute socket directory") }
                socketDirectory = value
            case "port":
                guard let value = item.value, let port = Int(value), (1...65_535).contains(port) else {
                    throw invalid("port= must be a number from 1 to 65535")
                }
                queryPort = port
            default:
                throw invalid("unsupported parameter '\(item.name)' (only host= and port=)")
            }
        }
        let port: Int
        if let urlPort = components.port {
            guard (1...65_535).contains(urlPort) else { throw invalid("the port must be from 1 to 65535") }
            port = urlPort
        } else {
            port = queryPort ?? 5432
        }
        let host = components.host ?? ""
        // libpq also takes a socket directory as a percent-encoded host (postgres://u@%2Frun%2Fpostgresql/db).
        if socketDirectory == nil, host.hasPrefix("/") { socketDirectory = host }
        if let directory = socketDirectory {
            endpoint = .unixSocket(path: directory + "/.s.PGSQL.\(port)")
        } else {
            guard !host.isEmpty else { throw invalid("it names no host (or ?host=/socket/directory)") }
            endpoint = .tcp(host: host, port: port)
        }
        self.user = user
        password = components.password
        self.database = database
    }

    /// The URL with its password replaced by `***`.
    public var description: String {
        let credentials = user + (password == nil ? "" : ":***")
        switch endpoint {
        case .tcp(let host, let port): return "postgres://\(credentials)@\(host):\(port)/\(database)"
        case .unixSocket(let path): return "postgres://\(credentials)@/\(database)?host=\(path)"
        }
    }

    static func redacted(_ text: String) -> String {
        guard var components = URLComponents(string: text), components.password != nil else { return text }
        components.password = "***"
        return components.string ?? "(a URL with a password)"
    }

    /// A pool of at most `connections` (the sync gateway's).
    package func poolConfiguration(connections: Int) -> PostgresClient.Configuration {
        var configuration = switch endpoint {
        case .tcp(let host, let port):
            PostgresClient.Configuration(host: host, port: port, username: user, password: password, database: database, tls: .disable)
        case .unixSocket(let path):
            PostgresClient.Configuration(unixSocketPath: path, username: user, password: password, database: database)
        }
        configuration.options.maximumConnections = connections
        configuration.options.connectTimeout = .seconds(5)
        return configuration
    }

    /// One connection's configuration (the sync gateway's `LISTEN`).
    package var connectionConfiguration: PostgresConnection.Configuration { configuration }

    var configuration: PostgresConnection.Configuration {
        var configuration = switch endpoint {
        case .tcp(let host, let port):
            PostgresConnection.Configuration(host: host, port: port, username: user, password: password,
                                             database: database, tls: .disable)
        case .unixSocket(let path):
            PostgresConnection.Configuration(unixSocketPath: path, username: user, password: password, database: database)
        }
        configuration.options.connectTimeout = .seconds(5)
        return configuration
    }
}
#endif
