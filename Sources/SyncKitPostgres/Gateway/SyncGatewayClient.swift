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

/// What a process that does not sync can ask a gateway: to be woken when its group changes (a widget
/// whose app syncs, say, or a dashboard).
public enum SyncGatewayClient {
    /// Follows the gateway's live stream for `group` until it ends (the gateway drained, or the
    /// connection dropped): `onChange` is called when it opens and for every commit of the group.
    ///
    /// - Throws: ``ReplicationError/credentialRefused(_:)`` when the credential is refused, revoked or
    ///   expires; ``ReplicationError/rateLimited(retryAfter:budget:)`` when the credential has as many streams
    ///   open as the gateway allows (or sent too many requests); ``ReplicationError/server(_:)`` when the
    ///   gateway cannot be reached.
    public static func followChanges(gateway: SyncGatewayURL, token: String, group: String,
                                     connectTimeout: Duration = .seconds(10), onChange: @escaping @Sendable () -> Void) async throws {
        let connection = try GatewayConnection(url: gateway, token: token, group: group, maxValueBytes: 1 << 20,
                                               operationTimeout: .seconds(120), connectTimeout: connectTimeout)
        try await connection.live(onChange: onChange)
    }
}
#endif
