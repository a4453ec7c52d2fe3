#if PostgreSQL
import Foundation
import KVStore
import SyncKit
@testable import SyncKitPostgres
import PostgresTesting
import SyncWire
import TestSupport
import SyncTestSupport
import Testing
import Workloads
#if canImport(Glibc)
import Glibc
#endif

/// The server-state fuzzer (issue 46): random rows written straight into the server's tables between
/// rounds of real devices, as anyone with write access to them could (the attacker RELIABILITY.md
/// names), or as a restore that did not update the counters leaves them. Rows of every kind, name,
/// key, value, clock, sequence number, device and token: valid and invalid values of the demo's typed
/// collections (`dailyRecords` with its merge, the push inbox `receivedNotifications`), a defaults
/// suite and a `notes` collection; copies of honest rows; numbers behind the devices' cursors, past
/// the log's end, at the numbers the next push draws, far ahead and not positive; current-state rows
/// of any version; now and then the log's end moved back, its pruning horizon moved forward, the
/// server's id changed, or the whole log pruned (`pruneServer`).
///
/// Each run is a group of its own with three devices: two on the database (one of them also syncs as
/// `kvtool sync run --once` processes with kvtool's targets, now and then), one through a
/// `kvtool sync gateway` process. A case plants 1 to 3 rows (and sometimes more), lets each device
/// write a little, and runs a round of each. The invariants:
///
/// - every round ends within its bound (60 s), with no trap and no error, and starts over at most once;
/// - the quarantine never holds an honest device's change, only planted ones; and at the end nothing it
///   holds can be applied (`retryQuarantined` applies none);
/// - an honest write the server acknowledged (its row in the log) is never replaced in the server's
///   state by an older one (by clock and device), unless the state row itself was planted;
/// - after a final round of writes (the sequence first moved past the rows planted just ahead of it,
///   as time would), every device holds the server's state for every key that no quarantined change
///   holds back, and `kvtool check` passes on every device's container.
///
/// The seed of each run is printed; `KVSTORE_SERVER_FUZZ_SEED=N` replays that run alone. `make test`
/// runs a short version (2 runs of 20 cases, 1 under a sanitizer: the test was the longest of the run
/// at 4, and CI must stay under an hour), `make stress` (`KVSTORE_STRESS=1`) 10,000 cases;
/// `KVSTORE_SERVER_FUZZ_RUNS` sets the number of runs.
@Suite(.serialized) struct ServerStateFuzzTests {
    /// One honest device: its container with the demo's typed collections, a defaults suite and (for
    /// the two in-process ones) `notes`.
    final class FuzzDevice: @unchecked Sendable {
        let name: String
        let directory = TemporaryDirectory()
        let container: SharedContainer
        let history: History
        let checklist: ChecklistStore
        let inbox: KVCollection<Pair<Date, UUID>, ReceivedNotification>
        let settings: SharedDefaults
        let notes: KVCollection<String, String>?
        let endpoint: Replicator.Endpoint
        /// Syncs as `kvtool sync run --once` processes now and then (with kvtool's own targets).
        let usesKvtool: Bool
        var replicator: Replicator?
        let events = Locked<[SyncEvent]>([])
        var serverURL: String

        init(name: String, group: String, endpoint: Replicator.Endpoint, serverURL: String, notes: Bool, usesKvtool: Bool) throws {
            self.name = name
            self.endpoint = endpoint
            self.serverURL = serverURL
            self.usesKvtool = usesKvtool
            container = try SharedContainer(groupIdentifier: group, root: directory.path)
            history = try History.attach(to: container)
            checklist = try ChecklistStore(store: container.store)
            inbox = try container.store.collection(PushSDKStore.collectionName, key: Pair<Date, UUID>.self, value: ReceivedNotification.self)
            settings = try container.defaults(suite: "settings")
            self.notes = notes ? try container.store.collection("notes", key: String.self, value: String.self) : nil
            try Replication.enable(.collection(ChecklistStore.recordsName), in: container)
            try Replication.enable(.collection(PushSDKStore.collectionName), in: container)
            try Replication.enable(.defaults("settings"), in: container)
            if notes { try Replication.enable(.collection("notes"), in: container) }
        }

        /// The targets as kvtool gives them (`KVToolApps.replicatedTargets`): the records typed and
        /// merged by `DailyRecord.union`, the inbox by name, each value checked as its app's type.
        var targets: [ReplicatedTarget] {
            get throws {
                var targets: [ReplicatedTarget] = [
                    ReplicatedTarget.collection(checklist.records, conflicts: .merge(DailyRecord.union))
                        .checkingValues { _ = try CBORDecoder().decode(DailyRecord.self, from: $0) },
                    try ReplicatedTarget.untypedCollection(named: PushSDKStore.collectionName, in: container.store)
                        .checkingValues { _ = try CBORDecoder().decode(ReceivedNotification.self, from: $0) },
                    .defaults(settings),
                ]
                if let notes { targets.append(.collection(notes)) }
                return targets
            }
        }

