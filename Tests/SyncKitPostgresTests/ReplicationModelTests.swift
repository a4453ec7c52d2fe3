#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import PostgresTesting
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
/// `make test` runs 150 operations; `make stress` 1,000. The seed is printed; `KVSTORE_MODEL_SEED=N`
/// replays a run.
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

        var url: String { "postgres://kv@127.0.0.1:\(proxy.port)/kv" }
        var arguments: [String] {
            ["sync-device", directory.path, group, url, "\(Int(skew * 1000))", "2000"]
        }

        /// The device id, once a replicator made it.
        func deviceID() throws -> String? { try Replication.status(of: container).device }
    }

    @Test func randomOperationsWithFaultsConvergeToLastWriterWins() throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["KVSTORE_MODEL_SEED"] ?? "") ?? UInt64.random(in: 1...999_999)
        // Under a sanitizer each sync process is several times slower: fewer operations.
        let operations = StressLevel.pick(short: BuildScale.sanitizer == nil ? 150 : 60, long: 1_000)
        print("[model] seed \(seed), \(operations) operations (KVSTORE_MODEL_SEED=\(seed) replays it)")
        var random = SplitMix64(seed: seed)
        let started = ContinuousClock.now
        let cluster = try LocalPostgresCluster()
        let group = "group.com.example.model"
        let keys = (0..<12).map { "k\($0)" }
        // Seven devices within the bound, one 2 h ahead (index 7).
        var devices: [ModelDevice] = []
        for index in 0..<8 {
            let skew: TimeInterval = index == 7 ? 7_200 : Double(Int(random.next() % 51) - 25)
            devices.append(try ModelDevice(index: index, group: group, skew: skew, proxy: try FaultProxy(to: cluster.port)))
        }
        defer { for device in devices { device.proxy.stop() } }
        var writes: [Write] = []
        var faults = (kills: 0, crashes: 0, partitions: 0, failedSyncs: 0, refusedForSkew: 0, syncs: 0)

        func sync(_ device: ModelDevice) throws -> Int32 {
            let result = try helper(device.arguments, timeout: BuildScale.seconds(120))
            faults.syncs += 1
            if result.status == 2 { faults.failedSyncs += 1 }
            if result.status == 3 { faults.refusedForSkew += 1 }
            #expect([0, 2, 3].contains(result.status), "sync of device \(device.index): \(result.stdout) \(result.stderr)")
            return result.status
        }

        for _ in 0..<operations {
            let device = devices[Int(random.next() % UInt64(devices.count))]
            let roll = random.next() % 100
            switch roll {
            case 0..<38:   // put
                let key = keys[Int(random.next() % UInt64(keys.count))]
                let value = "d\(device.index)-\(writes.count)"
                try device.container.store.write(author: "app") { tx in try device.notes.put(value, forKey: key, in: tx) }
                writes.append(Write(device: device.index, key: key, value: value, clock: try device.history.clock().rawValue))
            case 38..<46:  // delete
                let key = keys[Int(random.next() % UInt64(keys.count))]
                let existed = try device.container.store.write(author: "app") { tx in try device.notes.delete(key, in: tx) }
                if existed { writes.append(Write(device: device.index, key: key, value: nil, clock: try device.history.clock().rawValue)) }
            case 46..<80:  // sync
                _ = try sync(device)
            case 80..<88:  // kill -9 mid-sync
                let process = try BackgroundProcess(productsDirectory() + "/kvtest-helper", device.arguments)
                usleep(UInt32(random.next() % 400) * 1_000)
                process.kill(SIGKILL)
                _ = process.wait(timeout: BuildScale.seconds(60))
                faults.kills += 1
            case 88..<92:  // the server crashes, a device tries meanwhile, the server comes back
                try cluster.stop(immediate: true)
                faults.crashes += 1
                #expect(try sync(device) != 0)
                try cluster.start()
            default:       // a partition starts or heals
                device.partitioned.toggle()
                device.proxy.set(device.partitioned ? .blackHole : .pass)
                if device.partitioned { faults.partitions += 1 }
            }
        }

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
        print("[model] seed \(seed): \(operations) operations on 8 devices (\(StressLevel.name), \(BuildScale.name)), \(writes.count) writes, \(rows.count) log rows, \(faults.syncs) sync processes (\(faults.failedSyncs) failed on a fault, \(faults.refusedForSkew) refused for skew), \(faults.kills) kill -9, \(faults.crashes) server crashes, \(faults.partitions) partitions, \(rounds) rounds to converge, \(elapsed)")
    }
}
#endif
