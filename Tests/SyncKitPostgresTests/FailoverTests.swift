#if PostgreSQL
import Foundation
import KVStore
import Logging
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

/// The primary fails over (issue 51, part 6): a primary and its synchronous standby, a sync gateway and a
/// direct device given both hosts with `target_session_attrs=read-write`; `kill -9` of the primary's
/// postmaster, then `pg_ctl promote` of the standby. Real clusters, a real `kvtool sync gateway`
/// process, real devices.
@Suite(.serialized, .oneServerFleetAtATime) struct FailoverTests {
    static let group = "group.com.example.failover"

    /// A device that writes a key of its own and syncs, again and again, until stopped, and keeps what
    /// each round said: which of its writes the server acknowledged, what it pulled, its cursors.
    final class Writer: @unchecked Sendable {
        struct Record {
            /// Its keys up to this one are acknowledged (a round that pushed them succeeded).
            var acknowledged = -1
            var written = -1
            var pulled = 0
            var cursors: [Int64] = []
            /// When each successful round ended.
            var successes: [ContinuousClock.Instant] = []
            var failures = 0
            var lastError = ""
            /// Each failed round: when it began and ended, and its error (what a slow failover waited on).
            var failed: [(began: ContinuousClock.Instant, ended: ContinuousClock.Instant, error: String)] = []
        }

        let name: String
        let device: Device
        let replicator: Replicator
        let record = Locked(Record())
        let events = Locked<[SyncEvent]>([])
        private let stopping = Locked(false)
        private var task: Task<Void, Never>?

        init(_ name: String, device: Device, replicator: (Device, @escaping @Sendable (SyncEvent) -> Void) throws -> Replicator) throws {
            self.name = name
            self.device = device
            let events = self.events
            self.replicator = try replicator(device) { event in events.withLock { $0.append(event) } }
        }

        func start() {
            task = Task { [self] in
                var index = 0
                while !stopping.withLock({ $0 }) {
                    do {
                        try device.put("\(index)", "\(name)-\(index)")
                        record.withLock { $0.written = index }
                    } catch {
                        record.withLock { $0.lastError = "the write failed: \(error)" }
                    }
                    await round(acknowledging: index)
                    index += 1
                    try? await Task.sleep(for: .milliseconds(20))
                }
            }
        }

        /// One round; its report kept.
        func round(acknowledging index: Int? = nil) async {
            let began = ContinuousClock.now
            do {
                let report = try await replicator.sync()
                record.withLock {
                    if let index { $0.acknowledged = index }
                    $0.pulled += report.pulled
                    $0.cursors.append(report.cursor)
                    $0.successes.append(.now)
                }
            } catch {
                record.withLock {
                    $0.failures += 1
                    $0.lastError = "\(error)"
                    $0.failed.append((began, .now, "\(error)"))
                }
            }
        }

        func stop() async {
            stopping.withLock { $0 = true }
            await task?.value
        }

        var acknowledged: Int { record.withLock { $0.acknowledged } }

        /// The first round to succeed after `instant`.
        func firstSuccess(after instant: ContinuousClock.Instant) -> ContinuousClock.Instant? {
            record.withLock { $0.successes.first { $0 > instant } }
        }
    }

    /// libpq's choice (`psql URL`, the port of the server it connected to) and ours
    /// (``ServerURL/connectChoosing(id:logger:timeout:)``), or `refused` for both, for each URL.
    static func expectSameChoiceAsPsql(_ urls: [String]) async throws {
        for text in urls {
            let result = try await offPool {
                try run("/usr/bin/psql", ["-X", "-A", "-t", "-c", "SELECT current_setting('port')", text],
                        environment: ["PGCONNECT_TIMEOUT": "5"], timeout: 30)
            }
            let theirs = result.status == 0 ? result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) : "refused"
            var ours = "refused"
            var why = ""
            do {
                let (connection, endpoint) = try await ServerURL(text).connectChoosing(id: 1, logger: Logger(label: "failover"), timeout: .seconds(5))
                try? await connection.close()
                ours = switch endpoint {
                case .tcp(_, let port): "\(port)"
                case .unixSocket(let path): String(path.split(separator: ".").last ?? "")
                }
            } catch {
                why = "\(error)"
            }
            #expect(ours == theirs, "\(text): psql chose \(theirs) (\(result.stderr.prefix(200))), we chose \(ours) \(why)")
            if ours == "refused" { #expect(!why.contains("\n"), "\(why)") }
        }
    }

