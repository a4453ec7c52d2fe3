#if PostgreSQL
import Crypto
import Foundation
import KVStore
import Logging
import SyncGateway
import SyncKit
@testable import SyncKitPostgres
import SyncWire
@testable import PostgresTesting
import TestSupport
import SyncTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Live streams, two gateways on one database, revocation, caps, pipelined pushes, pages and resyncs
/// through a sync gateway: real PostgreSQL clusters, real `kvtool sync gateway` processes and real
/// devices. Split from ``GatewayTests`` so that the two serialized suites run side by side (a test run
/// lasts as long as its longest suite: GatewayTests alone took 367 s of `make test`, 664 s under the
/// thread sanitizer).
@Suite(.serialized) struct GatewayLiveTests {
    static func group(_ name: String) -> String { GatewayTests.group(name) }

    /// `kvtool sync gateway` as the cluster's gateway login; the process and its URL.
    static func startGateway(_ cluster: LocalPostgresCluster, port: Int = 0, extra: [String] = []) async throws -> (BackgroundProcess, String) {
        try await GatewayTests.startGateway(cluster, port: port, extra: extra)
    }

    /// `kvtool sync token issue … ARGS`: the token it printed.
    static func issue(_ cluster: LocalPostgresCluster, _ arguments: [String]) async throws -> String {
        try await GatewayTests.issue(cluster, arguments)
    }

    /// Follows `/v1/live` as a device of `group` with `token` in a task of its own; counts the wake-ups.
    final class LiveFollower: @unchecked Sendable {
        let wakeups = Locked(0)
        /// Why the stream ended, once it did (for a test's message).
        let ended = Locked<String?>(nil)
        var task: Task<(any Error)?, Never>!

        init(_ url: String, token: String, group: String) throws {
            let connection = try GatewayConnection(url: SyncGatewayURL(url), token: token, group: group, maxValueBytes: 1 << 20,
                                                   operationTimeout: .seconds(30), connectTimeout: .seconds(10))
            task = Task { [wakeups, ended] in
                do {
                    try await connection.live { wakeups.withLock { $0 += 1 } }
                    ended.withLock { $0 = "it ended without an error" }
                    return nil
                } catch {
                    ended.withLock { $0 = "\(error)" }
                    return error
                }
            }
        }

        var count: Int { wakeups.withLock { $0 } }
    }

    /// Two gateways on one database: a device live on one sees the commits a device of its group makes
    /// through the other, and not those of another group.
    @Test func twoGatewaysOnOneDatabaseFanOutCommitsToTheirGroupsLiveDevices() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("live"), other = Self.group("live-other")
        let (first, firstURL) = try await Self.startGateway(cluster)
        defer { first.kill(SIGKILL) }
        let (second, secondURL) = try await Self.startGateway(cluster)
        defer { second.kill(SIGKILL) }
        let token = try await Self.issue(cluster, ["--group", group])
        let otherToken = try await Self.issue(cluster, ["--group", other])
        let follower = try LiveFollower(firstURL, token: token, group: group)
        // The stream opened (its hello wakes the device once).
        #expect(await eventuallyAsync(30) { follower.count == 1 })
        let writer = try Device(group: other)
        try writer.put("another group's", "k")
        #expect(try await writer.kvtoolOffPool(["sync", "run", "--once", "--server", secondURL, "--token", otherToken]).status == 0)
        try await Task.sleep(for: .milliseconds(500))
        #expect(follower.count == 1, "another group's commit woke this group's device")
        let mine = try Device(group: group)
        try mine.put("through the second gateway", "k")
        let started = ContinuousClock.now
        #expect(try await mine.kvtoolOffPool(["sync", "run", "--once", "--server", secondURL, "--token", token]).status == 0)
        #expect(await eventuallyAsync(30) { follower.count == 2 })
        print("[gateway] a commit through the second gateway reached the first one's live device \(ContinuousClock.now - started) after the pushing process started")

