#if PostgreSQL
import Foundation
import HTTPServerKit
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import PostgresNIO
import SyncKitPostgres

extension SyncGateway {
    /// Tells ``Options/log`` of a refusal or an error answered to `endpoint`.
    func log(_ response: GatewayResponse, method: HTTPMethod?, endpoint: GatewayMetrics.Endpoint, peer: SocketAddress?) {
        guard let log = options.log else { return }
        let reason: String?
        switch response.outcome {
        case .answered: return
        case .refused(let refused): reason = refused.label
        case .failed: reason = nil
        }
        let line = response.logLine ?? String(decoding: response.body.readableBytesView.prefix(1_000), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        log(GatewayLogEvent(level: reason == nil ? .error : .warning, event: reason == nil ? "error" : "refusal", reason: reason,
                            status: response.status.rawValue, method: method.map(Self.logged), endpoint: endpoint.label,
                            peer: peer?.ipAddress, message: line))
    }

    /// A request's method as the log shows it: HTTP's own methods by name, any other `other`, so that
    /// a client never writes its text into the log through its method (nor through its path: the
    /// endpoint is one of a fixed set, and a refusal's line holds nothing of the request).
    static func logged(_ method: HTTPMethod) -> String {
        switch method {
        case .GET, .HEAD, .POST, .PUT, .DELETE, .OPTIONS, .PATCH, .CONNECT, .TRACE: method.rawValue
        default: "other"
        }
    }
}
#endif
