#if PostgreSQL
import Foundation
import NIOCore

/// Why a connection never reached the other side, in a few words ("connection refused", "no answer
/// (timed out)"), or `nil` when the error is of another kind (a refused login, a TLS failure, a
/// statement that failed). postgres-nio and SwiftNIO nest the socket's error in theirs, and print it
/// as `SingleConnectionFailure(target: [IPv4]…, error: connection reset (error set): Connection refused
/// (errno: 111))`: that text is read for the socket's error rather than each wrapper's type.
package func unreachableReason(_ error: any Error) -> String? {
    if let error = error as? NoServerChosen { return error.description }
    if let error = error as? IOError { return reason(errno: error.errnoCode) }
    if let error = error as? ChannelError, case .connectTimeout = error { return "no answer (timed out)" }
    let text = String(reflecting: error)
    if let range = text.range(of: #"errno: [0-9]+"#, options: .regularExpression),
       let code = Int32(text[range].dropFirst("errno: ".count)), let reason = reason(errno: code) {
        return reason
    }
    if text.contains("connectTimeout") { return "no answer (timed out)" }
    if text.contains("SocketAddressError") || text.contains("unknown(host:") || text.contains("dnsAError") {
        return "the host name does not resolve"
    }
    return nil
}

private func reason(errno code: Int32) -> String? {
    switch code {
    case ECONNREFUSED: "connection refused"
    case ETIMEDOUT: "no answer (timed out)"
    case EHOSTUNREACH: "no route to the host"
    case ENETUNREACH: "the network is unreachable"
    case ENOENT: "no socket there"
    case EACCES: "permission denied on the socket"
    default: nil
    }
}
#endif