        // A replicator that stays live through a gateway is woken by the stream, not by its poll.
        let reader = try Device(group: group)
        var options = Replicator.Options()
        options.pollInterval = .seconds(600)
        let replicator = try Replicator(container: reader.container, gateway: SyncGatewayURL(firstURL),
                                        token: try await Self.issue(cluster, ["--group", group]), targets: reader.targets, options: options)
        let live = Task { try await replicator.run(until: ContinuousClock.now + .seconds(60)) }
        #expect(await eventuallyAsync(30) { (try? reader.notes.get("k")) == "through the second gateway" })
        try mine.put("later", "k")
        #expect(try await mine.kvtoolOffPool(["sync", "run", "--once", "--server", secondURL, "--token", token]).status == 0)
        #expect(await eventuallyAsync(30) { (try? reader.notes.get("k")) == "later" })
        live.cancel()
        _ = try? await live.value
        follower.task.cancel()
    }

    @Test func aRevokedCredentialsLiveStreamClosesWithinFiveSeconds() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("revoke-live")
        let (gateway, url) = try await Self.startGateway(cluster)
        defer { gateway.kill(SIGKILL) }
        let token = try await Self.issue(cluster, ["--group", group, "--device", "stolen"])
        let follower = try LiveFollower(url, token: token, group: group)
        #expect(await eventuallyAsync(30) { follower.count == 1 })
        let revoked = ContinuousClock.now
        #expect(try await SyncTokens.revoke(on: cluster.tcpURL, device: "stolen", group: group) == 1)
        let ended = try #require(await outcome(of: follower.task, within: BuildScale.seconds(30)), "the revoked credential's stream stayed open")
        let took = ContinuousClock.now - revoked
        // Within 5 s (scaled under a sanitizer, whose build is several times slower).
        #expect(took < .seconds(BuildScale.seconds(5)), "\(took)")
        #expect(ended as? ReplicationError == .credentialRefused("the credential was revoked"), "\(String(describing: ended))")
        print("[gateway] a revoked credential's live stream closed \(took) after the revocation")
        // And it cannot open another.
        let again = try LiveFollower(url, token: token, group: group)
        let refused = try #require(await outcome(of: again.task, within: BuildScale.seconds(30)), "a revoked credential opened a stream")
        #expect(refused as? ReplicationError == .credentialRefused("the credential was revoked"), "\(String(describing: refused))")
    }

    @Test func sigtermClosesLiveStreamsCleanlyAndTheGatewayExits() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("drain-live")
        let (gateway, url) = try await Self.startGateway(cluster)
        let token = try await Self.issue(cluster, ["--group", group])
        let followers = try (0..<3).map { _ in try LiveFollower(url, token: token, group: group) }
        #expect(await eventuallyAsync(30) { followers.allSatisfy { $0.count == 1 } })
        gateway.kill(SIGTERM)
        for follower in followers {
            let ended = try #require(await outcome(of: follower.task, within: BuildScale.seconds(30)), "a stream outlived the drain")
            #expect(ended == nil, "a stream ended with \(String(describing: ended)) instead of closing cleanly")
        }
        let exited = try await offPool { gateway.wait(timeout: 30) }
        #expect(!gateway.timedOut && exited.status == 0, "\(exited.stderr)")
    }
}

