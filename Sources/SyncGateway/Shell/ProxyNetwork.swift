#if PostgreSQL
import Foundation
import NIOCore
import SyncWire

/// One CIDR block of ``SyncGateway/Options/trustedProxies``: `10.0.0.0/8`, `2001:db8::/32`, or an
/// address alone (all of its bits). Bits past the prefix are ignored (`10.1.2.3/8` is `10.0.0.0/8`).
public struct ProxyNetwork: Sendable, Equatable, CustomStringConvertible {
    /// 4 or 16 bytes.
    let bytes: [UInt8]
    let prefix: Int
    public let description: String

    /// - Throws: one line naming what is wrong with `text`.
    public init(_ text: String) throws(ProxyHeaderError) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = ProxyNetwork.parse(String(parts[0])) else {
            throw ProxyHeaderError("'\(GatewayRequestHead.shown(text))' is not an address or a CIDR block (10.0.0.0/8, 2001:db8::/32)")
        }
        let bits = address.count * 8
        var prefix = bits
        if parts.count == 2 {
            guard let length = Int(parts[1]), parts[1].allSatisfy(\.isASCII), parts[1].allSatisfy(\.isNumber), parts[1].count <= 3,
                  (0...bits).contains(length) else {
                throw ProxyHeaderError("'\(GatewayRequestHead.shown(text))' has a prefix length that is not from 0 to \(bits)")
            }
            prefix = length
        }
        (bytes, self.prefix, description) = (address, prefix, text)
    }

    /// The 4 or 16 bytes of an IPv4 or IPv6 address's text.
    static func parse(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    /// Whether `address` (an IPv4 address, an IPv6 one, or an IPv4 one mapped into IPv6, as a dual-stack
    /// listener sees IPv4 peers) is in this block.
    func contains(_ address: [UInt8]) -> Bool {
        var address = address
        if address.count == 16 && bytes.count == 4 && address.prefix(12) == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF] {
            address = Array(address.suffix(4))
        }
        guard address.count == bytes.count else { return false }
        for index in 0..<bytes.count {
            let bits = min(8, max(0, prefix - index * 8))
            guard bits > 0 else { return true }
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
            if address[index] & mask != bytes[index] & mask { return false }
        }
        return true
    }

    /// The bytes of a socket's address (`nil`: not an IP address).
    static func bytes(of address: SocketAddress?) -> [UInt8]? {
        switch address {
        case .v4(let v4)?: withUnsafeBytes(of: v4.address.sin_addr) { Array($0) }
        case .v6(let v6)?: withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
        default: nil
        }
    }
}
#endif
