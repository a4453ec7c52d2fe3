#if PostgreSQL
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPServerKit
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import SyncKitPostgres
import SyncWire

extension SyncGateway {
    /// How often a live stream gets a comment when nothing happens (devices drop a stream silent for
    /// over twice as long, and connect again): the protocol's.
    static let heartbeat = GatewayWire.heartbeat

    /// The `LISTEN` on the sync channel of `target` (one per database) for the whole gateway, on the
    /// watch's connection (``watchDatabase(_:listening:)``, whose child task this is), until the
    /// connection closes or the task is cancelled. Each start has the poll (``pollLiveGroups(of:)``)
    /// read the ends of all of `target`'s live groups at once and wake those that moved: a notification
    /// may have come while nothing listened. (It woke every stream of the gateway before: with the
    /// `LISTEN` on the watch's connection, a probe that misses its deadline on a loaded machine restarts
    /// it, and every device would pull then.) A notification of a group with live streams here has the
    /// poll read its end at once, and wake its streams if it moved. A
    /// `LISTEN` that fails while its connection stays open is tried again on it, with a backoff; one
    /// whose connection closes ends with it, and the watch's next connection `LISTEN`s again (with a
    /// host list, on the read-write server: `LISTEN` does not work on a standby).
    func listen(on connection: PostgresConnection, to target: GroupDatabase) async {
        var backoff: Duration = .milliseconds(100)
        while !Task.isCancelled && !connection.isClosed {
            do {
                try await connection.listen(on: ServerStatements.channel) { notifications in
                    backoff = .milliseconds(100)
                    target.notified.roundNow()
                    // Read by the poll (``pollLiveGroups(of:)``), which wakes a group whose log moved.
                    for try await notification in notifications where hub.isLive(notification.payload) {
                        target.notified.add(notification.payload)
                    }
                }
            } catch {
                if Task.isCancelled { return }
            }
            let end = ContinuousClock.now + backoff
            while ContinuousClock.now < end && !connection.isClosed && !Task.isCancelled {
                try? await Task.sleep(for: min(.milliseconds(50), end - ContinuousClock.now))
            }
            backoff = min(backoff * 2, .seconds(5))
        }
    }

    /// Every ``heartbeat``, a comment to every stream.
    func beat() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: Self.heartbeat)
            hub.heartbeat()
        }
    }
}
#endif
