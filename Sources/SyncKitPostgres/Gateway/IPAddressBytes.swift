#if PostgreSQL
import Foundation
import NIOCore
import NIOSSL

/// An IPv4 or IPv6 address literal's bytes (4 or 16), or `nil` for a DNS name.
enum IPAddressBytes {
    static func parse(_ text: String) -> [UInt8]? {
        var host = text
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return withUnsafeBytes(of: v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 { return withUnsafeBytes(of: v6) { Array($0) } }
        return nil
    }

    static func text(_ bytes: [UInt8]) -> String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        return stride(from: 0, to: bytes.count, by: 2).map { String(format: "%x", Int(bytes[$0]) << 8 | Int(bytes[min($0 + 1, bytes.count - 1)])) }
            .joined(separator: ":")
    }

    /// Whether `host` is this machine: `localhost`, 127.0.0.0/8 or ::1.
    static func isLoopback(_ host: String) -> Bool {
        if host.lowercased() == "localhost" || host.lowercased() == "localhost." { return true }
        guard let bytes = parse(host) else { return false }
        return bytes.count == 4 ? bytes[0] == 127 : bytes == [UInt8](repeating: 0, count: 15) + [1]
    }
}

/// One line about a TLS failure that says what to do, without BoringSSL's error stack (which names
/// the source files of the machine it was built on).
package func describeTLS(_ error: any Error) -> String {
    if let mismatch = error as? CertificateNameMismatch { return mismatch.description }
    let text = String(describing: error)
    let reason = text.range(of: #"OPENSSL_internal:([A-Z0-9_]+)"#, options: .regularExpression)
        .map { String(text[$0].dropFirst("OPENSSL_internal:".count)) }
    switch reason {
    case "CERTIFICATE_VERIFY_FAILED"?:
        return "the gateway's certificate is not trusted: pass --ca-file FILE with the certificate of the authority that signed it"
    case "WRONG_VERSION_NUMBER"?, "HTTP_REQUEST"?:
        return "the other side does not speak TLS there: is the URL http:// rather than https://?"
    case "NO_SHARED_CIPHER"?, "UNSUPPORTED_PROTOCOL"?, "TLSV1_ALERT_PROTOCOL_VERSION"?, "NO_CIPHERS_AVAILABLE"?, "HANDSHAKE_FAILURE_ON_CLIENT_HELLO"?:
        return "the gateway and this device share no TLS version or cipher suite (\(reason!))"
    case let other?:
        return "the TLS handshake failed (\(other))"
    case nil:
        if let ssl = error as? NIOSSLError {
            switch ssl {
            case .uncleanShutdown: return "the gateway closed the TLS connection uncleanly"
            case .noCertificateToValidate: return "the gateway presented no certificate"
            case .unableToValidateCertificate: return "the gateway's certificate cannot be checked"
            default: return "TLS failed: \(String(describing: ssl).prefix(80).split(separator: "(").first ?? "")"
            }
        }
        return text.split(separator: "\n").first.map { String($0.prefix(300)) } ?? "TLS failed"
    }
}
#endif
