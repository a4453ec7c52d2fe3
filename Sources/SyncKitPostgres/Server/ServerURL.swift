#if PostgreSQL
import Foundation
import NIOSSL
import PostgresNIO

/// Where the replication server is: a libpq-style URL.
///
/// - `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE` connects over TCP (no TLS: loopback or a
///   trusted network; put a TLS-terminating proxy in front of anything else);
/// - `postgres://USER@/DATABASE?host=/run/postgresql[&port=5433]` connects through the Unix socket in
///   that directory, as libpq does (`.s.PGSQL.PORT`, port 5432 unless given);
/// - `?sslmode=require` encrypts a TCP connection without checking the server's certificate;
///   `?sslmode=verify-full[&sslrootcert=FILE]` checks it against the system's roots (or the PEM
///   file) and the host name, as libpq does; `disable` (the default) connects in the clear;
/// - `postgres://USER@H1:P1,H2:P2/DATABASE?target_session_attrs=read-write` is libpq's host list:
///   connections try the hosts in order and keep the first that answers (`any`, the default), or the
///   first whose sessions are read-write (`read-write`: the primary, after a failover too), and
///   likewise `read-only`, `primary`, `standby` and `prefer-standby`; `?port=` (one port, or one per
///   host) replaces the ports, `?host=` (socket directories) the hosts, as in libpq;
/// - `postgresql://` is accepted too. `$KVSTORE_SYNC_SERVER` is kvtool's default.
public struct ServerURL: Hashable, Sendable, CustomStringConvertible {
    public enum Endpoint: Hashable, Sendable {
        case tcp(host: String, port: Int)
        /// The socket file itself (`DIRECTORY/.s.PGSQL.PORT`).
        case unixSocket(path: String)
    }

    /// TLS to the server (libpq's `sslmode`).
    public enum TLSMode: Hashable, Sendable {
        /// In the clear (loopback, a Unix socket, a trusted network).
        case disable
        /// Encrypted, the certificate not checked (libpq's `require`: a passive eavesdropper learns
        /// nothing; an active one in the middle can).
        case require
        /// Encrypted, the certificate checked against `rootCertificates` (a PEM file), or the
        /// system's roots, and the host name.
        case verifyFull(rootCertificates: String?)
    }

    /// The hosts, in the order connections try them (libpq's host list: `postgres://USER@H1:P1,H2:P2/DATABASE`);
    /// never empty.
    public var endpoints: [Endpoint]
    /// The first of ``endpoints`` (the only one, without a host list).
    public var endpoint: Endpoint {
        get { endpoints[0] }
        set { endpoints[0] = newValue }
    }
    /// Which of ``endpoints`` a connection keeps (libpq's `target_session_attrs`; `any`, the first that
    /// answers, by default).
    public var targetSessionAttributes: TargetSessionAttributes = .any
    public var tls: TLSMode = .disable
    public var user: String
    public var password: String?
    public var database: String

    public init(endpoint: Endpoint, user: String, password: String? = nil, database: String) {
        self.init(endpoints: [endpoint], user: user, password: password, database: database)
    }

