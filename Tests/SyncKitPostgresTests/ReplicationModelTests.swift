#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
@testable import PostgresTesting
import SyncWire
import TestSupport
import SyncTestSupport
import Testing
import Workloads
#if canImport(Glibc)
import Glibc
#endif

/// A randomized model of replication with faults. Eight devices, each a container of its own whose
/// syncs are `kvtest-helper sync-device` processes with a clock of their own, behind a proxy of their
/// own; random puts and deletes of shared keys, syncs, `kill -9` of devices mid-sync, `pg_ctl stop -m
/// immediate` and restarts, partitions (black holes), and clocks skewed within the bound (±25 s) and,
/// for one device, beyond it (+2 h). Then everything heals, every device syncs until nothing moves,
/// and an independent checker verifies the outcome against what the test itself wrote:
///
/// - every row of the server's log is a write the test made (device, key, value and clock);
/// - the server's state is last-writer-wins by (clock, device) over that log;
/// - no write is lost: each device's last write of each key is on the server, or lost to a write
///   with a greater (clock, device);
/// - every device within the bound holds exactly the server's state, and has nothing pending or
///   quarantined;
/// - the device whose clock is 2 h ahead had every write refused (none is in the log), holds the
///   server's value of every key it never wrote, and its own of those it did.
///
/// The same model runs through a sync gateway (`path: "gateway"`): each device holds a credential of
/// its own and syncs through a proxy to one `kvtool sync gateway` process, and devices sync at the same
/// time (a sync is started and left running while the next operations go on). More faults there:
/// `kill -9` of the gateway and its restart, a partition that swallows a push's answer after the server
/// committed it, connections cut with RST; and a hostile device (a credential of the group, from an
/// address of its own) that pushes under honest devices' ids with their next tokens and asks for a
/// lifted clock bound, stamped 2 h ahead. The checker is the same: nothing of the hostile device may
/// reach the log, and no acknowledged write of an honest device may be lost.
///
/// `make test` runs 150 operations on each path; `make stress` 1,000. The seed is printed;
/// `KVSTORE_MODEL_SEED=N` replays a run (of either path).
@Suite(.serialized) struct ReplicationModelTests {
    struct Write {
        var device: Int
        var key: String
        var value: String?
        var clock: UInt64
    }

    final class ModelDevice {
        let index: Int
        let directory = TemporaryDirectory()
        let group: String
        let skew: TimeInterval
        let proxy: FaultProxy
        let container: SharedContainer
        let history: History
        let notes: KVCollection<String, String>
        var partitioned = false

        init(index: Int, group: String, skew: TimeInterval, proxy: FaultProxy) throws {
            self.index = index
            self.group = group
            self.skew = skew
            self.proxy = proxy
            container = try SharedContainer(groupIdentifier: group, root: directory.path)
            history = try History.attach(to: container)
            history.setWallClock { Date().addingTimeInterval(skew) }
            notes = try container.store.collection("notes", key: String.self, value: String.self)
            try Replication.enable(.collection("notes"), in: container)
        }

        /// Through a gateway: the credential's file.
        var tokenFile: String?
        /// Its sync started and not yet waited for (the gateway path's devices sync at the same time).
        var running: BackgroundProcess?

        var url: String { tokenFile == nil ? "postgres://kv@127.0.0.1:\(proxy.port)/kv" : "http://127.0.0.1:\(proxy.port)" }
        var arguments: [String] {
            ["sync-device", directory.path, group, url, "\(Int(skew * 1000))", "2000"] + (tokenFile.map { [$0] } ?? [])
        }

        /// The device id, once a replicator made it.
        func deviceID() throws -> String? { try Replication.status(of: container).device }

        /// The stamp history gave the test's last write of `key` (the clock may have moved since: a
        /// sync running at the same time applies other devices' changes).
        func stampOfLastWrite(_ key: String) throws -> UInt64 {
            let entries = try history.changes(since: .zero, matching: HistoryFilter(targets: [.collection("notes")]))
                .transactions?.flatMap(\.entries) ?? []
            return try #require(entries.last { $0.key == Array(key.utf8) && $0.author == "app" }?.clock).rawValue
        }
    }

    enum Path: String, CaseIterable, Sendable, CustomStringConvertible {
        case direct, gateway
        var description: String { rawValue }
    }