extension GatewayLiveTests {
    /// The direct path for trusted machines, over TLS: `sslmode=verify-full` with the server's CA, or
    /// `require`; the server here accepts TCP connections over TLS only (`hostssl`).
    @Test func directURLsWithSslmodeUseTLSAndVerifyFullChecksTheCertificate() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let pki = try await offPool { try TestPKI() }
        try cluster.stop()
        let data = cluster.dataDirectory
        for (from, to) in [(pki.serverCertificate, "server.crt"), (pki.serverKey, "server.key")] {
            try? FileManager.default.removeItem(atPath: data + "/" + to)
            try FileManager.default.copyItem(atPath: from, toPath: data + "/" + to)
            chmod(data + "/" + to, 0o600)
            if geteuid() == 0, let user = getpwnam("postgres") { chown(data + "/" + to, user.pointee.pw_uid, user.pointee.pw_gid) }
        }
        let hba = try String(contentsOfFile: data + "/pg_hba.conf", encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix("host ") ? "hostssl " + $0.dropFirst(5) : String($0) }.joined(separator: "\n")
        try hba.write(toFile: data + "/pg_hba.conf", atomically: false, encoding: .utf8)
        cluster.serverOptions = ["-c ssl=on"]
        try cluster.start()
        let group = Self.group("direct-tls")
        let device = try Device(group: group)
        try device.put("over tls", "k")
        let base = "postgres://kv@127.0.0.1:\(cluster.port)/kv"
        let verified = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", base + "?sslmode=verify-full&sslrootcert=\(pki.caCertificate)"])
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(try cluster.storedNotes(group: group).count == 1)
        try device.put("again", "k2")
        let required = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", base + "?sslmode=require"])
        #expect(required.status == 0, "\(required.stderr)")
        // In the clear, the server refuses (hostssl only); against another CA or the system's roots, the
        // device refuses the server.
        try device.put("not sent", "k3")
        let plain = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", base])
        #expect(plain.status == 74 && plain.stderr.contains("no encryption"), "\(plain.stderr)")
        let wrongCA = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", base + "?sslmode=verify-full&sslrootcert=\(pki.otherCACertificate)"])
        #expect(wrongCA.status == 74 && wrongCA.stderr.lowercased().contains("certificate"), "\(wrongCA.stderr)")
        let system = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", base + "?sslmode=verify-full"])
        #expect(system.status == 74 && system.stderr.lowercased().contains("certificate"), "\(system.stderr)")
        #expect(try cluster.storedNotes(group: group).count == 2)
        // The gateway reaches its database over TLS the same way, as its own login.
        try await SyncServerSetup.prepare(on: try ServerURL(base + "?sslmode=require"), gatewayLogin: LocalPostgresCluster.gatewayLogin)
        let gatewayLogin = "postgres://\(LocalPostgresCluster.gatewayLogin)@127.0.0.1:\(cluster.port)/kv"
        let gateway = try BackgroundProcess(productsDirectory() + "/kvtool", [
            "sync", "gateway", "--database", gatewayLogin + "?sslmode=verify-full&sslrootcert=\(pki.caCertificate)", "--listen", "127.0.0.1:0",
            "--metrics-listen", "127.0.0.1:0"])
        defer { gateway.kill(SIGKILL) }
        let line = try #require(try await offPool { gateway.waitForLine(timeout: 60) { GatewayReadyLine($0) != nil } }.flatMap(GatewayReadyLine.init))
        let token = try await kvtoolRun(["sync", "token", "issue", "--database", base + "?sslmode=require", "--group", group])
        #expect(token.status == 0, "\(token.stderr)")
        let through = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", line.url,
                                         "--token", token.stdout.trimmingCharacters(in: .newlines)])
        #expect(through.status == 0, "\(through.stderr)")
        #expect(try cluster.storedNotes(group: group).count == 3)
    }
}