        func made() throws -> Replicator {
            if let replicator { return replicator }
            var options = Replicator.Options()
            options.maxValueBytes = ServerStateFuzzTests.maxValueBytes
            options.statementTimeout = .seconds(60)
            let events = self.events
            let made = try Replicator(container: container, endpoint: endpoint, targets: try targets, options: options) { event in
                events.withLock { $0.append(event) }
            }
            replicator = made
            return made
        }

        func drop() async {
            await replicator?.close()
            replicator = nil
        }

        /// Lets go of the store's files (its history keeps it open until it is closed: each run left
        /// about 25 descriptors open, a thousand in `make stress`).
        deinit { container.close() }

        var id: String { get throws { try Replication.status(of: container).device ?? "" } }
    }

    static let maxValueBytes = 64 << 10
    static let noteKeys = (0..<6).map { "k\($0)" }
    static let days = (0..<5).map { LogicalDay(dayNumber: 19_800 + Int32($0)) }
    static let inboxKeys: [Pair<Date, UUID>] = (0..<4).map {
        Pair(Date(timeIntervalSince1970: 1_800_000_000 + Double($0)), UUID(uuidString: "00000000-0000-4000-8000-00000000000\($0)")!)
    }
    static let settingKeys = (0..<4).map { "s\($0)" }

    /// What a run found: counts for the printed line, and failures (also recorded as issues).
    struct Tally {
        var cases = 0, rounds = 0, kvtoolRounds = 0, gatewayRounds = 0, planted = 0, plantedState = 0, groupMoves = 0
        var serverChanges = 0, resyncs = 0, quarantined = 0, restarts = 0, converged = 0, finalKeys = 0, prunes = 0
        var slowest: Duration = .zero
    }

    @Test func randomServerRowsBetweenRoundsNeverStopARoundNorLoseAWrite() async throws {
        let environment = ProcessInfo.processInfo.environment
        let replay = environment["KVSTORE_SERVER_FUZZ_SEED"].flatMap(UInt64.init)
        let runs = replay != nil ? 1 : (environment["KVSTORE_SERVER_FUZZ_RUNS"].flatMap(Int.init)
            ?? StressLevel.pick(short: BuildScale.sanitizer == nil ? 2 : 1, long: 200))
        let casesPerRun = StressLevel.pick(short: 20, long: 50)
        let cluster = try await offPool { try LocalPostgresCluster() }
        let (gateway, gatewayURL) = try await startGateway(cluster)
        defer { gateway.kill(SIGKILL) }
        var total = Tally()
        let started = ContinuousClock.now
        let base = replay ?? UInt64.random(in: 1...999_999_999)
        for run in 0..<runs {
            let seed = replay ?? base &+ UInt64(run)
            print("[server-fuzz] run \(run + 1) of \(runs): seed \(seed) (KVSTORE_SERVER_FUZZ_SEED=\(seed) replays it)")
            let tally = try await Self.fuzzRun(seed: seed, cases: casesPerRun, cluster: cluster, gatewayURL: gatewayURL)
            total.cases += tally.cases; total.rounds += tally.rounds; total.kvtoolRounds += tally.kvtoolRounds
            total.gatewayRounds += tally.gatewayRounds; total.planted += tally.planted; total.plantedState += tally.plantedState
            total.groupMoves += tally.groupMoves; total.serverChanges += tally.serverChanges; total.quarantined += tally.quarantined
            total.restarts += tally.restarts; total.slowest = max(total.slowest, tally.slowest)
            total.converged += tally.converged; total.finalKeys += tally.finalKeys; total.prunes += tally.prunes
            total.resyncs += tally.resyncs
        }
        print("[server-fuzz] \(total.cases) cases in \(runs) runs (\(StressLevel.name), \(StressLevel.build)): \(total.rounds) rounds (\(total.gatewayRounds) through the gateway, \(total.kvtoolRounds) kvtool processes), \(total.planted) rows planted in the log, \(total.plantedState) in the state, \(total.groupMoves) moves of the log's end or horizon or the server's id, \(total.prunes) prunes, \(total.restarts) rounds that started over (\(total.serverChanges) rebases, \(total.resyncs) resyncs), \(total.quarantined) changes quarantined; \(total.converged) of \(total.finalKeys) keys checked converged at the end (the others held back by a quarantined change or planted in the state); slowest round \(total.slowest), \(ContinuousClock.now - started) in all")
    }

    // MARK: - One run

