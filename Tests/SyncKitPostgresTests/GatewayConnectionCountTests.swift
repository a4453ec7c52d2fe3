#if PostgreSQL
import Foundation
import KVStore
import Logging
import PostgresNIO
@testable import SyncGateway
import SyncKit
@testable import SyncKitPostgres
import SyncWire
@testable import PostgresTesting
import TestSupport
import SyncTestSupport
import Testing

/// The PostgreSQL connections a gateway holds for its database: its pool
/// (``SyncGateway/Limits/databaseConnections``) and one more, the watch's, which also carries the
/// `LISTEN`; the revocation sweep leases the pool's. Real PostgreSQL, a gateway in this process, raw
/// pushes held back by locks the test takes (so that every connection of the pool is open at once),
/// `pg_stat_activity` read as the cluster's superuser (its own sessions are not the gateway login's).
@Suite(.serialized) struct GatewayConnectionCountTests {
    /// The gateway login's sessions, as `pg_stat_activity` shows them to `observer`, a connection of
    /// the cluster's superuser (`waiting`: those waiting for a lock). On a connection of the test's own,
    /// not through `psql`: two `psql`s at once on one cluster share their output file.
    static func gatewaySessions(_ observer: ServerConnection, waiting: Bool = false) async throws -> Int {
        let login = LocalPostgresCluster.gatewayLogin
        let rows = waiting
            ? try await observer.connection.query("SELECT count(*)::int8 FROM pg_stat_activity WHERE usename = \(login) AND wait_event_type = 'Lock'",
                                                  logger: logger)
            : try await observer.connection.query("SELECT count(*)::int8 FROM pg_stat_activity WHERE usename = \(login)", logger: logger)
        for try await count in rows.decode(Int64.self) { return Int(count) }
        return -1
    }

    static let logger = Logger(label: "test.connections")

    /// A gateway whose pool holds 3 connections, all of them busy at once (a push from each of three
    /// devices, each held back by the lock of its group's row), with a live stream open (so that the
    /// `LISTEN` and the revocation sweep have work): it holds exactly 4 connections once the pool is
    /// full, and never more on any sample taken from the stream's opening until the pushes are let
    /// go. Then a push by another device of the stream's group still wakes the stream (the `LISTEN`
    /// on the watch's connection; the poll is too slow to be what woke it), and the stream of a
    /// credential revoked then closes (the sweep, through the pool).
    @Test func aGatewayHoldsItsPoolAndOneConnectionMore() async throws {
        let pool = 3
        let cluster = try await offPool { try LocalPostgresCluster() }
        var options = SyncGateway.Options()
        options.limits.databaseConnections = pool
        // No held push is given up while the test holds it (its connection would close, another open).
        options.limits.transactionTimeout = .seconds(120)
        // The poll's round never comes during the test: only a notification can wake the stream.
        options.wakePollInterval = .seconds(600)
        let (gateway, url, running) = try await WakeUpTests.gateway(cluster, options)
        let observer = try await ServerConnection.connect(cluster.tcpURL, logger: Self.logger, maxValueBytes: 1 << 20)

        let live = GatewayTests.group("count-live")
        let reader = try await SyncTokens.issue(on: cluster.tcpURL, group: live, device: "reader").token
        let writer = try await SyncTokens.issue(on: cluster.tcpURL, group: live, device: "writer").token
        let held = (0..<pool).map { GatewayTests.group("count-held-\($0)") }
        var tokens: [String] = []
        for group in held {
            let token = try await SyncTokens.issue(on: cluster.tcpURL, group: group, device: "d").token
            tokens.append(token)
            // Its group's row exists from here on, for the test to lock.
            let first = try await GatewayTransactionDeadlineTests.accepted(url, token, group: group, key: "k1", change: 1)
            #expect(first.status == 200, "\(first.status) \(first.text)")
        }
        let follower = try GatewayLiveTests.LiveFollower(url, token: reader, group: live)
        #expect(await eventuallyAsync(30) { follower.count == 1 }, "the stream's hello did not come")

        // Every sample from here until the held pushes are let go.
        let samples = Locked<[Int]>([])
        let sampling = Task {
            while !Task.isCancelled {
                if let count = try? await Self.gatewaySessions(observer) { samples.withLock { $0.append(count) } }
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        var locks: [GatewayTransactionDeadlineTests.GroupLock] = []
        for group in held { locks.append(try await GatewayTransactionDeadlineTests.GroupLock(cluster, group: group)) }
        let pushes = zip(held, tokens).map { group, token in
            Task { try await GatewayTransactionDeadlineTests.push(url, token, group: group, key: "k2", change: 2) }
        }
        // Each held push holds a connection of the pool: the pool is full.
        let full = await eventuallyAsync(60) { (try? await Self.gatewaySessions(observer, waiting: true)) == pool }
        let waiting = (try? await Self.gatewaySessions(observer, waiting: true)) ?? -1
        #expect(full, "\(waiting) of the \(pool) pushes wait for their locks")
        // The pool's and the watch's (which may be between two connections when a sample is taken).
        let reached = await eventuallyAsync(30) { (try? await Self.gatewaySessions(observer)) == pool + 1 }
        let atFull = (try? await Self.gatewaySessions(observer)) ?? -1
        #expect(reached, "the gateway holds \(atFull) connections with its pool of \(pool) full, not \(pool + 1)")
        // A few more samples with the pool full.
        let taken = samples.withLock { $0.count }
        _ = await eventuallyAsync(30) { samples.withLock { $0.count } >= taken + 5 }
        sampling.cancel()
        _ = await sampling.value
        for lock in locks { try await lock.release() }
        for push in pushes {
            let answer = try await push.value
            #expect(answer.status == 200, "\(answer.status) \(answer.text)")
        }
        let seen = samples.withLock { $0 }
        print("GatewayConnectionCountTests: the gateway login's sessions, sampled every 100 ms, pool \(pool): \(seen)")
        #expect(!seen.isEmpty)
        #expect(seen.allSatisfy { $0 <= pool + 1 }, "over \(pool + 1) connections: \(seen)")

        // The LISTEN on the watch's connection: another device's push wakes the stream.
        let before = follower.count
        let pushed = try await GatewayTransactionDeadlineTests.accepted(url, writer, group: live, key: "w", change: 1)
        #expect(pushed.status == 200, "\(pushed.status) \(pushed.text)")
        #expect(await eventuallyAsync(30) { follower.count > before }, "the push did not wake the live stream")

        // The sweep, through the pool: the revoked credential's stream closes.
        #expect(try await SyncTokens.revoke(on: cluster.tcpURL, device: "reader", group: live) == 1)
        let ended = try #require(await outcome(of: follower.task, within: 30), "the revoked credential's stream stayed open")
        #expect(ended as? ReplicationError == .credentialRefused("the credential was revoked"), "\(String(describing: ended))")

        await observer.close()
        gateway.shutdown()
        try await running.value
    }
}
#endif