extension GatewayLiveTests {
    /// What one client can make the gateway hold is bounded: connections, bodies (each, and all
    /// together), and live streams per credential.
    @Test func connectionsBodiesAndStreamsPerCredentialAreCapped() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("caps")
        let token = try await SyncTokens.issue(on: cluster.tcpURL, group: group).token
        var options = SyncGateway.Options()
        options.limits.maxConnections = 3
        options.limits.maxBodyBytes = 4_096
        options.limits.maxBufferedBytes = 2_048
        options.limits.maxStreamsPerCredential = 2
        let gateway = try SyncGateway(database: try await cluster.prepareForGateways(), options: options)
        let bound = Locked<String?>(nil)
        let running = Task { try await gateway.run(host: "127.0.0.1", port: 0) { url in bound.withLock { $0 = url } } }
        #expect(await eventuallyAsync(30) { bound.withLock { $0 } != nil })
        let url = try #require(bound.withLock { $0 })
        let auth = ["Authorization: Bearer \(token)", "KVSync-Group: \(group)"]
        // A body over the per-request limit, and one under it but over what all bodies may hold.
        // Every raw request goes off the cooperative pool: this gateway runs in the test process, and a
        // receive blocking one of the pool's two threads (2 cores) while other suites hold the other
        // starves the gateway it waits for (seen: no answer in 30 s, with the suites run side by side).
        let huge = try await offPool { try RawHTTP.request(url, "POST /v1/push", headers: auth, body: [UInt8](repeating: 0, count: 5_000)) }
        #expect(huge.status == 413 && huge.text.contains("over 4096 bytes"), "\(huge.text)")
        let busy = try await offPool { try RawHTTP.request(url, "POST /v1/push", headers: auth, body: [UInt8](repeating: 0, count: 3_000)) }
        #expect(busy.status == 503 && busy.text.contains("busy"), "\(busy.text)")
        // Two live streams for the credential; a third is refused (429), and the two still work.
        let followers = try (0..<2).map { _ in try LiveFollower(url, token: token, group: group) }
        #expect(await eventuallyAsync(30) { followers.allSatisfy { $0.count == 1 } })
        let third = try LiveFollower(url, token: token, group: group)
        let refused = try #require(await outcome(of: third.task, within: BuildScale.seconds(30)), "a third stream was accepted")
        // 429 with Retry-After 15, read through the one mapping of a gateway's status (as a request's is).
        #expect({ if case .rateLimited(.seconds(15), let budget?)? = refused as? ReplicationError { budget.hasPrefix("too many live streams for this credential") } else { false } }(),
                    "\(String(describing: refused))")
        // Three connections open (the two streams and one idle): a fourth is refused before its body.
        // An idle connection the gateway accepted while the refused follower's was still open (its close
        // reaches the gateway a little later, and on a loaded machine later still) was itself refused
        // for good, and the count drops to two once that close arrives: so while a request is still
        // admitted, the idle connection is opened anew.
        let idle = Locked<Int32>(try await offPool { try RawHTTP.connect(url) })
        defer { close(idle.withLock { $0 }) }
        let over = Locked<RawHTTP.Answer?>(nil)
        #expect(await eventuallyAsync(30) {
            let answer = try? await offPool { try RawHTTP.request(url, "GET /v1/hello", headers: auth) }
            over.withLock { $0 = answer }
            if answer?.status == 503 { return true }
            if let fresh = try? await offPool({ try RawHTTP.connect(url) }) { idle.withLock { close($0); $0 = fresh } }
            try? await Task.sleep(for: .milliseconds(100))   // (under the credential's rate limit)
            return false
        })
        let refusal = over.withLock { $0 }
        #expect(refusal?.status == 503 && refusal?.text.contains("too many connections (3)") == true, "\(refusal?.text ?? "no answer")")
        gateway.shutdown()
        for follower in followers { _ = await follower.task.value }
        try await running.value
    }
}

extension GatewayLiveTests {
    /// Past the gateway's cap on live streams (``SyncGateway/Limits/maxStreams``, `--max-streams`),
    /// another device's stream is refused with 503 and one line, before it is subscribed; the stream
    /// open goes on carrying its group's commits, and ends with the drain.
    @Test func liveStreamsPastTheGatewaysCapAreRefusedAndTheOpenOnesGoOn() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("stream-cap")
        let token = try await SyncTokens.issue(on: cluster.tcpURL, group: group, device: "first").token
        let other = try await SyncTokens.issue(on: cluster.tcpURL, group: group, device: "second").token
        var options = SyncGateway.Options()
        options.limits.maxStreams = 1
        let gateway = try SyncGateway(database: try await cluster.prepareForGateways(), options: options)
        let bound = Locked<String?>(nil)
        let running = Task { try await gateway.run(host: "127.0.0.1", port: 0) { url in bound.withLock { $0 = url } } }
        #expect(await eventuallyAsync(30) { bound.withLock { $0 } != nil })
        let url = try #require(bound.withLock { $0 })
        let follower = try LiveFollower(url, token: token, group: group)
        // (It failed once beside 93 other tests without saying why.)
        #expect(await eventuallyAsync(30) { follower.count == 1 }, "the stream did not open: \(follower.ended.withLock { $0 } ?? "still waiting")")
        let refused = try await offPool {
            try RawHTTP.request(url, "GET /v1/live", headers: ["Authorization: Bearer \(other)", "KVSync-Group: \(group)"])
        }
        #expect(refused.status == 503 && refused.text.contains("too many live streams (1)"), "\(refused.text)")
        // A commit's notification still reaches the open stream.
        _ = try await offPool { try cluster.psql("NOTIFY kvsync, '\(group)'") }
        #expect(await eventuallyAsync(30) { follower.count >= 2 })
        gateway.shutdown()
        _ = await follower.task.value
        try await running.value
    }
}