    @Test func aKilledPrimarysPromotedStandbyIsFoundWithinFiveSecondsAndNothingAcknowledgedIsLost() async throws {
        let primary = try await offPool { try LocalPostgresCluster() }
        let standby = try await offPool { try LocalPostgresCluster(standbyOf: primary, synchronous: true) }
        let gatewayLogin = try await primary.prepareForGateways()
        let (p, s) = (primary.port, standby.port)

        // The host list as libpq reads it, differentially: psql and we connect to the same server.
        let base = "postgresql://kv@127.0.0.1"
        try await Self.expectSameChoiceAsPsql([
            "\(base):\(s),127.0.0.1:\(p)/kv?target_session_attrs=read-write",
            "\(base):\(s),127.0.0.1:\(p)/kv?target_session_attrs=primary",
            "\(base):\(s),127.0.0.1:\(p)/kv",
            "\(base):\(s),127.0.0.1:\(p)/kv?target_session_attrs=any",
            "\(base):\(p),127.0.0.1:\(s)/kv?target_session_attrs=standby",
            "\(base):\(p),127.0.0.1:\(s)/kv?target_session_attrs=read-only",
            "\(base):\(p),127.0.0.1:\(s)/kv?target_session_attrs=prefer-standby",
            "\(base):\(p)/kv?target_session_attrs=prefer-standby",
            "\(base):\(p)/kv?target_session_attrs=standby",
            "\(base):1,127.0.0.1:\(p)/kv",
            "\(base):1/kv?port=\(p)",
            "\(base),127.0.0.1:\(p)/kv?port=1,\(s)",
            "\(base),127.0.0.1/kv?port=1,2,\(p)",
            "\(base):1,127.0.0.1:\(s)/kv?target_session_attrs=read-write",
            "\(base):1,127.0.0.1:\(p)/kv?target_session_attrs=bogus",
            "\(base):\(p):1/kv",
            "\(base):x,127.0.0.1:\(p)/kv",
            "\(base):1,%2F\(primary.socketDirectory.dropFirst().replacingOccurrences(of: "/", with: "%2F")):\(p)/kv",
            "postgresql://kv@/kv?host=\(standby.socketDirectory),\(primary.socketDirectory)&port=\(s),\(p)&target_session_attrs=read-write",
        ])

        // The gateway and a direct device, given both hosts, the standby first: they keep the primary.
        let hosts: [ServerURL.Endpoint] = [.tcp(host: "127.0.0.1", port: p), .tcp(host: "127.0.0.1", port: s)]
        let direct = ServerURL(endpoints: hosts, targetSessionAttributes: .readWrite, user: primary.user, database: primary.database)
        let gatewayDatabase = ServerURL(endpoints: hosts, targetSessionAttributes: .readWrite, user: gatewayLogin.user, database: primary.database)
        let (gateway, gatewayURL) = try await startGateway(primary, database: gatewayDatabase)
        defer { gateway.kill(SIGKILL) }
        let token = try await issueToken(primary, ["--group", Self.group, "--device", "remote"])
        var options = Replicator.Options()
        options.connectTimeout = .seconds(5)
        options.maximumBackoff = .milliseconds(200)
        // A gateway request in flight at the kill was once seen to wait for the device's whole statement
        // timeout (120 s by default; postgres-nio does not always fail a statement whose connection
        // closed): bounded here, so that the test measures the failover, not that wait.
        options.statementTimeout = .seconds(10)
        let directWriter = try Writer("direct", device: try Device(group: Self.group)) { device, events in
            try device.replicator(direct, options: options, events: events)
        }
        let remoteWriter = try Writer("remote", device: try Device(group: Self.group)) { device, events in
            try Replicator(container: device.container, endpoint: .gateway(try SyncGatewayURL(gatewayURL), token: token),
                           targets: device.targets, options: options, events: events)
        }
        let writers = [directWriter, remoteWriter]
        let started = ContinuousClock.now
        for writer in writers { writer.start() }
        #expect(await eventuallyAsync(BuildScale.seconds(60)) { writers.allSatisfy { $0.acknowledged >= 10 } },
                "\(writers.map { $0.record.withLock { $0.lastError } })")