    static func fuzzRun(seed: UInt64, cases: Int, cluster: LocalPostgresCluster, gatewayURL: String) async throws -> Tally {
        var random = SplitMix64(seed: seed)
        var tally = Tally()
        let group = "group.com.example.fuzz.\(seed)"
        // Each run numbers its log from 1, whatever ran before it (groups never share a number's row):
        // a replay draws the same numbers.
        _ = try await offPool { try cluster.psql("SELECT setval('kvsync_changes_seq_seq', 1, false)") }
        let direct = cluster.tcpURL
        let token = try await issueToken(cluster, ["--group", group, "--device", "fuzz-gw-\(seed)"])
        let devices = [
            try FuzzDevice(name: "d0", group: group, endpoint: .database(direct), serverURL: direct.description, notes: true, usesKvtool: false),
            try FuzzDevice(name: "d1", group: group, endpoint: .database(direct), serverURL: direct.description, notes: false, usesKvtool: true),
            try FuzzDevice(name: "gw", group: group, endpoint: .gateway(try SyncGatewayURL(gatewayURL), token: token),
                           serverURL: gatewayURL, notes: true, usesKvtool: false),
        ]
        var planter = Planter(group: group, cluster: cluster)
        /// Each honest device's writes, in order: (target, key, value, clock).
        var writes: [Int: [HonestWrite]] = [:]

        func round(_ index: Int, kvtool: Bool = false) async throws {
            let device = devices[index]
            let before = ContinuousClock.now
            if kvtool {
                await device.drop()
                let result = try await offPool {
                    try run(productsDirectory() + "/kvtool", ["sync", "run", "--once", "--server", device.serverURL,
                                                             "--root", device.directory.path, "--group", group], timeout: 60)
                }
                #expect(result.status == 0, "seed \(seed): kvtool sync run --once on \(device.name): \(result.stdout) \(result.stderr)")
                let restarts = result.stdout.components(separatedBy: "another server").count - 1
                #expect(restarts <= 1, "seed \(seed): \(device.name) started over \(restarts) times in one round")
                tally.kvtoolRounds += 1
                tally.serverChanges += restarts
                if restarts > 0 { tally.restarts += 1 }
            } else {
                device.events.withLock { $0 = [] }
                let replicator = try device.made()
                let outcome = try await within(.seconds(60)) { try await replicator.sync() }
                switch outcome {
                case .none:
                    Issue.record("seed \(seed): a round of \(device.name) did not end within 60 s")
                    throw ReplicationError.server("a round did not end within its bound")
                case .some(.failure(let error)):
                    Issue.record("seed \(seed): a round of \(device.name) failed: \(error)")
                case .some(.success):
                    break
                }
                // At most one rebase, and one resync after it (a restored server whose log was pruned).
                let events = device.events.withLock { $0 }
                let rebases = events.count { if case .serverChanged = $0 { true } else { false } }
                let resyncs = events.count { if case .resynchronized = $0 { true } else { false } }
                #expect(rebases <= 1 && resyncs <= 1, "seed \(seed): \(device.name) started over \(rebases + resyncs) times in one round: \(events)")
                tally.serverChanges += rebases
                tally.resyncs += resyncs
                if rebases + resyncs > 0 { tally.restarts += 1 }
                if case .gateway = device.endpoint { tally.gatewayRounds += 1 }
            }
            tally.rounds += 1
            tally.slowest = max(tally.slowest, ContinuousClock.now - before)
        }

        // Every device syncs once first: each has its id, and the group its rows.
        for index in devices.indices { try await round(index) }
        let honestIDs = try devices.map { try $0.id }
        planter.honestIDs = honestIDs

        for _ in 0..<cases {
            tally.cases += 1
            // Rows planted between rounds.
            let count = 1 + Int(random.next() % 3)
            for _ in 0..<count {
                if try await planter.plantRow(&random) { tally.planted += 1 }
            }
            if random.next() % 8 == 0, try await planter.plantState(&random) { tally.plantedState += 1 }
            if random.next() % 25 == 0 { try await planter.moveGroup(&random); tally.groupMoves += 1 }
            // Now and then a real prune of the whole log (devices behind it resync).
            if random.next() % 40 == 0 {
                let replicator = try devices[0].made()
                _ = try await replicator.pruneServer(olderThan: .zero)
                tally.prunes += 1
            }
            // The honest devices write a little.
            for (index, device) in devices.enumerated() {
                for _ in 0..<Int(random.next() % 3) {
                    writes[index, default: []].append(try Self.write(on: device, &random))
                }
            }
            for index in devices.indices.shuffled(using: &random) {
                try await round(index, kvtool: devices[index].usesKvtool && random.next() % 5 == 0)
            }
            for device in devices {
                for change in try Replication.quarantine(of: device.container) where !planter.isPlanted(change) {
                    Issue.record("seed \(seed): \(device.name) quarantined a change no one planted: \(change)")
                }
            }
        }

        // Every device syncs until nothing moves; then no acknowledged write was replaced by an older one.
        try await settle(devices, round: round)
        let log = try await offPool { try LogRow.read(cluster, group: group) }
        let state = try await offPool { try LogRow.readState(cluster, group: group) }
        for (index, device) in devices.enumerated() {
            let id = honestIDs[index]
            var last: [TargetKey: HonestWrite] = [:]
            for write in writes[index] ?? [] { last[write.targetKey] = write }
            for (key, write) in last where !planter.stateTampered.contains(key) {
                let acknowledged = log.contains {
                    $0.device == id && $0.targetKey == key && $0.value == write.value && $0.clock == write.clock
                }
                guard acknowledged else { continue }
                let current = state[key]
                let kept = current.map { $0.value == write.value || ($0.clock, $0.device) >= (write.clock, id) } ?? false
                if !kept {
                    // The key's log, to tell which push replaced it, and how.
                    let history = (try? await offPool { try cluster.psql("""
                        SELECT seq || ' ' || device || ' tok ' || token || ' hlc ' || hlc || ' base ' || base || ' ' || coalesce(left(encode(value, 'hex'), 40), '-')
                        FROM kvsync_changes WHERE group_id = '\(group)' AND key = '\\x\(Hex.encode(key.key))'::bytea ORDER BY seq
                        """) }) ?? "?"
                    Issue.record("seed \(seed): \(device.name)'s acknowledged write \(write) was replaced on the server by an older one: \(String(describing: current)); the key's log:\n\(history)")
                }
            }
        }

        // The final writes, after every row planted just ahead of the sequence has joined the log.
        try await planter.passNearRows()
        // Each key is written by a device that no quarantined change holds it back on (the others'
        // are superseded by it), when there is one.
        var written = Set<TargetKey>()
        for device in devices {
            let holds = Set(try Replication.quarantine(of: device.container).compactMap { change in
                change.fromPreviousServer ? nil : change.target.map { TargetKey(target: $0, key: change.key) }
            })
            let keys = Set(finalKeys.filter { device.declares($0.target) && !holds.contains($0) }).subtracting(written)
            try writeFinals(on: device, keys: keys, seed: seed)
            written.formUnion(keys)
        }
        try await settle(devices, round: round)

        // Convergence on every key the final round wrote (a key a quarantined change held back on every
        // device had no final write: its writes wait, by design), but for keys still held back, and keys
        // whose current-state row was planted (that row is in no log: a device learns it only from a
        // conflict of its own, the others never).
        let server = try await offPool { try LogRow.readState(cluster, group: group) }
        let finals = written
        var held = planter.stateTampered
        for device in devices {
            for change in try Replication.quarantine(of: device.container) where !change.fromPreviousServer {
                if let target = change.target { held.insert(TargetKey(target: target, key: change.key)) }
            }
        }
        tally.finalKeys += finalKeys.count
        tally.converged += finals.subtracting(held).count
        for device in devices {
            let stored = try Self.stored(device)
            for key in finals where !held.contains(key) && device.declares(key.target) {
                guard server[key]?.value == nil || server[key]?.value != stored[key] else { continue }
                let history = try await offPool { [key] in
                    try cluster.psql("""
                        SELECT seq || ' ' || left(device, 12) || ' ' || coalesce(left(encode(value, 'hex'), 24), '-') || ' ' || hlc FROM kvsync_changes
                        WHERE group_id = '\(group)' AND name = '\(key.target.name)' AND key = '\\x\(Hex.encode(key.key))'::bytea ORDER BY seq
                        """).split(separator: "\n").joined(separator: "; ")
                }
                Issue.record("seed \(seed): \(device.name) holds \(stored[key].map(Hex.encode) ?? "nothing") at \(key), the server \(server[key].map { $0.value.map(Hex.encode) ?? "a delete" } ?? "nothing"); the log of the key: \(history)")
            }
            // Nothing it holds could be applied now.
            let replicator = try device.made()
            let before = try Replication.quarantine(of: device.container)
            let retried = try replicator.retryQuarantined()
            let after = try Replication.quarantine(of: device.container)
            let nowStored = try Self.stored(device)
            let applied = before.filter { change in
                !after.contains(change) && change.target.map { nowStored[TargetKey(target: $0, key: change.key)] == change.value } == true
            }
            #expect(retried.applied == 0, "seed \(seed): \(device.name)'s quarantine held \(retried.applied) applicable changes: \(applied); before the retry: \(before); after: \(after)")
            tally.quarantined += try Replication.status(of: device.container).quarantined
            if let notes = device.notes { _ = try notes.entries() }   // every note decodes as a String
            await device.drop()
            let check = try await offPool {
                try run(productsDirectory() + "/kvtool", ["check", "--root", device.directory.path, "--group", group], timeout: 120)
            }
            #expect(check.status == 0, "seed \(seed): kvtool check of \(device.name): \(check.stdout) \(check.stderr)")
        }
        return tally
    }