extension GatewayLiveTests {
    /// A push of many small batches, two in flight (through a gateway on connections of their own, so
    /// the server may apply them in either order), with conflicts spread among them: each change is in
    /// the log once, the later write of each conflicting key wins everywhere, and nothing stays pending.
    @Test(arguments: ["direct", "gateway"]) func aPipelinedPushWithConflictsAmongItsBatchesIsAppliedOnce(path: String) async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("pipelined-\(path)")
        let a = try Device(group: group), b = try Device(group: group)
        try b.write { tx in for index in 0..<10 { try b.notes.put("b early", forKey: "c\(index)", in: tx) } }
        usleep(5_000)
        // A's 1,000 keys, with the 20 contested ones spread through them (one every 50 keys).
        try a.write { tx in
            for index in 0..<1_000 {
                try a.notes.put("a\(index)", forKey: String(format: "k%04d", index), in: tx)
                if index % 50 == 25 { try a.notes.put("a", forKey: "c\(index / 50)", in: tx) }
            }
        }
        usleep(5_000)
        try b.write { tx in for index in 10..<20 { try b.notes.put("b late", forKey: "c\(index)", in: tx) } }
        var options = Replicator.Options()
        options.batchSize = 37
        let ra: Replicator, rb: Replicator
        var gateway: BackgroundProcess?
        if path == "gateway" {
            let (process, url) = try await Self.startGateway(cluster)
            gateway = process
            ra = try Replicator(container: a.container, gateway: SyncGatewayURL(url), token: try await Self.issue(cluster, ["--group", group]),
                                targets: a.targets, options: options)
            rb = try Replicator(container: b.container, gateway: SyncGatewayURL(url), token: try await Self.issue(cluster, ["--group", group]),
                                targets: b.targets)
        } else {
            ra = try a.replicator(cluster.tcpURL, options: options)
            rb = try b.replicator(cluster.tcpURL)
        }
        defer { gateway?.kill(SIGKILL) }
        try await rb.sync()
        let pushed = try await ra.push()
        #expect(pushed.conflicts == 20, "\(pushed)")
        try await ra.sync()
        try await rb.sync()
        for index in 0..<20 { #expect(try a.notes.get("c\(index)") == (index < 10 ? "a" : "b late"), "c\(index)") }
        #expect(try a.notes.count() == 1_020)
        #expect(try a.storedNotes() == b.storedNotes())
        // (psql off the cooperative pool, as every blocking step here.)
        let device = ra.device
        let (serverNotes, twice, fromA) = try await offPool {
            (try cluster.storedNotes(group: group),
             try cluster.count("""
                SELECT count(*) FROM (SELECT device, token FROM kvsync_changes WHERE group_id = '\(group)'
                                      GROUP BY device, token HAVING count(*) > 1) AS twice
                """),
             try cluster.count("SELECT count(*) FROM kvsync_changes WHERE group_id = '\(group)' AND device = '\(device)'"))
        }
        #expect(try a.storedNotes() == serverNotes)
        #expect(try a.status().pendingChanges == 0 && b.status().pendingChanges == 0)
        #expect(twice == 0)
        // A's 1,000 keys once each, its 10 winning keys once more (sent again after the conflict).
        #expect(fromA == 1_010)
        await ra.close(); await rb.close()
    }

