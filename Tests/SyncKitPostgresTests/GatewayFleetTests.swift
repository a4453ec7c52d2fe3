#if PostgreSQL
import Foundation
import KVStore
import SyncKit
@testable import SyncKitPostgres
@testable import PostgresTesting
import TestSupport
import SyncTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Several `kvtool sync gateway` processes on one database behind Debian's HAProxy (round robin, no
/// stickiness, the PROXY protocol to the gateways), as Operating.md deploys them: a device may follow
/// one gateway and push through another, lose its gateway to `kill -9` or a drain, and be revoked on
/// whichever holds its stream. The gateways are stateless: the log and every device's cursor are in
/// PostgreSQL, so any gateway serves any device.
@Suite(.serialized, .oneServerFleetAtATime, .enabled(if: LocalHAProxy.isInstalled, "HAProxy is not installed (apt-get install haproxy)"))
struct GatewayFleetTests {
    /// Gateways on one cluster, each trusting the proxy's PROXY headers, behind one HAProxy.
    final class Fleet: @unchecked Sendable {
        let cluster: LocalPostgresCluster
        let gateways: [BackgroundProcess]
        let metrics: [String]
        let proxy: LocalHAProxy

        init(_ count: Int) async throws {
            cluster = try await offPool { try LocalPostgresCluster() }
            var gateways: [BackgroundProcess] = [], metrics: [String] = [], ports: [Int] = []
            for _ in 0..<count {
                let (process, url) = try await startGateway(cluster, extra: ["--trusted-proxy", "127.0.0.1"])
                gateways.append(process)
                let base = try #require(gatewayMetricsBase(process))
                metrics.append(base)
                ports.append(Int(url.split(separator: ":").last ?? "") ?? 0)
            }
            (self.gateways, self.metrics) = (gateways, metrics)
            do {
                proxy = try LocalHAProxy(gateways: ports)
            } catch {
                // deinit does not run for an object whose init threw.
                for gateway in gateways { gateway.kill(SIGKILL) }
                throw error
            }
        }

        deinit {
            for gateway in gateways { gateway.kill(SIGKILL) }
            proxy.stop()
        }

        /// Gateway `index`'s open live streams (its metrics' `kvsync_gateway_live_streams`), or 0 when
        /// it does not answer (killed, or drained and gone).
        func liveStreams(_ index: Int) async -> Int {
            let base = metrics[index]
            guard let answer = try? await offPool({ try RawHTTP.exchange(base, RawHTTP.head("GET /metrics", headers: [], length: nil), timeout: 5) }) else { return 0 }
            let line = answer.text.split(separator: "\n").first { $0.hasPrefix("kvsync_gateway_live_streams ") }
            return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
        }

        /// Every gateway's open live streams, in order.
        func liveStreams() async -> [Int] {
            var counts: [Int] = []
            for index in gateways.indices { counts.append(await liveStreams(index)) }
            return counts
        }

        func token(_ group: String, device: String) async throws -> String {
            try await issueToken(cluster, ["--group", group, "--device", device])
        }
    }

    /// A device that stays live through `url` (``Replicator/run(until:)``), polling only every 10
    /// minutes: whatever reaches it within a test came by its live stream. Counts the changes each
    /// pull applied, and keeps every failure the app was told of.
    final class LiveDevice: @unchecked Sendable {
        let device: Device
        let applied = Locked(0)
        let failures = Locked<[String]>([])
        let resyncs = Locked(0)
        var task: Task<Void, any Error>!

        init(group: String, url: String, token: String) throws {
            device = try Device(group: group)
            var options = Replicator.Options()
            options.pollInterval = .seconds(600)
            let (applied, failures, resyncs) = (applied, failures, resyncs)
            let replicator = try Replicator(container: device.container, gateway: SyncGatewayURL(url), token: token,
                                            targets: device.targets, options: options) { event in
                switch event {
                case .applied(_, let changes): applied.withLock { $0 += changes }
                case .failed(let line): failures.withLock { $0.append(line) }
                case .resynchronized: resyncs.withLock { $0 += 1 }
                default: break
                }
            }
            task = Task { try await replicator.run(until: ContinuousClock.now + .seconds(300)) }
        }