    @Test(arguments: Path.allCases)
    func randomOperationsWithFaultsConvergeToLastWriterWins(path: Path) throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["KVSTORE_MODEL_SEED"] ?? "") ?? UInt64.random(in: 1...999_999)
        // Under a sanitizer each sync process is several times slower: fewer operations.
        let operations = StressLevel.pick(short: BuildScale.sanitizer == nil ? 150 : 60, long: 1_000)
        print("[model] \(path): seed \(seed), \(operations) operations (KVSTORE_MODEL_SEED=\(seed) replays it)")
        var random = SplitMix64(seed: seed)
        let started = ContinuousClock.now
        let cluster = try LocalPostgresCluster()
        let group = "group.com.example.model"
        let keys = (0..<12).map { "k\($0)" }
        let credentials = TemporaryDirectory()
        // Through a gateway: one `kvtool sync gateway` process as its own login, on a port it keeps
        // across its kill -9s; each device behind a proxy of its own in front of it.
        var gateway: BackgroundProcess?
        var gatewayPort = cluster.port
        func startGateway() throws {
            let process = try BackgroundProcess(productsDirectory() + "/kvtool", [
                "sync", "gateway", "--database", cluster.gatewayURL.description, "--listen", "127.0.0.1:\(gatewayPort)",
                "--metrics-listen", "127.0.0.1:0"])
            guard process.waitForLine(timeout: BuildScale.seconds(60), where: { GatewayReadyLine($0) != nil }) != nil else {
                let ended = process.wait(timeout: 5)
                throw ReplicationError.server("the gateway did not start: \(ended.stderr)")
            }
            gateway = process
        }
        if path == .gateway {
            let setup = try run(productsDirectory() + "/kvtool", ["sync", "setup", "--database", cluster.tcpURL.description,
                                                                  "--gateway-login", LocalPostgresCluster.gatewayLogin])
            #expect(setup.status == 0, "\(setup.stderr)")
            gatewayPort = try LocalPostgresCluster.freePort()
            try startGateway()
        }
        defer { gateway?.kill(SIGKILL) }
        // Seven devices within the bound, one 2 h ahead (index 7).
        var devices: [ModelDevice] = []
        for index in 0..<8 {
            let skew: TimeInterval = index == 7 ? 7_200 : Double(Int(random.next() % 51) - 25)
            let device = try ModelDevice(index: index, group: group, skew: skew, proxy: try FaultProxy(to: gatewayPort))
            if path == .gateway {
                let issued = try run(productsDirectory() + "/kvtool", ["sync", "token", "issue", "--database", cluster.tcpURL.description,
                                                                       "--group", group, "--device", "m\(index)"])
                #expect(issued.status == 0, "\(issued.stderr)")
                device.tokenFile = credentials.path + "/m\(index)"
                try writeSecretFile(device.tokenFile!, issued.stdout)
            }
            devices.append(device)
        }
        defer { for device in devices { device.proxy.stop() } }
        let hostile = path == .gateway ? try HostileDevice(cluster: cluster, group: group, gatewayPort: gatewayPort) : nil
        var writes: [Write] = []
        var faults = (kills: 0, crashes: 0, partitions: 0, failedSyncs: 0, refusedForSkew: 0, syncs: 0, gatewayKills: 0,
                      swallowed: 0, cuts: 0, hostile: 0)

        func count(_ status: Int32, _ output: String, of device: ModelDevice) {
            faults.syncs += 1
            if status == 2 { faults.failedSyncs += 1 }
            if status == 3 { faults.refusedForSkew += 1 }
            #expect([0, 2, 3].contains(status), "sync of device \(device.index): \(output)")
        }
        /// Waits for the device's sync started before, if any.
        func settle(_ device: ModelDevice) {
            guard let process = device.running else { return }
            device.running = nil
            let ended = process.wait(timeout: BuildScale.seconds(120))
            count(ended.status, ended.lines.joined(separator: "\n") + " " + ended.stderr, of: device)
        }
        func sync(_ device: ModelDevice) throws -> Int32 {
            settle(device)
            let result = try helper(device.arguments, timeout: BuildScale.seconds(120))
            count(result.status, result.stdout + " " + result.stderr, of: device)
            return result.status
        }
        /// A sync left running (the gateway path), or run to its end (the direct path).
        func startSync(_ device: ModelDevice) throws {
            guard path == .gateway else { _ = try sync(device); return }
            settle(device)
            device.running = try BackgroundProcess(productsDirectory() + "/kvtest-helper", device.arguments)
        }

        for _ in 0..<operations {
            let device = devices[Int(random.next() % UInt64(devices.count))]
            let roll = random.next() % 100
            switch roll {
            case 0..<38:   // put
                let key = keys[Int(random.next() % UInt64(keys.count))]
                let value = "d\(device.index)-\(writes.count)"
                try device.container.store.write(author: "app") { tx in try device.notes.put(value, forKey: key, in: tx) }
                writes.append(Write(device: device.index, key: key, value: value, clock: try device.stampOfLastWrite(key)))
            case 38..<46:  // delete
                let key = keys[Int(random.next() % UInt64(keys.count))]
                let existed = try device.container.store.write(author: "app") { tx in try device.notes.delete(key, in: tx) }
                if existed { writes.append(Write(device: device.index, key: key, value: nil, clock: try device.stampOfLastWrite(key))) }
            case 46..<80:  // sync (and, now and then, the hostile device while others sync)
                try startSync(device)
                if let hostile, random.next() % 6 == 0 {
                    try hostile.attack(seen: devices.compactMap { try? $0.deviceID() }, random: &random)
                    faults.hostile += 1
                }
            case 80..<88:  // kill -9 mid-sync
                settle(device)
                let process = try BackgroundProcess(productsDirectory() + "/kvtest-helper", device.arguments)
                usleep(UInt32(random.next() % 400) * 1_000)
                process.kill(SIGKILL)
                _ = process.wait(timeout: BuildScale.seconds(60))
                faults.kills += 1
            case 88..<90:  // the server crashes, a device tries meanwhile, the server comes back
                try cluster.stop(immediate: true)
                faults.crashes += 1
                #expect(try sync(device) != 0)
                try cluster.start()
            case 90..<92 where path == .gateway:  // kill -9 of the gateway, mid-sync for some, and its restart
                try startSync(device)
                usleep(UInt32(random.next() % 300) * 1_000)
                gateway?.kill(SIGKILL)
                _ = gateway?.wait(timeout: BuildScale.seconds(30))
                try startGateway()
                faults.gatewayKills += 1
            case 92..<95:  // a partition that swallows a push's answer after the server committed it
                device.proxy.blackHole(after: path == .gateway ? "POST /v1/push" : "FROM kvsync_push(")
                device.partitioned = true
                faults.swallowed += 1
                try startSync(device)
            case 95..<97:  // every connection of the device cut with RST
                device.proxy.cut()
                faults.cuts += 1
            case 97..<98 where path == .gateway:  // the hostile device tries its tricks
                try hostile?.attack(seen: devices.compactMap { try? $0.deviceID() }, random: &random)
                faults.hostile += 1
            default:       // a partition starts or heals (and, on the direct path, the server crashes)
                if roll < 92 {
                    try cluster.stop(immediate: true)
                    faults.crashes += 1
                    #expect(try sync(device) != 0)
                    try cluster.start()
                } else {
                    device.partitioned.toggle()
                    device.proxy.set(device.partitioned ? .blackHole : .pass)
                    if device.partitioned { faults.partitions += 1 }
                }
            }
        }
        for device in devices { settle(device) }

        // Everything heals; every device syncs until nothing moves (the skewed one is refused each time).
        for device in devices { device.partitioned = false; device.proxy.heal() }
        // (A sync that a loaded machine answered too late just fails: the round does not count.)
        var rounds = 0
        var lastSequence = -1
        while rounds < 12 {
            rounds += 1
            var succeeded = true
            for device in devices {
                let status = try sync(device)
                if status != 0 && device.index != 7 { succeeded = false }
            }
            let sequence = try cluster.count("SELECT coalesce(max(seq), 0) FROM kvsync_changes")
            let pending = try devices.dropLast().map { try Replication.status(of: $0.container).pendingChanges }.reduce(0, +)
            if succeeded && sequence == lastSequence && pending == 0 { break }
            lastSequence = sequence
        }

        // The checker: from the test's own record of what it wrote, not from the replicator's state.
        var ids: [String: Int] = [:]
        for device in devices { if let id = try device.deviceID() { ids[id] = device.index } }
        struct Row { var device: Int; var key: String; var value: String?; var clock: UInt64; var deviceID: String }
        var rows: [Row] = []
        let decoder = CBORDecoder()
        for line in try cluster.psql("""
            SELECT device || '|' || encode(key, 'hex') || '|' || coalesce(encode(value, 'hex'), '-') || '|' || hlc
            FROM kvsync_changes WHERE group_id = '\(group)' ORDER BY seq
            """).split(separator: "\n") {
            let parts = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            let device = try #require(ids[parts[0]], "a log row from an unknown device \(parts[0])")
            let key = try String.decodeKey(try #require(Hex.decode(parts[1].utf8)))
            let value = parts[2] == "-" ? nil : try decoder.decode(String.self, from: try #require(Hex.decode(parts[2].utf8)))
            rows.append(Row(device: device, key: key, value: value, clock: UInt64(parts[3])!, deviceID: parts[0]))
        }
        // Every log row is a write the test made, with its value and clock.
        for row in rows {
            #expect(writes.contains { $0.device == row.device && $0.key == row.key && $0.value == row.value && $0.clock == row.clock },
                    "log row \(row) is no write the test made")
        }
        #expect(!rows.contains { $0.device == 7 }, "a write of the device 2 h ahead reached the log")
        // The server's state is last-writer-wins over the log.
        var winners: [String: Row] = [:]
        for row in rows {
            if let best = winners[row.key], (best.clock, best.deviceID) > (row.clock, row.deviceID) { continue }
            winners[row.key] = row
        }
        let expected = winners.compactMapValues(\.value)
        var server: [String: String] = [:]
        for line in try cluster.psql("""
            SELECT encode(key, 'hex') || '|' || encode(value, 'hex') FROM kvsync_state
            WHERE group_id = '\(group)' AND value IS NOT NULL
            """).split(separator: "\n") {
            let parts = line.split(separator: "|").map(String.init)
            server[try String.decodeKey(try #require(Hex.decode(parts[0].utf8)))] = try decoder.decode(String.self, from: try #require(Hex.decode(parts[1].utf8)))
        }
        #expect(server == expected)
        // No write lost: each device's last write of each key is in the log, or lost to a greater one.
        for device in devices.dropLast() {
            guard let id = try device.deviceID() else { continue }
            var last: [String: Write] = [:]
            for write in writes where write.device == device.index { last[write.key] = write }
            for (key, write) in last {
                let inLog = rows.contains { $0.device == write.device && $0.key == key && $0.clock == write.clock && $0.value == write.value }
                let beaten = winners[key].map { ($0.clock, $0.deviceID) > (write.clock, id) } ?? false
                #expect(inLog || beaten, "device \(device.index)'s last write of \(key) (\(write)) was lost (seed \(seed); the log: \(rows.filter { $0.key == key }))")
            }
        }
        // Every device within the bound holds the server's state, with nothing pending or quarantined.
        for device in devices.dropLast() {
            let held = Dictionary(uniqueKeysWithValues: try device.notes.entries().map { ($0.key, $0.value) })
            #expect(held == server, "device \(device.index) (skew \(device.skew) s) differs from the server")
            let status = try Replication.status(of: device.container)
            #expect(status.pendingChanges == 0 && status.quarantined == 0, "device \(device.index): \(status)")
        }
        // The device 2 h ahead: refused, and otherwise in step.
        let ahead = devices[7]
        let wroteAhead = Set(writes.filter { $0.device == 7 }.map(\.key))
        let heldAhead = Dictionary(uniqueKeysWithValues: try ahead.notes.entries().map { ($0.key, $0.value) })
        for key in keys where !wroteAhead.contains(key) {
            #expect(heldAhead[key] == server[key], "the device 2 h ahead differs from the server at \(key)")
        }
        if !wroteAhead.isEmpty {
            #expect(faults.refusedForSkew > 0)
            #expect(try Replication.status(of: ahead.container).lastError?.contains("ahead of the server's") == true)
        }

        let elapsed = ContinuousClock.now - started
        if let hostile {
            #expect(hostile.refused == hostile.attempts, "the hostile device's attempts: \(hostile.attempts), refused \(hostile.refused)")
        }
        print("[model] \(path): seed \(seed): \(operations) operations on 8 devices (\(StressLevel.name), \(BuildScale.name)), \(writes.count) writes, \(rows.count) log rows, \(faults.syncs) sync processes (\(faults.failedSyncs) failed on a fault, \(faults.refusedForSkew) refused for skew), \(faults.kills) kill -9, \(faults.crashes) server crashes, \(faults.partitions) partitions, \(faults.swallowed) swallowed answers, \(faults.cuts) RST cuts, \(faults.gatewayKills) gateway kill -9s, \(hostile.map { "\($0.attempts) hostile pushes (\($0.refused) refused)" } ?? "no hostile device"), \(rounds) rounds to converge, \(elapsed)")
    }
}

/// A device of the group that attacks it through the gateway, from an address of its own: it reads
/// which devices pushed with which tokens (any member can), then pushes junk under one of their ids
/// with its next tokens, and asks for a clock bound of `Int64.max` with a stamp 2 h ahead. Every
/// attempt must be refused; the model's checker finds anything of it that reached the log.
final class HostileDevice {
    let url: String
    let group: String
    let token: String
    private(set) var attempts = 0
    private(set) var refused = 0

    init(cluster: LocalPostgresCluster, group: String, gatewayPort: Int) throws {
        url = "http://127.0.0.1:\(gatewayPort)"
        self.group = group
        let issued = try run(productsDirectory() + "/kvtool", ["sync", "token", "issue", "--database", cluster.tcpURL.description,
                                                               "--group", group, "--device", "mallory"])
        guard issued.status == 0 else { throw ReplicationError.server("cannot issue the hostile device's token: \(issued.stderr)") }
        token = issued.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    var headers: [String] { ["Authorization: Bearer \(token)", "\(GatewayWire.groupHeader): \(group)"] }

    func push(as device: String, skew: Int64, _ changes: [OutgoingChange]) -> RawHTTP.Answer? {
        let body = GatewayPushRequest(device: device, maxClockSkewMilliseconds: skew, changes: changes).encoded()
        return try? RawHTTP.request(url, "POST /v1/push", headers: headers, body: body, source: "127.0.0.9")
    }

    func attack(seen: [String], random: inout SplitMix64) throws {
        let now = HybridTimestamp(date: Date()).rawValue
        func junk(_ token: UInt64, clock: UInt64 = now) throws -> OutgoingChange {
            OutgoingChange(kind: "collection", name: "notes", key: Array("k\(random.next() % 12)".utf8),
                           value: try CBOREncoder().encode("junk from mallory"), clock: clock, base: 0, token: token)
        }
        // Impersonation: another device's id, with its next tokens.
        if !seen.isEmpty, let answer = try? RawHTTP.request(url, "GET /v1/changes?after=0&limit=10000", headers: headers, source: "127.0.0.9"),
           answer.status == 200, let page = try? ChangesPage(decoding: answer.body, maxValueBytes: 1 << 20) {
            let victim = seen[Int(random.next() % UInt64(seen.count))]
            let next = (page.changes.filter { $0.device == victim }.map(\.token).max() ?? 0) + 1
            attempts += 1
            // (No answer at all, the gateway restarting, counts as refused: the checker finds anything applied.)
            if (push(as: victim, skew: 60_000, try (0..<3).map { try junk(next + UInt64($0)) })?.status ?? 0) != 200 { refused += 1 }
        }
        // A lifted clock bound, stamped 2 h ahead, as itself.
        let ahead = HybridTimestamp(date: Date().addingTimeInterval(7_200)).rawValue
        attempts += 1
        if let reply = push(as: "", skew: .max, [try junk(1 << 61 + random.next() % 1_000_000, clock: ahead)]) {
            let decoded = reply.status == 200 ? try? GatewayPushResponse(decoding: reply.body, maxValueBytes: 1 << 20) : nil
            if reply.status != 200 { refused += 1 } else if case .clockAhead? = decoded { refused += 1 }
        } else {
            refused += 1   // no answer (the gateway was restarting): nothing was applied either way
        }
    }
}
#endif