    /// The keys ``writeFinals(on:seed:)`` writes.
    static var finalKeys: [TargetKey] {
        noteKeys.map { TargetKey(target: .collection("notes"), key: $0.encodedKey) }
            + days.map { TargetKey(target: .collection(ChecklistStore.recordsName), key: $0.encodedKey) }
            + inboxKeys.map { TargetKey(target: .collection(PushSDKStore.collectionName), key: $0.encodedKey) }
            + settingKeys.map { TargetKey(target: .defaults("settings"), key: Array($0.utf8)) }
    }

    /// A last value of each of `keys` (of ``finalKeys``), written by `device`.
    static func writeFinals(on final: FuzzDevice, keys: Set<TargetKey>, seed: UInt64) throws {
        try final.container.store.write(author: "app") { tx in
            for key in noteKeys where keys.contains(TargetKey(target: .collection("notes"), key: key.encodedKey)) {
                try final.notes?.put("final \(seed) \(key)", forKey: key, in: tx)
            }
            for day in days where keys.contains(TargetKey(target: .collection(ChecklistStore.recordsName), key: day.encodedKey)) {
                try final.checklist.records.put(DailyRecord(day: day, scores: ["think.1": 5], memos: [:]), forKey: day, in: tx)
            }
            for key in inboxKeys where keys.contains(TargetKey(target: .collection(PushSDKStore.collectionName), key: key.encodedKey)) {
                try final.inbox.put(ReceivedNotification(id: key.second, receivedAt: key.first, status: .rejected, payload: nil,
                                                         error: "final", rawJSON: "{}"), forKey: key, in: tx)
            }
            for key in settingKeys where keys.contains(TargetKey(target: .defaults("settings"), key: Array(key.utf8))) {
                try final.settings.set("final \(key)", forKey: key, in: tx)
            }
        }
    }