        print("[failover] \(writers.map { "\($0.name) \($0.acknowledged + 1)" }.joined(separator: ", ")) writes acknowledged in \(ContinuousClock.now - started) before the kill")
        // kill -9 of the primary's postmaster; what was acknowledged by then must survive.
        let pid = try #require(primary.serverProcessID)
        #expect(kill(pid, SIGKILL) == 0)
        let killed = ContinuousClock.now
        let acknowledged = writers.map(\.acknowledged)
        try await offPool { try standby.promote() }
        let promoted = ContinuousClock.now
        // The gateway found the new primary: /readyz (a transaction through its pool) answers 200.
        let metrics = try #require(gatewayMetricsBase(gateway))
        #expect(await eventuallyAsync(BuildScale.seconds(60)) { (try? await GatewayOperationsTests.get(metrics, "/readyz").status) == 200 })
        let ready = ContinuousClock.now - promoted
        print("[failover] the gateway was ready again \(ready) after the promotion returned")
        #expect(ready < .seconds(BuildScale.seconds(5)), "\(ready)")
        for writer in writers {
            #expect(await eventuallyAsync(BuildScale.seconds(60)) { writer.firstSuccess(after: promoted) != nil },
                    "\(writer.name) never pushed again: \(writer.record.withLock { $0.lastError })")
            if let again = writer.firstSuccess(after: promoted) {
                print("[failover] the \(writer.name) device pushed again \(again - promoted) after the promotion returned (\(again - killed) after the kill, the promotion took \(promoted - killed))")
                // The direct device's own connection finds the primary; the gateway's device is bounded by
                // the gateway's readiness, above (and by a request that may hang, see statementTimeout).
                if writer === directWriter { #expect(again - promoted < .seconds(BuildScale.seconds(5)), "\(writer.name): \(again - promoted)") }
            }
        }
        if writers.contains(where: { $0.firstSuccess(after: promoted) == nil }) {
            gateway.kill(SIGTERM)
            print("[failover] the gateway said: \(try await offPool { gateway.wait(timeout: 30) }.stderr.suffix(4_000))")
        }
        // The gateway's LISTEN moved too: a device live on the gateway is woken by the direct device's push.
        let follower = try GatewayLiveTests.LiveFollower(gatewayURL, token: token, group: Self.group)
        #expect(await eventuallyAsync(BuildScale.seconds(30)) { follower.count >= 1 })
        let woken = follower.count
        let wakeStarted = ContinuousClock.now
        let moved = await eventuallyAsync(BuildScale.seconds(30)) { follower.count > woken }
        #expect(moved, "a push on the new primary did not wake the gateway's live device (its LISTEN did not move)")
        if moved { print("[failover] a device live on the gateway was woken \(ContinuousClock.now - wakeStarted) after it opened, by a push on the new primary") }
        follower.task.cancel()
        for writer in writers { await writer.stop() }

        // Every write acknowledged before the kill is on the new primary.
        for (writer, through) in zip(writers, acknowledged) where through >= 0 {
            let keys = (0...through).map { "'\(writer.name)-\($0)'" }.joined(separator: ",")
            let found = try await offPool {
                try standby.count("SELECT count(*) FROM kvsync_state WHERE group_id = '\(Self.group)' AND convert_from(key, 'UTF8') IN (\(keys))")
            }
            #expect(found == through + 1, "\(writer.name): \(found) of its \(through + 1) acknowledged writes are on the new primary")
        }
        // Both converge; each received every other device's change of the log once, its cursor never
        // going back, and never resynchronized.
        #expect(try await eventuallyAsync(BuildScale.seconds(60)) {
            for writer in writers { await writer.round() }
            let server = try await offPool { try standby.storedNotes(group: Self.group) }
            return try writers.allSatisfy { try $0.device.storedNotes() == server && $0.device.status().pendingChanges == 0 }
        }, "the devices did not converge")
        let logged = try await offPool {
            try standby.psql("SELECT device || '=' || count(*) FROM kvsync_changes WHERE group_id = '\(Self.group)' GROUP BY device")
        }
        var perDevice: [String: Int] = [:]
        for line in logged.split(separator: "\n") {
            let parts = line.split(separator: "=")
            perDevice[String(parts[0])] = Int(parts[1])
        }
        for writer in writers {
            let me = try #require(try writer.device.status().device)
            let record = writer.record.withLock { $0 }
            let others = perDevice.filter { $0.key != me }.values.reduce(0, +)
            #expect(perDevice[me] == record.written + 1, "\(writer.name): \(perDevice[me] ?? 0) rows in the log for \(record.written + 1) writes")
            // The container's own count (a round can apply a page of changes and then fail, so its
            // report never comes): a change received twice counts twice, one skipped not at all.
            let received = try writer.device.status().pulled
            #expect(received == others, "\(writer.name) received \(received) changes of the \(others) other devices' in the log")
            #expect(zip(record.cursors, record.cursors.dropFirst()).allSatisfy { $0 <= $1 }, "\(writer.name)'s cursor went back: \(record.cursors)")
            #expect(!writer.events.withLock { $0 }.contains { if case .resynchronized = $0 { true } else if case .serverChanged = $0 { true } else { false } })
            #expect(try await offPool { try writer.device.storedNotes() == standby.storedNotes(group: Self.group) })
            print("[failover] \(writer.name): \(record.written + 1) writes, \(record.acknowledged + 1) acknowledged, \(received) changes received (\(record.pulled) in rounds that succeeded), \(record.failures) failed rounds"
                  + record.failed.map { " [began \($0.began - killed) after the kill, took \($0.ended - $0.began): \($0.error.prefix(300))]" }.joined())
        }
        await directWriter.replicator.close()
        await remoteWriter.replicator.close()
    }
}
#endif
