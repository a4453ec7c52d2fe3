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
/// Files travel with the container (issue 49) through the same faults: every device declares `Pics/`
/// eager and `Docs/` lazy, and writes files there (a few KiB: new bytes, the same bytes again, or a
/// replacement) through `SharedFiles.write(_:to:in:)` in one transaction with a note, as an app does,
/// and removes them (`SharedFiles.remove(_:in:)`). The manifest's rows are checked as the notes are
/// (the log holds only the test's writes, last-writer-wins, none lost, every device in step); then the
/// files: every manifest row a device holds has its bytes at its path (by SHA-256) or is reported
/// missing or downloading by the device's local state (an eager one, after convergence, is there;
/// half the devices then declare `Docs/` eager and fetch every lazy file in one more round); every
/// file in any device's `Files/` holds a version the test wrote of its path (never half of one),
/// every copy in `Blobs/` hashes to its name; a path whose row is deleted is absent everywhere; and
/// every row on the server names a complete blob.
///
/// The backend shapes the data too (issue 50): a validator of `notes` (`kvsync_validators`) refuses
/// a random quarter of the values (those whose SHA-256 begins with a byte divisible by 4), and a
/// backend writer puts values through `kvsync_server_put` as `server:model`. The checker adds: no
/// refused value is in the log or on any device (each device put the server's value back), no accepted
/// write is lost (the backend's are in the log), and every refusal was reported to its writer (the
/// device's last write of a key, if refused, is in its `Replication.rejected(in:)` unless a greater
/// write beat it before it was sent), and every write a device keeps as rejected is one of its own
/// that the validator refuses.
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
        /// The model's replicated prefixes of `Files/`.
        static let eager = "Pics/", lazy = "Docs/"

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
            try Replication.files(prefix: Self.eager, fetch: .eager, in: container)
            try Replication.files(prefix: Self.lazy, fetch: .lazy(budget: 1 << 20), in: container)
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

        /// The stamp history gave the test's last write of `key` of `collection` (the clock may have
        /// moved since: a sync running at the same time applies other devices' changes).
        func stampOfLastWrite(_ key: String, of collection: String = "notes") throws -> UInt64 {
            let entries = try history.changes(since: .zero, matching: HistoryFilter(targets: [.collection(collection)]))
                .transactions?.flatMap(\.entries) ?? []
            return try #require(entries.last { $0.key == Array(key.utf8) && $0.author == "app" }?.clock).rawValue
        }

        /// What the device holds: its notes' values, and its manifest's rows as their SHA-256 in hex.
        func held() throws -> [String: String] {
            var held = Dictionary(uniqueKeysWithValues: try notes.entries().map { ($0.key, $0.value) })
            for row in try container.files.fileStatus() { held[row.path] = SHA256Hasher.hex(Array(row.entry.sha256)) }
            return held
        }
    }

    enum Path: String, CaseIterable, Sendable, CustomStringConvertible {
        case direct, gateway
        var description: String { rawValue }
    }

    @Test(.blockingWork, arguments: Path.allCases)
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
        // The files' paths: a write of one is a `Write` of its path whose value is the SHA-256 in hex.
        let paths = (0..<3).map { "\(ModelDevice.eager)p\($0).png" } + (0..<2).map { "\(ModelDevice.lazy)d\($0).pdf" }
        var contents: [String: [UInt8]] = [:]   // every version written, by SHA-256 in hex
        var versions: [String: Set<String>] = [:]   // path → the SHA-256s (hex) written there
        var files = (written: 0, same: 0, replaced: 0, deleted: 0, uploaded: 0, downloaded: 0, fetchedLazy: 0)
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
        let setup = try run(productsDirectory() + "/kvtool", ["sync", "setup", "--database", cluster.tcpURL.description]
                                + (path == .gateway ? ["--gateway-login", LocalPostgresCluster.gatewayLogin] : []))
        #expect(setup.status == 0, "\(setup.stderr)")
        try cluster.registerValidator("model_refuses_a_quarter", of: "notes", reason: """
            CASE WHEN get_byte(sha256(convert_to(\(LocalPostgresCluster.noteText), 'UTF8')), 0) % 4 = 0
                 THEN 'refused by the model: ' || \(LocalPostgresCluster.noteText) END
            """)
        if path == .gateway {
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
        var backendWrites = 0
        var rejectedReported = 0   // rejections the sync processes reported (SyncReport.rejected)
        var faults = (kills: 0, crashes: 0, partitions: 0, failedSyncs: 0, refusedForSkew: 0, syncs: 0, gatewayKills: 0,
                      swallowed: 0, cuts: 0, hostile: 0)

        func count(_ status: Int32, _ output: String, of device: ModelDevice) {
            faults.syncs += 1
            if let counted = output.firstMatch(of: /files up (\d+) down (\d+)/) {
                files.uploaded += Int(counted.1)!
                files.downloaded += Int(counted.2)!
            }
            if let counted = output.firstMatch(of: /rejected (\d+)/) { rejectedReported += Int(counted.1)! }
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
            case 0..<22:   // put
                let key = keys[Int(random.next() % UInt64(keys.count))]
                let value = "d\(device.index)-\(writes.count)"
                try device.container.store.write(author: "app") { tx in try device.notes.put(value, forKey: key, in: tx) }
                writes.append(Write(device: device.index, key: key, value: value, clock: try device.stampOfLastWrite(key)))
            case 22..<26:  // the backend writer puts a value the validator accepts (kvsync_server_put)
                let key = keys[Int(random.next() % UInt64(keys.count))]
                var value = "s-\(writes.count)"
                while Self.refused(value) { value += "+" }
                let answer = try cluster.psql("""
                    SELECT outcome || '|' || s_hlc FROM kvsync_server_put('\(group)', 'collection', 'notes',
                        decode('\(Hex.encode(key.encodedKey))', 'hex'), decode('\(Hex.encode(try CBOREncoder().encode(value)))', 'hex'), 'model')
                    """).trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|")
                #expect(answer.first == "applied", "kvsync_server_put: \(answer)")
                if answer.first == "applied", let clock = answer.last.flatMap({ UInt64($0) }) {
                    writes.append(Write(device: Self.backend, key: key, value: value, clock: clock))
                    backendWrites += 1
                }
            case 26..<34:  // a file (new bytes, the same again, or a replacement) with a note that names it
                let path = paths[Int(random.next() % UInt64(paths.count))]
                let before = try device.container.files.manifestEntry(for: path).map { SHA256Hasher.hex(Array($0.sha256)) }
                var bytes = (0..<(512 + Int(random.next() % 3_584))).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                if let before, random.next() % 3 == 0, let same = contents[before] {
                    bytes = same
                    files.same += 1
                } else if before == nil {
                    files.written += 1
                } else {
                    files.replaced += 1
                }
                let hex = SHA256Hasher.hex(SHA256Hasher.hash(bytes))
                contents[hex] = bytes
                versions[path, default: []].insert(hex)
                let key = keys[Int(random.next() % UInt64(keys.count))]
                let value = "d\(device.index)-\(writes.count) \(path)"
                try device.container.store.write(author: "app") { tx in
                    try device.notes.put(value, forKey: key, in: tx)
                    try device.container.files.write(bytes, to: path, in: tx)
                }
                writes.append(Write(device: device.index, key: key, value: value, clock: try device.stampOfLastWrite(key)))
                writes.append(Write(device: device.index, key: path, value: hex, clock: try device.stampOfLastWrite(path, of: "_files")))
            case 34..<38:  // a file the device has a manifest row of removed
                let held = try device.container.files.fileStatus().map(\.path)
                guard !held.isEmpty else { break }
                let path = held[Int(random.next() % UInt64(held.count))]
                try device.container.store.write(author: "app") { tx in try device.container.files.remove(path, in: tx) }
                writes.append(Write(device: device.index, key: path, value: nil, clock: try device.stampOfLastWrite(path, of: "_files")))
                files.deleted += 1
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
        var ids: [String: Int] = ["server:model": Self.backend]
        for device in devices { if let id = try device.deviceID() { ids[id] = device.index } }
        struct Row { var device: Int; var key: String; var value: String?; var clock: UInt64; var deviceID: String }
        var rows: [Row] = []
        let decoder = CBORDecoder()
        // A note's value is its text; a manifest row's, the SHA-256 it names (hex), as `Write` has them.
        func value(_ column: String, of name: String) throws -> String? {
            if column == "-" { return nil }
            return name == "_files" ? column : try decoder.decode(String.self, from: try #require(Hex.decode(column.utf8)))
        }
        let valueSQL = "CASE WHEN value IS NULL THEN '-' WHEN name = '_files' THEN coalesce(encode(kvsync_manifest_hash(value), 'hex'), 'malformed') ELSE encode(value, 'hex') END"
        for line in try cluster.psql("""
            SELECT device || '|' || encode(key, 'hex') || '|' || \(valueSQL) || '|' || hlc || '|' || name
            FROM kvsync_changes WHERE group_id = '\(group)' ORDER BY seq
            """).split(separator: "\n") {
            let parts = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            let device = try #require(ids[parts[0]], "a log row from an unknown device \(parts[0])")
            let key = try String.decodeKey(try #require(Hex.decode(parts[1].utf8)))
            rows.append(Row(device: device, key: key, value: try value(parts[2], of: parts[4]), clock: UInt64(parts[3])!, deviceID: parts[0]))
        }
        // Every log row is a write the test made, with its value and clock.
        for row in rows {
            #expect(writes.contains { $0.device == row.device && $0.key == row.key && $0.value == row.value && $0.clock == row.clock },
                    "log row \(row) is no write the test made")
        }
        #expect(!rows.contains { $0.device == 7 }, "a write of the device 2 h ahead reached the log")
        // No value the validator refuses is in the log (nor, then, on the server); every backend write is.
        #expect(!rows.contains { keys.contains($0.key) && Self.refused($0.value) }, "a refused value reached the log")
        for write in writes where write.device == Self.backend {
            #expect(rows.contains { $0.device == Self.backend && $0.key == write.key && $0.value == write.value && $0.clock == write.clock },
                    "the backend's write \(write) is not in the log")
        }
        // The server's state is last-writer-wins over the log.
        var winners: [String: Row] = [:]
        for row in rows {
            if let best = winners[row.key], (best.clock, best.deviceID) > (row.clock, row.deviceID) { continue }
            winners[row.key] = row
        }
        let expected = winners.compactMapValues(\.value)
        var server: [String: String] = [:]
        for line in try cluster.psql("""
            SELECT encode(key, 'hex') || '|' || \(valueSQL) || '|' || name FROM kvsync_state
            WHERE group_id = '\(group)' AND value IS NOT NULL
            """).split(separator: "\n") {
            let parts = line.split(separator: "|").map(String.init)
            server[try String.decodeKey(try #require(Hex.decode(parts[0].utf8)))] = try value(parts[1], of: parts[2])
        }
        #expect(server == expected)
        var rejectedKept = 0
        var refusedValues = Set<String>()   // "key=value" of every write a device keeps as rejected
        // No write lost: each device's last write of each key is in the log, or lost to a greater one.
        for device in devices.dropLast() {
            guard let id = try device.deviceID() else { continue }
            var last: [String: Write] = [:]
            for write in writes where write.device == device.index { last[write.key] = write }
            // What the device keeps as refused: its own writes, each one the validator refuses.
            let kept = try Replication.rejected(in: device.container).map { row in
                (key: try String.decodeKey(row.key), value: try row.value.map { try decoder.decode(String.self, from: $0) })
            }
            rejectedKept += kept.count
            for row in kept { refusedValues.insert("\(row.key)=\(row.value ?? "-")") }
            for row in kept {
                #expect(Self.refused(row.value) && writes.contains { $0.device == device.index && $0.key == row.key && $0.value == row.value },
                        "device \(device.index) keeps \(row) as refused: no write of its own that the validator refuses")
            }
            for (key, write) in last {
                let inLog = rows.contains { $0.device == write.device && $0.key == key && $0.clock == write.clock && $0.value == write.value }
                let beaten = winners[key].map { ($0.clock, $0.deviceID) > (write.clock, id) } ?? false
                if keys.contains(key) && Self.refused(write.value) {
                    // Refused: reported to its writer (unless a greater write beat it before it was sent).
                    #expect(kept.contains { $0.key == key && $0.value == write.value } || beaten,
                            "device \(device.index)'s refused write of \(key) (\(write)) was not reported to it (seed \(seed))")
                    continue
                }
                #expect(inLog || beaten, "device \(device.index)'s last write of \(key) (\(write)) was lost (seed \(seed); the log: \(rows.filter { $0.key == key }))")
            }
        }
        // Every device within the bound holds the server's state, with nothing pending or quarantined.
        for device in devices.dropLast() {
            let held = try device.held()
            #expect(held == server, "device \(device.index) (skew \(device.skew) s) differs from the server")
            #expect(!held.contains { keys.contains($0.key) && Self.refused($0.value) }, "device \(device.index) holds a refused value")
            let status = try Replication.status(of: device.container)
            #expect(status.pendingChanges == 0 && status.quarantined == 0, "device \(device.index): \(status)")
        }
        // No device holds a value the server refused (values are unique to their write).
        for device in devices {
            for (key, value) in try device.held() where refusedValues.contains("\(key)=\(value)") {
                #expect(Bool(false), "device \(device.index) holds \(key)=\(value), which the server refused")
            }
        }
        // The device 2 h ahead: refused, and otherwise in step.
        let ahead = devices[7]
        let wroteAhead = Set(writes.filter { $0.device == 7 }.map(\.key))
        let heldAhead = try ahead.held()
        for key in keys + paths where !wroteAhead.contains(key) {
            #expect(heldAhead[key] == server[key], "the device 2 h ahead differs from the server at \(key)")
        }
        if !wroteAhead.isEmpty {
            #expect(faults.refusedForSkew > 0)
            #expect(try Replication.status(of: ahead.container).lastError?.contains("ahead of the server's") == true)
        }

        let downloadedBefore = files.downloaded
        try checkFiles(devices, paths: paths, versions: versions, cluster: cluster, group: group, sync: { _ = try sync($0) })
        files.fetchedLazy = files.downloaded - downloadedBefore
        let elapsed = ContinuousClock.now - started
        if let hostile {
            #expect(hostile.refused == hostile.attempts, "the hostile device's attempts: \(hostile.attempts), refused \(hostile.refused)")
        }
        print("[model] \(path): seed \(seed): \(operations) operations on 8 devices (\(StressLevel.name), \(BuildScale.name)), \(writes.count) writes (\(backendWrites) by the backend, \(writes.count(where: { $0.device < Self.backend && keys.contains($0.key) && Self.refused($0.value) })) refused by the validator, \(rejectedKept) kept as rejected on the devices, \(rejectedReported) reported by sync rounds), \(rows.count) log rows, files \(files.written) written, \(files.same) written again with the same bytes, \(files.replaced) replaced, \(files.deleted) deleted, \(files.uploaded) uploaded, \(files.downloaded) downloaded (\(files.fetchedLazy) of them lazy ones fetched at the end), \(faults.syncs) sync processes (\(faults.failedSyncs) failed on a fault, \(faults.refusedForSkew) refused for skew), \(faults.kills) kill -9, \(faults.crashes) server crashes, \(faults.partitions) partitions, \(faults.swallowed) swallowed answers, \(faults.cuts) RST cuts, \(faults.gatewayKills) gateway kill -9s, \(hostile.map { "\($0.attempts) hostile pushes (\($0.refused) refused)" } ?? "no hostile device"), \(rounds) rounds to converge, \(elapsed)")
    }

    /// The backend writer's index in `Write.device`.
    static let backend = 8

    /// Whether the model's validator refuses a note: the first byte of its text's SHA-256 divisible by 4.
    static func refused(_ value: String?) -> Bool {
        value.map { SHA256Hasher.hash(Array($0.utf8))[0] % 4 == 0 } ?? false
    }

    /// The files' checker, once the notes and the manifest's rows converged (see the suite's description).
    func checkFiles(_ devices: [ModelDevice], paths: [String], versions: [String: Set<String>], cluster: LocalPostgresCluster,
                    group: String, sync: (ModelDevice) throws -> Void) throws {
        // Never a row without its bytes: every manifest row on the server names a complete blob of the group.
        let unbacked = try cluster.count("""
            SELECT count(*) FROM kvsync_state s WHERE group_id = '\(group)' AND name = '_files' AND value IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM kvsync_blobs b WHERE b.group_id = s.group_id AND b.complete
                            AND b.sha256 = kvsync_manifest_hash(s.value))
            """)
        #expect(unbacked == 0, "\(unbacked) manifest rows on the server name no complete blob")
        // Half the devices within the bound fetch the lazy files too: `Docs/` declared eager, one round.
        let fetching = devices.dropLast().filter { $0.index % 2 == 0 }
        for device in fetching {
            try Replication.files(prefix: ModelDevice.lazy, fetch: .eager, in: device.container)
            try sync(device)
        }
        let manager = FileManager.default
        for device in devices {
            let converged = device.index != 7
            let eager = fetching.contains { $0 === device } ? [ModelDevice.eager, ModelDevice.lazy] : [ModelDevice.eager]
            // Every manifest row: its bytes at its path, or reported missing or downloading.
            let rows = try device.container.files.fileStatus()
            for row in rows {
                let hex = SHA256Hasher.hex(Array(row.entry.sha256))
                let file = try? SHA256Hasher.hash(fileAt: device.container.layout.files + "/" + row.path)
                let here = file.map { SHA256Hasher.hex($0.digest) == hex } ?? false
                switch row.state {
                case .present, .waitingToUpload:
                    #expect(here, "device \(device.index): \(row.path) is \(row.state), but its file does not hold \(hex)")
                case .missing, .downloading:
                    #expect(!converged || !eager.contains { row.path.hasPrefix($0) },
                            "device \(device.index): \(row.path) (eager) is \(row.state) after convergence: \(row.problem ?? "")")
                }
                if converged { #expect(row.state != .waitingToUpload, "device \(device.index): \(row.path) still waits to upload") }
            }
            // A path without a manifest row (deleted, or never written) has no file.
            for path in paths where !rows.contains(where: { $0.path == path }) {
                #expect(!manager.fileExists(atPath: device.container.layout.files + "/" + path),
                        "device \(device.index): \(path) has no manifest row and still a file")
            }
            // Never a half-written file: each file in Files/ holds a version written of its path (a
            // publish cut short leaves a link to a whole one), each copy in Blobs/ hashes to its name.
            let files = device.container.layout.files
            for relative in try manager.subpathsOfDirectory(atPath: files) {
                var directory: ObjCBool = false
                guard manager.fileExists(atPath: files + "/" + relative, isDirectory: &directory), !directory.boolValue else { continue }
                let name = relative.split(separator: "/").last.map(String.init) ?? relative
                let path = TemporaryFileName.parse(name).map { String(relative.dropLast(name.count)) + $0.target } ?? relative
                let digest = SHA256Hasher.hex(try SHA256Hasher.hash(fileAt: files + "/" + relative).digest)
                #expect(versions[path]?.contains(digest) == true, "device \(device.index): Files/\(relative) holds no version written of \(path) (\(digest))")
            }
            let blobs = device.container.layout.blobs
            // (Skipped: a download's or a write's temporary file, and the publish lock.)
            for name in try manager.contentsOfDirectory(atPath: blobs) where TemporaryFileName.parse(name) == nil && name != ".publish.lock" {
                let digest = SHA256Hasher.hex(try SHA256Hasher.hash(fileAt: blobs + "/" + name).digest)
                #expect(digest == name, "device \(device.index): Blobs/\(name) holds other bytes (\(digest))")
            }
        }
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