    /// Rounds of every device until a whole pass moves nothing (at most eight).
    static func settle(_ devices: [FuzzDevice], round: (Int, Bool) async throws -> Void) async throws {
        var previous: [[TargetKey: [UInt8]]] = []
        for _ in 0..<8 {
            for index in devices.indices { try await round(index, false) }
            let now = try devices.map(stored)
            let pending = try devices.map { try Replication.status(of: $0.container).pendingChanges }
            if now == previous && pending.allSatisfy({ $0 == 0 }) { return }
            previous = now
        }
    }

    /// `body`, or nil when it has not ended within `limit` (it is left running: a round that never
    /// ends is the failure).
    static func within<R: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> R) async throws -> Result<R, any Error>? {
        let settled = Locked(false)
        return await withCheckedContinuation { (continuation: CheckedContinuation<Result<R, any Error>?, Never>) in
            Task {
                let result: Result<R, any Error>
                do { result = .success(try await body()) } catch { result = .failure(error) }
                if settled.withLock({ done in defer { done = true }; return !done }) { continuation.resume(returning: result) }
            }
            Task {
                try? await Task.sleep(for: limit)
                if settled.withLock({ done in defer { done = true }; return !done }) { continuation.resume(returning: nil) }
            }
        }
    }

    // MARK: - Honest writes

    struct TargetKey: Hashable, CustomStringConvertible {
        var target: Mutation.Target
        var key: [UInt8]
        var description: String { "\(target) \(Hex.encode(key))" }
    }

    struct HonestWrite: CustomStringConvertible {
        var targetKey: TargetKey
        var value: [UInt8]?
        var clock: UInt64
        var description: String { "\(targetKey) = \(value.map(Hex.encode) ?? "delete") at \(clock)" }
    }

    static func write(on device: FuzzDevice, _ random: inout SplitMix64) throws -> HonestWrite {
        let roll = random.next() % 100
        var written: TargetKey
        switch roll {
        case 0..<30 where device.notes != nil:
            let key = noteKeys[Int(random.next() % UInt64(noteKeys.count))]
            if random.next() % 6 == 0 {
                try device.container.store.write(author: "app") { tx in _ = try device.notes!.delete(key, in: tx) }
            } else {
                let value = "\(device.name) \(random.next() % 1_000_000)"
                try device.container.store.write(author: "app") { tx in try device.notes!.put(value, forKey: key, in: tx) }
            }
            written = TargetKey(target: .collection("notes"), key: key.encodedKey)
        case 0..<60:
            let day = days[Int(random.next() % UInt64(days.count))]
            let category = ChecklistCategory.allCases[Int(random.next() % 5)]
            let item = "\(category.rawValue).\(random.next() % 6)"
            try device.container.store.write(author: "app") { tx in
                var scores = try device.checklist.records.get(day, in: tx)?.scores ?? [:]
                scores[item] = 1 + Int(random.next() % 5)
                try device.checklist.records.put(DailyRecord(day: day, scores: scores, memos: [category.rawValue: device.name]), forKey: day, in: tx)
            }
            written = TargetKey(target: .collection(ChecklistStore.recordsName), key: day.encodedKey)
        case 0..<80:
            let key = inboxKeys[Int(random.next() % UInt64(inboxKeys.count))]
            let notification = ReceivedNotification(id: key.second, receivedAt: key.first, status: .rejected, payload: nil,
                                                    error: "\(device.name) \(random.next() % 1000)", rawJSON: "{}")
            try device.container.store.write(author: "app") { tx in try device.inbox.put(notification, forKey: key, in: tx) }
            written = TargetKey(target: .collection(PushSDKStore.collectionName), key: key.encodedKey)
        default:
            let key = settingKeys[Int(random.next() % UInt64(settingKeys.count))]
            let value = "\(device.name) \(random.next() % 1000)"
            try device.container.store.write(author: "app") { tx in try device.settings.set(value, forKey: key, in: tx) }
            written = TargetKey(target: .defaults("settings"), key: Array(key.utf8))
        }
        let stored = try Self.stored(device)[written]
        return HonestWrite(targetKey: written, value: stored, clock: try device.history.clock().rawValue)
    }

    /// Every value a device holds in its replicated targets, as stored bytes.
    static func stored(_ device: FuzzDevice) throws -> [TargetKey: [UInt8]] {
        var stored: [TargetKey: [UInt8]] = [:]
        var names = [ChecklistStore.recordsName, PushSDKStore.collectionName]
        if device.notes != nil { names.append("notes") }
        for name in names {
            for entry in try device.container.store.untypedCollection(named: name).collection.entries() {
                stored[TargetKey(target: .collection(name), key: entry.key.bytes)] = entry.value
            }
        }
        try device.container.store.read { tx in
            for key in try device.settings.storedKeys(in: tx) {
                if let value = try device.settings.storedValue(forKey: key, in: tx) {
                    stored[TargetKey(target: .defaults("settings"), key: Array(key.utf8))] = value.encoded()
                }
            }
        }
        return stored
    }

    // MARK: - The server's rows

    struct LogRow {
        var device: String
        var targetKey: TargetKey
        var value: [UInt8]?
        var clock: UInt64

        /// The group's log rows that name a target this test replicates.
        static func read(_ cluster: LocalPostgresCluster, group: String) throws -> [LogRow] {
            try rows(cluster, """
                SELECT device || '|' || kind || '|' || name || '|' || encode(key, 'hex') || '|' || coalesce(encode(value, 'hex'), '-') || '|' || hlc
                FROM kvsync_changes WHERE group_id = '\(group)' AND hlc >= 0 AND octet_length(device) < 300 AND octet_length(name) < 300
                  AND position('|' IN device) = 0 AND position('|' IN kind) = 0 AND position('|' IN name) = 0
                ORDER BY seq
                """)
        }

        /// The group's current state, by key (a delete as a nil value).
        static func readState(_ cluster: LocalPostgresCluster, group: String) throws -> [TargetKey: LogRow] {
            let rows = try rows(cluster, """
                SELECT device || '|' || kind || '|' || name || '|' || encode(key, 'hex') || '|' || coalesce(encode(value, 'hex'), '-') || '|' || hlc
                FROM kvsync_state WHERE group_id = '\(group)' AND hlc >= 0 AND octet_length(device) < 300 AND octet_length(name) < 300
                  AND position('|' IN device) = 0 AND position('|' IN kind) = 0 AND position('|' IN name) = 0
                """)
            return Dictionary(rows.map { ($0.targetKey, $0) }, uniquingKeysWith: { first, _ in first })
        }

        static func rows(_ cluster: LocalPostgresCluster, _ sql: String) throws -> [LogRow] {
            try cluster.psql(sql).split(separator: "\n").compactMap { line in
                let parts = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
                guard parts.count == 6, let key = Hex.decode(parts[3].utf8), let clock = UInt64(parts[5]),
                      let target = Mutation.Target(kindName: parts[1], name: parts[2]) else { return nil }
                return LogRow(device: parts[0], targetKey: TargetKey(target: target, key: key),
                              value: parts[4] == "-" ? nil : Hex.decode(parts[4].utf8), clock: clock)
            }
        }
    }
}

