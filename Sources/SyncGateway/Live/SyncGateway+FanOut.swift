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

    /// One `LISTEN` on the sync channel of `target` (one per database) for the whole gateway,
    /// reconnecting with a backoff; a notification of a group with live streams here has the poll read
    /// its end at once, and wake its streams if it moved (``pollLiveGroups(of:)``).
    func listen(to target: GroupDatabase) async {
        var backoff: Duration = .milliseconds(100)
        while !Task.isCancelled {
            let changes = target.link.status.changes
            do {
                // With a host list, on the read-write server (LISTEN does not work on a standby).
                let connection = try await connectToDatabase(target, id: 0, timeout: .seconds(5))
                defer { Task { try? await connection.close() } }
                try await connection.listen(on: ServerStatements.channel) { notifications in
                    backoff = .milliseconds(100)
                    hub.notify(group: nil)
                    // Read by the poll (``pollLiveGroups(of:)``), which wakes a group whose log moved.
                    for try await notification in notifications where hub.isLive(notification.payload) {
                        target.notified.add(notification.payload)
                    }
                }
            } catch {
                if Task.isCancelled { return }
            }
            // Sooner when the watch finds the database again (a failover's new primary).
            await pause(backoff, unlessAnsweringSince: changes, in: target)
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
