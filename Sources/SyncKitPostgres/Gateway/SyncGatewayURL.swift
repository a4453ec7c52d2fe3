#if PostgreSQL
import Foundation
import HTTPServerKit
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import SyncWire

/// Where a sync gateway is: `https://HOST[:PORT]`, whose certificate is verified against the system's
/// roots or ``caFile`` (the chain, and its DNS names against a DNS host, its IP addresses against an
/// IP host), with no plaintext fallback; or `http://HOST[:PORT]` on this machine (`localhost`,
/// 127.0.0.0/8, ::1), or on a network the user trusts (``allowsInsecureHTTP``): the credential travels
/// in every request, so plain HTTP anywhere else is refused.
public struct SyncGatewayURL: Hashable, Sendable, CustomStringConvertible {
    public var tls: Bool
    public var host: String
    public var port: Int
    /// PEM certificates to trust instead of the system's roots (a private CA).
    public var caFile: String?
    /// Whether `http://` to a host other than this machine was allowed (`--allow-insecure-http`).
    public var allowsInsecureHTTP: Bool

    /// Parses `text`.
    ///
    /// - Parameter allowInsecureHTTP: allow `http://` to another machine, which sends the credential
    ///   in clear text (a network the user trusts end to end).
    /// - Throws: ``ReplicationError/invalidServerURL(_:reason:)`` naming what is wrong.
    public init(_ text: String, caFile: String? = nil, allowInsecureHTTP: Bool = false) throws {
        func invalid(_ reason: String) -> ReplicationError { .invalidServerURL(ServerURL.redacted(text), reason: reason) }
        guard text.utf8.count <= 2048 else { throw invalid("it is longer than 2048 bytes") }
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased() else {
            throw invalid("it is not a URL")
        }
        guard scheme == "http" || scheme == "https" else { throw invalid("a gateway's scheme is http:// or https://") }
        guard components.user == nil, components.password == nil else {
            throw invalid("a gateway URL carries no user or password (the token is given apart)")
        }
        guard components.path.isEmpty || components.path == "/", components.query == nil, components.fragment == nil else {
            throw invalid("a gateway URL is only http(s)://HOST[:PORT]")
        }
        guard let host = components.host, !host.isEmpty else { throw invalid("it names no host") }
        let port = components.port ?? (scheme == "https" ? 443 : 80)
        guard (1...65_535).contains(port) else { throw invalid("the port must be from 1 to 65535") }
        if let caFile, scheme != "https" { throw invalid("a CA file (\(caFile)) is only for https://") }
        if scheme == "http" && !allowInsecureHTTP && !IPAddressBytes.isLoopback(host) {
            throw invalid("http:// would send the credential in clear text to \(host): use https://, or pass --allow-insecure-http for a network you trust end to end")
        }
        self.tls = scheme == "https"
        self.host = host
        self.port = port
        self.caFile = caFile
        allowsInsecureHTTP = allowInsecureHTTP
    }

    public var description: String { "\(tls ? "https" : "http")://\(host.contains(":") ? "[\(host)]" : host):\(port)" }

    /// Whether `text` names a gateway (http:// or https://) rather than a database.
    public static func isGateway(_ text: String) -> Bool {
        let lower = text.prefix(8).lowercased()
        return lower.hasPrefix("http://") || lower.hasPrefix("https://")
    }
}
#endif