extension ServerStateFuzzTests.FuzzDevice {
    func declares(_ target: Mutation.Target) -> Bool {
        target != .collection("notes") || notes != nil
    }
}

/// Writes the random rows, and remembers what it planted (to tell planted changes from honest ones).
struct Planter {
    let group: String
    let cluster: LocalPostgresCluster
    var honestIDs: [String] = []
    /// Devices and values of the planted rows that name an honest device.
    var plantedRows: [(device: String, value: [UInt8]?)] = []
    /// Keys whose current-state row was planted.
    var stateTampered = Set<ServerStateFuzzTests.TargetKey>()
    /// The greatest number planted just past the sequence, to be passed before the final writes.
    var nearAhead: Int64 = 0

    /// Whether a quarantined change is one of the planted rows: any device id but the honest ones is
    /// the planter's; under an honest id, its value must be one planted under that id.
    func isPlanted(_ change: QuarantinedChange) -> Bool {
        guard honestIDs.contains(change.device) else { return true }
        return plantedRows.contains { $0.device == change.device && (!change.valueKept || $0.value == change.value) }
    }

    /// Bytes as a SQL literal; a long run of one byte as an expression (psql's argument has a limit).
    static func literal(_ bytes: [UInt8]?) -> String {
        guard let bytes else { return "NULL" }
        if bytes.count > 1_024, let first = bytes.first, bytes.allSatisfy({ $0 == first }) {
            return "decode(repeat('\(Hex.encode([first]))', \(bytes.count)), 'hex')"
        }
        return "'\\x" + Hex.encode(bytes) + "'::bytea"
    }

    static func text(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }

    /// A kind, name and key: mostly of a target the devices replicate (colliding with their keys).
    func makePlace(_ random: inout SplitMix64) -> (kind: String, name: String, key: [UInt8], typed: String) {
        let names = ["notes", ChecklistStore.recordsName, PushSDKStore.collectionName]
        var kind = "collection", name = names[Int(random.next() % 3)], typed = name
        switch random.next() % 20 {
        case 0: kind = "defaults"; name = "settings"; typed = "settings"
        case 1: kind = "defaults"; name = "settings"; typed = "settings"
        case 2: kind = ["bogus", "", "COLLECTION"][Int(random.next() % 3)]; typed = "none"
        case 3: name = ["bogus", "", Replication.catalogCollection, String(repeating: "n", count: 300)][Int(random.next() % 4)]; typed = "none"
        default: break
        }
        var key: [UInt8]
        switch random.next() % 10 {
        case 0: key = []
        case 1: key = (0..<(1 + Int(random.next() % 8))).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        case 2: key = Array(repeating: 0x6b, count: 600)
        default:
            switch typed {
            case "notes": key = ServerStateFuzzTests.noteKeys[Int(random.next() % 6)].encodedKey
            case ChecklistStore.recordsName: key = ServerStateFuzzTests.days[Int(random.next() % 5)].encodedKey
            case PushSDKStore.collectionName: key = ServerStateFuzzTests.inboxKeys[Int(random.next() % 4)].encodedKey
            case "settings": key = Array(ServerStateFuzzTests.settingKeys[Int(random.next() % 4)].utf8)
            default: key = Array("k\(random.next() % 6)".utf8)
            }
        }
        return (kind, name, key, typed)
    }

    /// A value for a row of `typed`: valid for it, valid CBOR of another type, not CBOR, a delete, or
    /// over the devices' size limit.
    func makeValue(for typed: String, key: [UInt8], _ random: inout SplitMix64) throws -> [UInt8]? {
        let encoder = CBOREncoder()
        switch random.next() % 10 {
        case 0: return nil
        case 1: return [0xff]
        case 2: return try encoder.encode(["day": 3, "scores": 4])
        case 3: return try encoder.encode(Int(random.next() % 1000))
        case 4: return Array(repeating: 0x61, count: ServerStateFuzzTests.maxValueBytes + 1 + Int(random.next() % 100))
        case 5: return try encoder.encode("planted \(random.next() % 1000)")
        default:
            switch typed {
            case "notes", "settings": return try encoder.encode("planted \(random.next() % 1000)")
            case ChecklistStore.recordsName:
                let day = (try? LogicalDay.decodeKey(key)) ?? ServerStateFuzzTests.days[0]
                return try encoder.encode(DailyRecord(day: day, scores: ["perceive.\(random.next() % 6)": 1 + Int(random.next() % 5)],
                                                      memos: ["perceive": "planted"]))
            case PushSDKStore.collectionName:
                let pair = (try? Pair<Date, UUID>.decodeKey(key)) ?? ServerStateFuzzTests.inboxKeys[0]
                return try encoder.encode(ReceivedNotification(id: pair.second, receivedAt: pair.first, status: .shown, payload: nil,
                                                               error: nil, rawJSON: "{\"planted\":true}"))
            default: return try encoder.encode(["x": 1])
            }
        }
    }

    func makeClock(_ random: inout SplitMix64) -> Int64 {
        let now = Int64(HybridTimestamp(date: Date()).rawValue)
        switch random.next() % 12 {
        case 0: return now + Int64(7_200_000) << 16          // two hours ahead
        case 1: return 0
        case 2: return -Int64(random.next() % 1000) - 1
        case 3: return Int64(bitPattern: random.next())
        default: return now + (Int64(random.next() % 60_000) - 30_000) << 16   // within 30 s
        }
    }

    func makeDevice(_ random: inout SplitMix64) -> (device: String, token: Int64) {
        switch random.next() % 20 {
        case 0..<4 where !honestIDs.isEmpty:
            // An honest device's id, with a token no replicator sends (negative).
            return (honestIDs[Int(random.next() % UInt64(honestIDs.count))], -Int64(random.next() % (1 << 40)) - 1)
        case 4: return ("", Int64(bitPattern: random.next()))
        case 5: return (String(repeating: "m", count: 300), Int64(bitPattern: random.next()))
        case 6: return ("dev-\(random.next() % 5)", Int64(random.next() % 100))
        default: return ("mallory", Int64(bitPattern: random.next()))
        }
    }