    /// A push batch ends at `maxBatchBytes` of keys and values as well as at `batchSize` changes: large
    /// values go in several server transactions (the `xmin` of their rows), and a value
    /// larger than the cap goes alone.
    @Test func aPushBatchEndsAtItsByteCap() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("byte-cap")
        let a = try Device(group: group)
        try a.write { tx in
            for index in 0..<20 { try a.notes.put(String(repeating: "v", count: 3_000), forKey: String(format: "k%02d", index), in: tx) }
            try a.notes.put(String(repeating: "w", count: 30_000), forKey: "large", in: tx)
        }
        var options = Replicator.Options()
        options.maxBatchBytes = 10_000
        let replicator = try a.replicator(cluster.tcpURL, options: options)
        let pushed = try await replicator.push()
        #expect(pushed.pushed == 21, "\(pushed)")
        let (rows, transactions, largeAlone) = try await offPool {
            (try cluster.count("SELECT count(*) FROM kvsync_changes WHERE group_id = '\(group)'"),
             try cluster.count("SELECT count(DISTINCT xmin::text) FROM kvsync_changes WHERE group_id = '\(group)'"),
             try cluster.count("""
                SELECT count(*) FROM kvsync_changes c JOIN kvsync_changes l ON l.xmin::text = c.xmin::text
                WHERE c.group_id = '\(group)' AND l.group_id = '\(group)' AND l.key = 'large'::bytea
                """))
        }
        #expect(rows == 21)
        // Four values of about 3,000 bytes reach the cap: 20 values in 5 batches, and the large one alone.
        #expect(transactions == 6, "\(transactions)")
        #expect(largeAlone == 1)
        #expect(try a.status().pendingChanges == 0)
        await replicator.close()
    }

    /// A page of the log stops at 32 MiB of keys and values (its first change whatever its size), and
    /// the bound is applied in the statement, on both paths: a group of large values is pulled a page at
    /// a time, never read whole into the device's or the gateway's memory.
    @Test(arguments: ["direct", "gateway"]) func aPageOfLargeValuesStopsAtItsByteBound(path: String) async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("large-page-\(path)")
        let a = try Device(group: group)
        // Five values of 10 MiB (each goes in a push batch of its own: over the 8 MiB batch cap).
        try a.write { tx in
            for index in 0..<5 { try a.notes.put(String(repeating: "\(index)", count: 10 << 20), forKey: "k\(index)", in: tx) }
        }
        let ra = try a.replicator(cluster.tcpURL)
        #expect(try await ra.push().pushed == 5)
        await ra.close()
        var gateway: BackgroundProcess?
        defer { gateway?.kill(SIGKILL) }
        let server: any ReplicationServer
        if path == "gateway" {
            let (process, url) = try await Self.startGateway(cluster)
            gateway = process
            server = try GatewayConnection(url: SyncGatewayURL(url), token: try await Self.issue(cluster, ["--group", group]), group: group,
                                           maxValueBytes: 16 << 20, operationTimeout: .seconds(60), connectTimeout: .seconds(10))
        } else {
            server = try await ServerConnection.connect(cluster.tcpURL, logger: Logger(label: "test"), maxValueBytes: 16 << 20)
        }
        // Three values make 30 MiB and their keys; a fourth would pass 32 MiB.
        let first = try await server.changes(group: group, after: 0, limit: 1_000)
        #expect(first.changes.count == 3, "\(first.changes.count)")
        let second = try await server.changes(group: group, after: first.changes.last?.sequence ?? 0, limit: 1_000)
        #expect(second.changes.count == 2, "\(second.changes.count)")
        #expect(Set((first.changes + second.changes).map { String(decoding: $0.key, as: UTF8.self) }) == ["k0", "k1", "k2", "k3", "k4"])
        await server.close()
        // And a device pulls them all, a page at a time.
        let b = try Device(group: group)
        let rb = try b.replicator(cluster.tcpURL)
        try await rb.sync()
        #expect(try b.notes.count() == 5)
        #expect(try b.notes.get("k4")?.utf8.count == 10 << 20)
        await rb.close()
    }

    /// A push cancelled mid-way returns only once its collecting thread and its batches have ended
    /// (the container may be closed right after); what it sent is answered `duplicate` the next time,
    /// and every change reaches the log once.
    @Test func aCancelledPushEndsItsCollectingThreadAndLosesNothing() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("cancelled")
        var a: Device? = try Device(group: group)
        let count = 20_000
        do {
            let writer = a!
            try await offPool { try writer.write { tx in for index in 0..<count { try writer.notes.put("v\(index)", forKey: String(format: "k%05d", index), in: tx) } } }
        }
        let root = a!.directory
        var options = Replicator.Options()
        options.batchSize = 100
        do {
            let replicator = try a!.replicator(cluster.tcpURL, options: options)
            let push = Task { try await replicator.push() }
            #expect(await eventuallyAsync(60) { ((try? await offPool { try cluster.count("SELECT count(*) FROM kvsync_changes") }) ?? 0) > 0 })
            push.cancel()
            let outcome = await push.result
            let before = try await offPool { try cluster.count("SELECT count(*) FROM kvsync_changes") }
            print("[gateway] a push cancelled after \(before) of \(count) changes: \(outcome)")
            await replicator.close()
        }
        // Closed and opened again right away: nothing of the cancelled push still reads it.
        let reopened = try SharedContainer(groupIdentifier: group, root: root.path)
        a = nil
        let notes = try reopened.store.collection("notes", key: String.self, value: String.self)
        let settings = try reopened.defaults(suite: "settings")
        let again = try Replicator(container: reopened, server: cluster.tcpURL, targets: [.collection(notes), .defaults(settings)], options: options)
        try await again.sync()
        #expect(try Replication.status(of: reopened).pendingChanges == 0)
        let (total, twice) = try await offPool {
            (try cluster.count("SELECT count(*) FROM kvsync_changes WHERE group_id = '\(group)'"),
             try cluster.count("""
                SELECT count(*) FROM (SELECT device, token FROM kvsync_changes WHERE group_id = '\(group)'
                                      GROUP BY device, token HAVING count(*) > 1) AS twice
                """))
        }
        #expect(total == count)
        #expect(twice == 0)
        await again.close()
        _ = root
    }

    /// What the direct path does works the same through the gateway: deletes (tombstones), a resync
    /// after the owner pruned past a device's cursor, and the clock bound (`kvtool` exits 75).
    @Test func deletesResyncsAndTheClockBoundWorkThroughTheGateway() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("same")
        let (gateway, url) = try await Self.startGateway(cluster)
        defer { gateway.kill(SIGKILL) }
        let token = try await Self.issue(cluster, ["--group", group])
        let tokenB = try await Self.issue(cluster, ["--group", group])
        let gatewayURL = try SyncGatewayURL(url)
        let a = try Device(group: group), b = try Device(group: group)
        // (In a block: a replicator holds its container until it is gone, and kvtool needs it below.)
        do {
            let resynced = Locked(false)
            let ra = try Replicator(container: a.container, gateway: gatewayURL, token: token, targets: a.targets)
            let rb = try Replicator(container: b.container, gateway: gatewayURL, token: tokenB, targets: b.targets) { event in
                if case .resynchronized = event { resynced.withLock { $0 = true } }
            }
            // (The owner's prune runs on the direct path, from a machine of its own.)
            try await expectResyncAfterAPruneThatPassedACursor(cluster, group: group, a: a, ra, b: b, rb, resynced: resynced) {
                let machine = try Device(group: group)
                let owner = try machine.replicator(cluster.tcpURL)
                let horizon = try await owner.pruneServer(olderThan: .zero)
                await owner.close()
                return horizon
            }
            await ra.close(); await rb.close()
        }

        // A clock a day ahead: the gateway's database refuses the push, the device exits 75 and keeps it.
        try ReplicationSkewTests.moveClock(of: a, ahead: 86_400)
        try a.put("from tomorrow", "tomorrow")
        let refused = try await a.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token", token])
        #expect(refused.status == 75 && refused.stderr.contains("ahead of the server's"), "\(refused.stderr)")
        #expect(try a.status().pendingChanges == 1)
        #expect(try cluster.count("SELECT count(*) FROM kvsync_changes WHERE key = convert_to('tomorrow', 'UTF8')") == 0)
    }
}
#endif