        deinit { task.cancel() }

        func has(_ key: String) -> Bool { (try? device.notes.get(key)) != nil }
        var count: Int { (try? device.notes.entries().count) ?? -1 }
    }

    /// A device that pushes `keys` through `url` when asked, retrying a round that failed (its
    /// connection may have been to the gateway just killed: the test's own, not a device's, error).
    final class Writer: @unchecked Sendable {
        let device: Device
        let replicator: Replicator

        init(group: String, url: String, token: String) throws {
            device = try Device(group: group)
            replicator = try Replicator(container: device.container, gateway: SyncGatewayURL(url), token: token, targets: device.targets)
        }

        func push(_ keys: [String]) async throws -> Bool {
            for key in keys { try device.put("value of \(key)", key) }
            return await eventuallyAsync(30) { [replicator] in (try? await replicator.sync()) != nil }
        }
    }

    static func group(_ name: String) -> String { "group.com.example.fleet.\(name)" }

    /// A push through gateway A reaches a device following gateway B through its live stream (its
    /// poll is 10 minutes away), within a second on an idle machine; then revoking the credential that
    /// follows both gateways closes its stream on each.
    @Test func aPushThroughOneGatewayReachesAStreamOnAnotherAndARevocationClosesStreamsOnEvery() async throws {
        let fleet = try await Fleet(2)
        let group = Self.group("cross")
        let writer = try Writer(group: group, url: fleet.proxy.onlyURL(0), token: try await fleet.token(group, device: "writer"))
        let reader = try LiveDevice(group: group, url: fleet.proxy.onlyURL(1), token: try await fleet.token(group, device: "reader"))
        // (What was last seen goes in the message: it failed once, at load 5 – 6, without saying why.)
        let seen = Locked<[Int]>([])
        #expect(await eventuallyAsync(30) {
            let counts = await fleet.liveStreams()
            seen.withLock { $0 = counts }
            return counts == [0, 1]
        }, "the reader's stream is not on gateway B alone: live streams \(seen.withLock { $0 }), the reader's failures \(reader.failures.withLock { $0 })")
        // The reader's first round is over once it has a key pushed after its stream opened.
        #expect(try await writer.push(["seed"]))
        #expect(await eventuallyAsync(30) { reader.has("seed") })
        // Timed from before the writer's round (its push, then its pull), which the reader may beat.
        let pushed = ContinuousClock.now
        #expect(try await writer.push(["cross"]))
        #expect(await eventuallyAsync(30) { reader.has("cross") && reader.applied.withLock { $0 } >= 2 }, "a push through gateway A did not reach the stream on gateway B")
        print("[fleet] a push through gateway A reached a device streaming from gateway B within \(ContinuousClock.now - pushed) of the push's start")
        #expect(reader.applied.withLock { $0 } == 2 && reader.failures.withLock { $0.isEmpty })

        // One credential following both gateways, revoked: both streams close.
        let token = try await fleet.token(group, device: "stolen")
        let followers = try (0..<2).map { try GatewayLiveTests.LiveFollower(fleet.proxy.onlyURL($0), token: token, group: group) }
        #expect(await eventuallyAsync(30) { followers.allSatisfy { $0.count == 1 } })
        let revoked = ContinuousClock.now
        #expect(try await SyncTokens.revoke(on: fleet.cluster.tcpURL, device: "stolen", group: group) == 1)
        for (index, follower) in followers.enumerated() {
            let ended = try #require(await outcome(of: follower.task, within: BuildScale.seconds(30)), "the revoked stream on gateway \(index) stayed open")
            #expect(ended as? ReplicationError == .credentialRefused("the credential was revoked"), "\(String(describing: ended))")
        }
        print("[fleet] a revoked credential's streams on both gateways closed \(ContinuousClock.now - revoked) after the revocation")
        reader.task.cancel()
    }

    /// Four devices follow the shared address of three gateways. `kill -9` of the gateway holding most
    /// of their streams: they resume on the others from their cursors, every change applied exactly
    /// once, with no resync. Then a drain (SIGTERM) of the gateway holding most of what is left: its
    /// devices move to the last one, and no failure reaches the app.
    @Test func devicesResumeOnAnotherGatewayExactlyOnceAfterKillAndDrainWithoutAnError() async throws {
        let fleet = try await Fleet(3)
        let group = Self.group("move")
        let writer = try Writer(group: group, url: fleet.proxy.url, token: try await fleet.token(group, device: "writer"))
        var started: [LiveDevice] = []
        for index in 0..<4 {
            started.append(try LiveDevice(group: group, url: fleet.proxy.url, token: try await fleet.token(group, device: "reader-\(index)")))
        }
        let readers = started
        #expect(await eventuallyAsync(30) { await fleet.liveStreams().reduce(0, +) == 4 })
        var pushed = 0
        /// Pushes `count` keys, then waits until every reader has all of them, each applied once.
        func round(_ name: String, _ count: Int) async throws -> Duration {
            let keys = (0..<count).map { "\(name)-\($0)" }
            let begun = ContinuousClock.now
            #expect(try await writer.push(keys), "the writer could not push through the fleet")
            pushed += count
            let total = pushed
            // The keys show at the apply's commit, and its `.applied` event comes after: both awaited
            // (a full run once read the count of a device whose event had not come yet).
            #expect(await eventuallyAsync(30) { readers.allSatisfy { $0.count == total && $0.applied.withLock { $0 } >= total } },
                    "\(name): not every device has every key")
            let took = ContinuousClock.now - begun
            for (index, reader) in readers.enumerated() {
                #expect(reader.applied.withLock { $0 } == total, "\(name): reader \(index) applied \(reader.applied.withLock { $0 }) changes of \(total)")
                #expect(reader.resyncs.withLock { $0 } == 0, "\(name): reader \(index) resynchronized instead of resuming from its cursor")
            }
            return took
        }
        _ = try await round("before", 5)

        let streams = await fleet.liveStreams()
        let killed = try #require(streams.indices.max { streams[$0] < streams[$1] })
        fleet.gateways[killed].kill(SIGKILL)
        let killedAt = ContinuousClock.now
        let afterKill = try await round("after-kill", 5)
        print("[fleet] kill -9 of the gateway holding \(streams[killed]) of 4 streams: a push after it reached every device \(ContinuousClock.now - killedAt) after the kill (\(afterKill) after the push started)")
        #expect(await eventuallyAsync(30) { await fleet.liveStreams().reduce(0, +) == 4 }, "the streams did not reopen on the gateways left")

        let left = await fleet.liveStreams()
        let drained = try #require(left.indices.filter { $0 != killed }.max { left[$0] < left[$1] })
        for reader in readers { reader.failures.withLock { $0 = [] } }
        fleet.gateways[drained].kill(SIGTERM)
        let drainedAt = ContinuousClock.now
        let afterDrain = try await round("after-drain", 5)
        print("[fleet] drain of the gateway holding \(left[drained]) of 4 streams: a push after it reached every device \(ContinuousClock.now - drainedAt) after SIGTERM (\(afterDrain) after the push started)")
        let exited = try await offPool { fleet.gateways[drained].wait(timeout: 30) }
        #expect(exited.status == 0 && !fleet.gateways[drained].timedOut, "the drained gateway did not exit cleanly: \(exited.stderr)")
        let last = try #require(fleet.gateways.indices.first { $0 != killed && $0 != drained })
        #expect(await eventuallyAsync(30) { await fleet.liveStreams(last) == 4 }, "the devices did not all move to the last gateway")
        for (index, reader) in readers.enumerated() {
            #expect(reader.failures.withLock { $0 }.isEmpty, "the drain reached reader \(index)'s app as \(reader.failures.withLock { $0 })")
        }
        _ = try await round("last", 3)
        for reader in readers { reader.task.cancel() }
    }
}
#endif
