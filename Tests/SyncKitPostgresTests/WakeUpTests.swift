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

/// Wake-ups after the commit (issue 51): `kvsync_push` (revision 7) no longer notifies inside its
/// transaction; whoever pushed (a direct replicator, a gateway) sends the wake-up after the commit,
/// and a gateway's poll of its live groups' sequences finds a push whose wake-up was lost. Real
/// PostgreSQL, real gateways (in this process) and real devices.
@Suite(.serialized) struct WakeUpTests {
    static let logger = Logger(label: "test.wake")

    static func group(_ name: String) -> String { GatewayTests.group(name) }

    /// One change of `notes`, as a replicator sends it.
    static func change(_ key: String, token: UInt64) -> OutgoingChange {
        OutgoingChange(kind: "collection", name: "notes", key: Array(key.utf8), value: Array("\"v\"".utf8),
                       clock: UInt64(Date().timeIntervalSince1970 * 1000) << 16, base: 0, token: token)
    }

    /// A gateway in this process, on `cluster`, with `options`; its URL, and the task that runs it.
    static func gateway(_ cluster: LocalPostgresCluster, _ options: SyncGateway.Options) async throws -> (SyncGateway, String, Task<Void, any Error>) {
        let gateway = try SyncGateway(database: try await cluster.prepareForGateways(), options: options)
        let bound = Locked<String?>(nil)
        let running = Task { try await gateway.run(host: "127.0.0.1", port: 0) { url in bound.withLock { $0 = url } } }
        #expect(await eventuallyAsync(30) { bound.withLock { $0 } != nil })
        return (gateway, try #require(bound.withLock { $0 }), running)
    }

    /// A gateway in this process whose poll runs every 200 ms, a pusher's connection to its cluster, and
    /// a live stream of `group` on the gateway, once the stream's hello came and two rounds of the poll
    /// began after it. `beforeStream` runs before the stream opens.
    struct PolledStream {
        let cluster: LocalPostgresCluster
        let gateway: SyncGateway
        let running: Task<Void, any Error>
        let pusher: ServerConnection
        let follower: GatewayLiveTests.LiveFollower

        init(_ group: String, beforeStream: (ServerConnection) async throws -> Void = { _ in }) async throws {
            cluster = try await offPool { try LocalPostgresCluster() }
            var options = SyncGateway.Options()
            options.wakePollInterval = .milliseconds(200)
            let url: String
            (gateway, url, running) = try await WakeUpTests.gateway(cluster, options)
            pusher = try await ServerConnection.connect(cluster.tcpURL, logger: WakeUpTests.logger, maxValueBytes: 1 << 20)
            try await beforeStream(pusher)
            let token = try await SyncTokens.issue(on: cluster.tcpURL, group: group, device: "reader").token
            let follower = try GatewayLiveTests.LiveFollower(url, token: token, group: group)
            self.follower = follower
            let opened = await eventuallyAsync(30) { follower.count >= 1 }
            #expect(opened, "the stream's hello did not come")
            try await pollTwice()
        }

        /// Until two rounds of the poll began after the call.
        func pollTwice(_ rounds: Int = 2) async throws {
            let polled = gateway.wakePolls.withLock { $0 }
            let gateway = gateway
            let reached = await eventuallyAsync(30) { gateway.wakePolls.withLock { $0 } >= polled + rounds }
            #expect(reached, "the poll did not run \(rounds) rounds")
        }

        func push(_ group: String, _ key: String, token: UInt64) async throws {
            _ = try await pusher.statements.push(group: group, device: "sql", changes: [WakeUpTests.change(key, token: token)], maxClockSkew: .seconds(60))
        }

        func close() async throws {
            await pusher.close()
            gateway.shutdown()
            _ = await follower.task.value
            try await running.value
        }
    }

    /// The push's transaction sends no notification (the notification a LISTENing connection gets
    /// first is the one sent after the commit, not the group's); a direct replicator's push still
    /// reaches a direct replicator that LISTENs, and a push through a gateway a stream of that gateway,
    /// with the gateways' poll and the replicators' poll both too slow to be what delivered them.
    @Test func pushesWakeDirectListenersAndGatewayStreamsAfterTheCommitOnly() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("wake")
        let listener = try await ServerConnection.connect(cluster.tcpURL, logger: Self.logger, maxValueBytes: 1 << 20)
        let pusher = try await ServerConnection.connect(cluster.tcpURL, logger: Self.logger, maxValueBytes: 1 << 20)
        try await pusher.migrate()
        let heard = Locked<[String]>([])
        let listening = Task {
            try await listener.connection.listen(on: ServerSchema.channel) { notifications in
                for try await notification in notifications { heard.withLock { $0.append(notification.payload) } }
            }
        }
        // LISTEN is in place once a notification sent after it arrives.
        #expect(await eventuallyAsync(30) {
            try? await pusher.statements.wake(group: "ready")
            return heard.withLock { $0.contains("ready") }
        })
        // A push by SQL (the statement alone, in its own transaction), then another notification: a
        // push that notified inside its transaction would be heard first.
        let sqlGroup = group + "-sql"
        let outcomes = try await pusher.statements.push(group: sqlGroup, device: "sql", changes: [Self.change("k0", token: 1)],
                                                        maxClockSkew: .seconds(60))
        #expect(outcomes.count == 1 && { if case .applied = outcomes[0] { true } else { false } }(), "\(outcomes)")
        try await pusher.statements.wake(group: "after")
        #expect(await eventuallyAsync(30) { heard.withLock { $0.contains("after") } })
        let order = heard.withLock { $0 }.filter { $0 != "ready" }
        #expect(order.first == "after", "the push's own transaction notified: \(order)")
        listening.cancel()
        await listener.close()
        await pusher.close()

        // Directly: a replicator that LISTENs (and would poll only every 600 s) gets a write another
        // replicator pushes.
        var slow = Replicator.Options()
        slow.pollInterval = .seconds(600)
        let writer = try Device(group: group), reader = try Device(group: group)
        let rw = try writer.replicator(cluster.tcpURL)
        let rr = try reader.replicator(cluster.tcpURL, options: slow)
        // Its LISTEN is in place once a session's last statement is one (the one above is gone first).
        let listens = "SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%'"
        #expect(await eventuallyAsync(30) { (try? cluster.count(listens)) == 0 })
        let live = Task { try await rr.run(until: ContinuousClock.now + .seconds(120)) }
        #expect(await eventuallyAsync(30) { (try? cluster.count(listens)) == 1 })
        try writer.put("direct", "k1")
        var started = ContinuousClock.now
        try await rw.sync()
        #expect(await eventuallyAsync(30) { (try? reader.notes.get("k1")) == "direct" })
        print("[wake] a direct push reached a LISTENing replicator \(ContinuousClock.now - started) after its sync started")
        live.cancel()
        _ = try? await live.value
        await rr.close()
        await rw.close()

        // Through a gateway whose poll is too slow to matter: its stream is woken by the push's wake-up.
        var options = SyncGateway.Options()
        options.wakePollInterval = .seconds(600)
        let (gateway, url, running) = try await Self.gateway(cluster, options)
        let token = try await SyncTokens.issue(on: cluster.tcpURL, group: group, device: "writer").token
        let follower = try GatewayLiveTests.LiveFollower(url, token: token, group: group)
        #expect(await eventuallyAsync(30) { follower.count >= 1 })
        let before = follower.count
        let another = try Device(group: group)
        let through = try Replicator(container: another.container, gateway: SyncGatewayURL(url), token: token, targets: another.targets)
        try another.put("through the gateway", "k2")
        started = ContinuousClock.now
        try await through.sync()
        #expect(await eventuallyAsync(30) { follower.count > before })
        print("[wake] a push through the gateway woke its stream \(ContinuousClock.now - started) after its sync started")
        await through.close()
        gateway.shutdown()
        _ = await follower.task.value
        try await running.value
    }

    /// A push whose wake-up is lost (made by SQL, which sends none) reaches a gateway's live stream
    /// through the gateway's poll of its live groups' sequences.
    @Test func aLostWakeUpReachesAGatewayStreamThroughThePoll() async throws {
        let group = Self.group("lost-wake")
        let rig = try await PolledStream(group)
        let before = rig.follower.count
        let started = ContinuousClock.now
        try await rig.push(group, "lost", token: 1)
        #expect(await eventuallyAsync(10) { rig.follower.count > before }, "the poll did not wake the stream")
        print("[wake] a push without a wake-up reached the gateway's stream \(ContinuousClock.now - started) after it (poll every 200 ms)")
        try await rig.close()
    }

    /// A commit wakes a stream once: its notification has the poll read the group's end at once, so
    /// the poll's rounds after it find nothing new. (Before, a notification woke the stream and the
    /// next round woke it again: two pulls by every device for every commit.) A second commit wakes it
    /// once more.
    @Test func aCommitWakesAStreamOnceThoughThePollFindsItToo() async throws {
        let group = Self.group("once")
        let rig = try await PolledStream(group)
        for round in 1...2 {
            let before = rig.follower.count
            // As a direct replicator pushes: the push, then its wake-up after the commit.
            try await rig.push(group, "k\(round)", token: UInt64(round))
            try await rig.pusher.statements.wake(group: group)
            #expect(await eventuallyAsync(30) { rig.follower.count > before }, "round \(round): the stream did not wake")
            // Three rounds of the poll that all began after the wake: none wakes the stream again.
            try await rig.pollTwice(3)
            #expect(rig.follower.count == before + 1, "round \(round): one commit woke the stream \(rig.follower.count - before) times")
        }
        try await rig.close()
    }

    /// A `LISTEN` that starts again (its connection, the watch's, closed: here its backend is
    /// terminated) has the poll read the live groups' ends at once, and wakes the group whose commit
    /// came without a notification, and not the group that did not move. (It woke every stream of the
    /// gateway before: with the `LISTEN` on the watch's connection, every probe past its deadline on a
    /// loaded machine would have had every device pull.) The poll's own round never comes here: its
    /// interval is 600 s.
    @Test func aListenThatStartsAgainWakesTheGroupThatMovedAndNotTheOther() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        var options = SyncGateway.Options()
        options.wakePollInterval = .seconds(600)
        let (gateway, url, running) = try await Self.gateway(cluster, options)
        let pusher = try await ServerConnection.connect(cluster.tcpURL, logger: Self.logger, maxValueBytes: 1 << 20)
        let (moved, quiet) = (Self.group("restart-moved"), Self.group("restart-quiet"))
        var followers: [GatewayLiveTests.LiveFollower] = []
        for (index, group) in [moved, quiet].enumerated() {
            let token = try await SyncTokens.issue(on: cluster.tcpURL, group: group, device: "reader").token
            let follower = try GatewayLiveTests.LiveFollower(url, token: token, group: group)
            #expect(await eventuallyAsync(30) { follower.count >= 1 }, "\(group): the stream's hello did not come")
            // A commit and its notification: the poll reads the group's end and wakes it, and knows it from then on.
            _ = try await pusher.statements.push(group: group, device: "sql", changes: [Self.change("first", token: UInt64(index + 1))], maxClockSkew: .seconds(60))
            try await pusher.statements.wake(group: group)
            #expect(await eventuallyAsync(30) { follower.count >= 2 }, "\(group): the notification did not wake the stream")
            followers.append(follower)
        }
        let (movedStream, quietStream) = (followers[0], followers[1])
        let quietBefore = quietStream.count
        // A commit whose notification is lost (SQL sends none): nothing wakes its stream yet.
        let movedBefore = movedStream.count
        _ = try await pusher.statements.push(group: moved, device: "sql", changes: [Self.change("lost", token: 3)], maxClockSkew: .seconds(60))
        // The gateway's connections end, the watch's (and its LISTEN) among them; the watch connects again.
        let ended = try cluster.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = '\(LocalPostgresCluster.gatewayLogin)'")
        #expect((Int(ended.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) >= 1, "no gateway connection to end: \(ended)")
        #expect(await eventuallyAsync(30) { movedStream.count > movedBefore }, "the LISTEN started again, and the commit it missed woke nothing")
        // The round that woke it read the quiet group's end in the same pass: it would have woken it then.
        try await Task.sleep(for: .seconds(2))
        #expect(quietStream.count == quietBefore, "the quiet group's stream was woken \(quietStream.count - quietBefore) times")
        await pusher.close()
        gateway.shutdown()
        for follower in followers { _ = await follower.task.value }
        try await running.value
    }

    /// A notification of a group that a round saw first and only noted wakes its streams though the
    /// group's end did not move since: the round may have read the notification's commit (a push
    /// between a stream's open and that round, whose notification came after it). Here the push comes
    /// before the stream opens, so the round certainly read it; its notification, sent after, wakes.
    @Test func aNotificationWakesAGroupARoundOnlyNoted() async throws {
        let group = Self.group("noted")
        let rig = try await PolledStream(group) { pusher in
            _ = try await pusher.statements.push(group: group, device: "sql", changes: [Self.change("k", token: 1)], maxClockSkew: .seconds(60))
        }
        let before = rig.follower.count
        try await rig.pusher.statements.wake(group: group)
        #expect(await eventuallyAsync(30) { rig.follower.count > before }, "the notification did not wake the group the round only noted")
        try await rig.close()
    }
}
#endif
