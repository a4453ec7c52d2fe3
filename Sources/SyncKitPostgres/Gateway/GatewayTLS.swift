#if PostgreSQL
import Foundation
import NIOCore
import NIOSSL

/// The TLS of a device's connection to a sync gateway: BoringSSL checks the chain (against the
/// system's roots or `--ca-file`), and this checks the name, as RFC 6125 says and more strictly than
/// NIOSSL does: a DNS name only against the certificate's DNS names (never against an IP address
/// the name resolved to), an IP address only against its IP addresses. Nothing is written on the
/// connection before both pass.
enum GatewayTLS {
    /// The context: a verifying configuration whose own name check is left to ``handler(context:host:)``.
    static func context(trusting caFile: String?, for url: String) throws -> NIOSSLContext {
        var configuration = try verifyingTLS(trusting: caFile, for: url)
        configuration.certificateVerification = .noHostnameVerification
        return try clientSSLContext(configuration, for: url)
    }

    /// A client handler for `host` (sent as the server name when it is a DNS name).
    static func handler(context: NIOSSLContext, host: String) throws -> NIOSSLClientHandler {
        let address = IPAddressBytes.parse(host)
        return try NIOSSLClientHandler._makeSSLClientHandler(context: context, serverHostname: address == nil ? host : nil) { certificate, channel in
            let names = certificate._subjectAlternativeNames()
            var dns: [String] = []
            var ips: [[UInt8]] = []
            for name in names {
                switch name.nameType {
                case .dnsName: dns.append(String(decoding: name.contents, as: UTF8.self))
                case .ipAddress: ips.append(Array(name.contents))
                default: continue
                }
            }
            let matches = if let address { ips.contains(address) } else { dns.contains { matchesDNSName(host, $0) } }
            guard matches else {
                let shown = dns + ips.map(IPAddressBytes.text)
                return channel.eventLoop.makeFailedFuture(CertificateNameMismatch(host: host, names: shown))
            }
            return channel.eventLoop.makeSucceededVoidFuture()
        }
    }

    /// Whether the certificate's DNS name `pattern` names `host`: equal ignoring ASCII case and a
    /// trailing dot, or a wildcard `*.rest` standing for exactly one leftmost label of a name that
    /// has at least three labels.
    static func matchesDNSName(_ host: String, _ pattern: String) -> Bool {
        func normal(_ name: String) -> [Substring] {
            var lowered = name.lowercased()
            if lowered.hasSuffix(".") { lowered.removeLast() }
            return lowered.split(separator: ".", omittingEmptySubsequences: false)
        }
        let hostLabels = normal(host), patternLabels = normal(pattern)
        guard !hostLabels.isEmpty, hostLabels.count == patternLabels.count, !hostLabels.contains(where: \.isEmpty) else { return false }
        if patternLabels[0] == "*" {
            return patternLabels.count >= 3 && !hostLabels[0].isEmpty && hostLabels.dropFirst().elementsEqual(patternLabels.dropFirst())
        }
        return hostLabels == patternLabels
    }
}

#endif
