#if PostgreSQL
import Foundation
import KVStore
import NIOCore

/// Where a request came from, as the failed-authentication limit counts it: an IPv4 address, or an
/// IPv6 address's /64 (what one host or one home network holds), or a Unix socket's path.
struct SourceAddress: Hashable, Sendable, CustomStringConvertible {
    let bytes: [UInt8]

    init(_ address: SocketAddress?) {
        switch address {
        case .v4(let v4)?:
            bytes = withUnsafeBytes(of: v4.address.sin_addr) { [4] + Array($0) }
        case .v6(let v6)?:
            bytes = withUnsafeBytes(of: v6.address.sin6_addr) { [6] + Array($0.prefix(8)) }
        default:
            bytes = [0]
        }
    }

    var description: String {
        switch bytes.first {
        case 4: bytes.dropFirst().map(String.init).joined(separator: ".")
        case 6: stride(from: 1, to: bytes.count, by: 2).map { Hex.encode(Array(bytes[$0..<min($0 + 2, bytes.count)])) }
            .joined(separator: ":") + "::/64"
        default: "local"
        }
    }
}
#endif