    /// One row in the log; whether one was written (a taken number or (device, token) skips it).
    mutating func plantRow(_ random: inout SplitMix64) async throws -> Bool {
        let (kind, name, key, typed) = makePlace(&random)
        let (device, token) = makeDevice(&random)
        let value = try makeValue(for: typed, key: key, &random)
        let clock = makeClock(&random)
        let sequence: String
        let roll = random.next() % 12
        switch roll {
        case 0..<4: sequence = "nextval('kvsync_changes_seq_seq')"
        case 4, 5:
            // Just past the sequence: the numbers the next pushes draw.
            sequence = "(SELECT last_value FROM kvsync_changes_seq_seq) + \(1 + random.next() % 20)"
        case 6: sequence = "coalesce((SELECT last_seq FROM kvsync_groups WHERE group_id = '\(group)'), 0) + \(1 + random.next() % 1_000_000) + (1::bigint << 40)"
        case 7: sequence = "9223372036854775807 - \(random.next() % 3)"
        case 8: sequence = "-\(random.next() % 1000)"
        case 9: sequence = "greatest(1, coalesce((SELECT last_seq FROM kvsync_groups WHERE group_id = '\(group)'), 0) - \(random.next() % 50))"
        default:
            // A copy of an honest row under another number, as mallory's.
            let copyToken = Int64(bitPattern: random.next())
            _ = try await offPool { [cluster, group] in
                try cluster.psql("""
                    INSERT INTO kvsync_changes (seq, group_id, device, token, kind, name, key, value, hlc, base)
                    SELECT nextval('kvsync_changes_seq_seq'), group_id, 'mallory', \(copyToken), kind, name, key, value, hlc, base
                    FROM kvsync_changes WHERE group_id = '\(group)' AND device <> 'mallory' ORDER BY random() LIMIT 1
                    ON CONFLICT DO NOTHING
                    """)
            }
            return true
        }
        let base = Int64(random.next() % 100)
        let written = try await offPool { [cluster, group] in
            try cluster.psql("""
                WITH planted AS (
                    INSERT INTO kvsync_changes (seq, group_id, device, token, kind, name, key, value, hlc, base)
                    VALUES (\(sequence), '\(group)', \(Self.text(device)), \(token), \(Self.text(kind)), \(Self.text(name)),
                            \(Self.literal(key)), \(Self.literal(value)), \(clock), \(base))
                    ON CONFLICT DO NOTHING RETURNING seq)
                SELECT coalesce(max(seq), 0) FROM planted
                """).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        guard let number = Int64(written), number != 0 else { return false }
        if honestIDs.contains(device) { plantedRows.append((device, value)) }
        if roll == 4 || roll == 5 { nearAhead = max(nearAhead, number) }
        return true
    }

    /// A current-state row of any version (an update of the key's row, or a new one).
    mutating func plantState(_ random: inout SplitMix64) async throws -> Bool {
        let (kind, name, key, typed) = makePlace(&random)
        let (device, token) = makeDevice(&random)
        let value = try makeValue(for: typed, key: key, &random)
        let clock = makeClock(&random)
        let version: String = switch random.next() % 4 {
        case 0: "coalesce((SELECT last_seq FROM kvsync_groups WHERE group_id = '\(group)'), 0) + \(1 + random.next() % 1000)"
        case 1: "-\(random.next() % 100)"
        case 2: "\(Int64(bitPattern: random.next()))"
        default: "greatest(1, coalesce((SELECT last_seq FROM kvsync_groups WHERE group_id = '\(group)'), 0) - \(random.next() % 20))"
        }
        _ = try await offPool { [cluster, group] in
            try cluster.psql("""
                INSERT INTO kvsync_state (group_id, kind, name, key, value, version, hlc, device, token)
                VALUES ('\(group)', \(Self.text(kind)), \(Self.text(name)), \(Self.literal(key)), \(Self.literal(value)), \(version),
                        \(clock), \(Self.text(device)), \(token))
                ON CONFLICT (group_id, kind, name, key) DO UPDATE SET value = EXCLUDED.value, version = EXCLUDED.version,
                    hlc = EXCLUDED.hlc, device = EXCLUDED.device, token = EXCLUDED.token
                """)
        }
        if honestIDs.contains(device) { plantedRows.append((device, value)) }
        if let target = Mutation.Target(kindName: kind, name: name) { stateTampered.insert(.init(target: target, key: key)) }
        return true
    }

    /// The log's end moved back, the pruning horizon moved forward, or the server's id changed.
    func moveGroup(_ random: inout SplitMix64) async throws {
        let statement: String = switch random.next() % 4 {
        case 0: "UPDATE kvsync_groups SET last_seq = greatest(0, last_seq - \(1 + random.next() % 10)) WHERE group_id = '\(group)'"
        case 1: "UPDATE kvsync_groups SET pruned_through = last_seq - \(random.next() % 5) WHERE group_id = '\(group)'"
        case 2: "UPDATE kvsync_groups SET pruned_through = last_seq + \(1 + random.next() % 100) WHERE group_id = '\(group)'"
        default: "UPDATE kvsync_schema SET server_id = gen_random_uuid()"
        }
        _ = try await offPool { [cluster] in try cluster.psql(statement) }
    }

    /// Moves the sequence past the rows planted just ahead of it, so that they join the log before the
    /// final writes (as they would once pushes drew that far).
    func passNearRows() async throws {
        guard nearAhead > 0 else { return }
        _ = try await offPool { [cluster] in
            try cluster.psql("SELECT setval('kvsync_changes_seq_seq', greatest(\(nearAhead), (SELECT last_value FROM kvsync_changes_seq_seq)))")
        }
    }
}
#endif