    /// A host list: connections try `endpoints` in order (not empty).
    public init(endpoints: [Endpoint], targetSessionAttributes: TargetSessionAttributes = .any, user: String,
                password: String? = nil, database: String) {
        precondition(!endpoints.isEmpty, "a ServerURL needs at least one host")
        self.endpoints = endpoints
        self.targetSessionAttributes = targetSessionAttributes
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
        // libpq's host list (H1:P1,H2:P2) is no URL authority: it is taken off, and the rest parsed as a
        // URL without a host.
        let (rest, hostList) = Self.splitHostList(text)
        guard let components = URLComponents(string: rest) else { throw invalid("it is not a URL") }
        guard let scheme = components.scheme, scheme == "postgres" || scheme == "postgresql" else {
            throw invalid("the scheme must be postgres:// or postgresql://")
        }
        guard let user = components.user, !user.isEmpty else { throw invalid("it names no user (postgres://USER@HOST/DATABASE)") }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty, !database.contains("/") else { throw invalid("it names no database after the host (…/DATABASE)") }
        var hosts = try Self.parseHostList(hostList, invalid: invalid)
        var queryPorts: [Int?]?
        var sslMode = "disable"
        var rootCertificates: String?
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                guard let value = item.value, ["disable", "require", "verify-full"].contains(value) else {
                    throw invalid("unsupported sslmode '\(item.value ?? "")' (disable, require or verify-full)")
                }
                sslMode = value
            case "sslrootcert":
                guard let value = item.value, !value.isEmpty else { throw invalid("sslrootcert= names no file") }
                rootCertificates = value
            case "host":
                // libpq's query host= replaces the URL's hosts; here it names socket directories only.
                let directories = (item.value ?? "").split(separator: ",", omittingEmptySubsequences: false).map(String.init)
                guard directories.allSatisfy({ $0.hasPrefix("/") }) else { throw invalid("host= must be an absolute socket directory") }
                hosts = directories.map { (host: $0, port: nil) }
            case "port":
                // libpq's query port= replaces the URL's ports: one for every host, or one for each.
                queryPorts = try (item.value ?? "").split(separator: ",", omittingEmptySubsequences: false).map { text in
                    guard !text.isEmpty else { return nil }
                    guard let port = Int(text), (1...65_535).contains(port) else { throw invalid("port= must be a number from 1 to 65535") }
                    return port
                }
            case "target_session_attrs":
                guard let value = item.value, let attributes = TargetSessionAttributes(rawValue: value) else {
                    throw invalid("unsupported target_session_attrs '\(item.value ?? "")' (any, read-write, read-only, primary, standby or prefer-standby)")
                }
                targetSessionAttributes = attributes
            default:
                throw invalid("unsupported parameter '\(item.name)' (only host=, port=, sslmode=, sslrootcert= and target_session_attrs=)")
            }
        }
        if let queryPorts {
            guard queryPorts.count == 1 || queryPorts.count == hosts.count else {
                throw invalid("it gives \(queryPorts.count) ports for \(hosts.count) hosts (one port for all, or one for each)")
            }
            for index in hosts.indices { hosts[index].port = queryPorts.count == 1 ? queryPorts[0] : queryPorts[index] }
        }
        endpoints = try hosts.map { host, port in
            let port = port ?? 5432
            // libpq also takes a socket directory as a percent-encoded host (postgres://u@%2Frun%2Fpostgresql/db).
            if host.hasPrefix("/") { return .unixSocket(path: host + "/.s.PGSQL.\(port)") }
            guard !host.isEmpty else {
                throw invalid(hosts.count == 1 ? "it names no host (or ?host=/socket/directory)" : "its host list has an empty host")
            }
            return .tcp(host: host, port: port)
        }
        switch sslMode {
        case "require":
            guard rootCertificates == nil else { throw invalid("sslrootcert= needs sslmode=verify-full (require checks no certificate)") }
            tls = .require
        case "verify-full":
            tls = .verifyFull(rootCertificates: rootCertificates)
        default:
            guard rootCertificates == nil else { throw invalid("sslrootcert= needs sslmode=verify-full") }
        }
        if tls != .disable, endpoints.contains(where: { if case .unixSocket = $0 { true } else { false } }) {
            throw invalid("sslmode= is for TCP; a Unix socket is local")
        }
        self.user = user
        password = components.password
        self.database = database
    }

    /// The URL with its password replaced by `***`.
    public var description: String {
        let credentials = user + (password == nil ? "" : ":***")
        var parameters: [String] = []
        switch tls {
        case .disable: break
        case .require: parameters.append("sslmode=require")
        case .verifyFull(let file): parameters.append("sslmode=verify-full" + (file.map { "&sslrootcert=\($0)" } ?? ""))
        }
        if targetSessionAttributes != .any { parameters.append("target_session_attrs=\(targetSessionAttributes.rawValue)") }
        let query = parameters.isEmpty ? "" : "?" + parameters.joined(separator: "&")
        if endpoints.count == 1, case .unixSocket(let path) = endpoint {
            return "postgres://\(credentials)@/\(database)?host=\(path)" + query.replacingOccurrences(of: "?", with: "&")
        }
        return "postgres://\(credentials)@\(shownEndpoint)/\(database)\(query)"
    }

    /// `text` with the password in its user information replaced by `***` (read as text: a host list,
    /// or a URL that does not parse, has no `URLComponents`).
    static func redacted(_ text: String) -> String {
        guard let scheme = text.range(of: "://") else { return text }
        let afterScheme = text[scheme.upperBound...]
        let authority = afterScheme[..<(afterScheme.firstIndex(where: { "/?#".contains($0) }) ?? afterScheme.endIndex)]
        guard let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") else { return text }
        return String(text[..<authority.index(after: colon)]) + "***" + String(text[at...])
    }

    /// The TLS context of ``tls`` (`nil`: in the clear).
    func sslContext() throws -> NIOSSLContext? {
        try tlsConfiguration().map { try clientSSLContext($0, for: description) }
    }

    /// The TLS configuration of ``tls`` (`nil`: in the clear).
    func tlsConfiguration() throws -> TLSConfiguration? {
        switch tls {
        case .disable: return nil
        case .require:
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.minimumTLSVersion = .tlsv12
            configuration.certificateVerification = .none
            return configuration
        case .verifyFull(let file): return try verifyingTLS(trusting: file, for: description)
        }
    }

    /// A pool of at most `connections` (the sync gateway's), to `host` (the first of ``endpoints`` unless
    /// given: postgres-nio's pool has no host list; the gateway points it at the one its own connection
    /// chose, ``connectChoosing(id:logger:timeout:)``).
    package func poolConfiguration(connections: Int, to host: Endpoint? = nil) throws -> PostgresClient.Configuration {
        var configuration = switch host ?? endpoint {
        case .tcp(let host, let port):
            PostgresClient.Configuration(host: host, port: port, username: user, password: password, database: database,
                                         tls: try tlsConfiguration().map { .require($0) } ?? .disable)
        case .unixSocket(let path):
            PostgresClient.Configuration(unixSocketPath: path, username: user, password: password, database: database)
        }
        configuration.options.maximumConnections = connections
        configuration.options.connectTimeout = .seconds(5)
        return configuration
    }

    /// One connection's configuration (a device's, the token commands', the gateway's `LISTEN`), to
    /// `host` (the first of ``endpoints`` unless given; ``connectChoosing(id:logger:timeout:)`` tries each).
    package func connectionConfiguration(to host: Endpoint? = nil) throws -> PostgresConnection.Configuration {
        var configuration = switch host ?? endpoint {
        case .tcp(let host, let port):
            PostgresConnection.Configuration(host: host, port: port, username: user, password: password,
                                             database: database, tls: try sslContext().map { .require($0) } ?? .disable)
        case .unixSocket(let path):
            PostgresConnection.Configuration(unixSocketPath: path, username: user, password: password, database: database)
        }
        configuration.options.connectTimeout = .seconds(5)
        return configuration
    }
}
#endif
