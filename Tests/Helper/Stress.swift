// kvtest-helper commands for the reliability (fault and stress) tests in Tests/ReliabilityTests.
// main.swift's `default:` branch calls `stressCommand` before giving up on an unknown command.
// Every command prints `key=value` summary lines that the tests parse (see `summaryFields`).
import Foundation
import KVStore
@_spi(Testing) import SyncKit
import TestSupport
import Workloads
#if canImport(Glibc)
import Glibc
#endif

/// Sets the crash-test writer's ``SharedPhase`` byte as LMDB reaches each point of the commit.
private final class PhaseObserver: WriteObserver, @unchecked Sendable {
    let phase: SharedPhase
    init(phase: SharedPhase) { self.phase = phase }
    func transactionWillCommit(_ transaction: WriteTransaction) throws {
        phase.value = WriterPhase.committing.rawValue
    }
    func transactionDidCommit(_ commit: CommittedTransaction) {
        phase.value = WriterPhase.committedNotAcknowledged.rawValue
    }
}

private func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

private func microseconds(since start: UInt64) -> Double { Double(monotonicNow() - start) / 1000 }

private func openContainer(_ root: String, _ group: String, readOnly: Bool = false, mapSize: Int? = nil,
                           staleReaderCheckInterval: Duration?? = nil, durability: Durability = .durable) throws -> SharedContainer {
    var options = SharedContainer.Options()
    options.store.durability = durability
    options.readOnly = readOnly
    if let mapSize { options.store.mapSize = mapSize }
    if let staleReaderCheckInterval { options.store.staleReaderCheckInterval = staleReaderCheckInterval }
    return try SharedContainer(groupIdentifier: group, root: root, options: options)
}

/// Runs the reliability commands; `false` for a command it does not know.
func stressCommand(_ command: String, root: String, group: String, rest: [String]) throws -> Bool {
    switch command {
    case "stress-writer":
        // stress-writer ROOT GROUP PHASEFILE RECORDS SEED [MODE]: commits transaction after transaction,
        // each putting RECORDS checksummed StressRecords into "ledger" and one StressLogEntry into the
        // history-enabled "log", until killed, with durability MODE (default durable). Prints "flags F"
        // (mdb_env_get_flags), "ready NEXTSEQ", then "acked SEQ" after each commit returns. The phase file says where it was when it died.
        let phase = try SharedPhase(path: rest[0])
        let count = Int(rest[1])!
        var rng = SplitMix64(seed: UInt64(rest[2])!)
        guard let mode = rest.count > 3 ? Durability(rawValue: rest[3]) : .durable else { fail("unknown durability \(rest[3])") }
        let container = try openContainer(root, group, durability: mode)
        _ = try History.attach(to: container)
        let ledger = try container.store.collection("ledger", key: Int.self, value: StressRecord.self)
        let log = try container.store.collection("log", key: Int.self, value: StressLogEntry.self)
        container.store.addObserver(PhaseObserver(phase: phase))
        var seq = try container.store.read { tx in try log.last(in: tx).map { $0.key + 1 } ?? 0 }
        // The LMDB flags the mode gave this process, for the test to check.
        say("flags \(try container.store.environmentFlags)")
        say("ready \(seq)")
        while true {
            phase.value = WriterPhase.beforeBegin.rawValue
            let records = (0..<count).map { index -> StressRecord in
                // Mostly small values, now and then one that needs overflow pages.
                let size = rng.next() % 16 == 0 ? 2_000 + Int(rng.next() % 4_000) : Int(rng.next() % 400)
                return StressRecord(seq: seq, index: index, count: count,
                                    payload: (0..<size).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
            }
            let dwell = records.map { _ in rng.next() % 4 == 0 }
            try container.store.write(author: "writer") { tx in
                phase.value = WriterPhase.inTransaction.rawValue
                var checksum: UInt64 = 0
                for (record, pause) in zip(records, dwell) {
                    try ledger.put(record, forKey: StressRecord.key(seq: seq, index: record.index), in: tx)
                    checksum ^= record.checksum
                    // Linger now and then, so that kills also land mid-transaction.
                    if pause { usleep(150) }
                }
                try log.put(StressLogEntry(seq: seq, count: count, checksum: checksum), forKey: seq, in: tx)
            }
            say("acked \(seq)")
            seq += 1
        }

    case "churn-writer":
        // churn-writer ROOT GROUP STOPFILE INTERVAL|off: rewrites the same 32 keys (512-byte values)
        // every millisecond or so, with the store's stale-reader check every INTERVAL seconds (or
        // never), until STOPFILE exists. Prints "ready", then "pages USED FILEBYTES STALE T_NS" every
        // 20 commits, where STALE counts reader slots of dead processes.
        let interval: Duration? = rest[1] == "off" ? nil : .milliseconds(Int(Double(rest[1])! * 1000))
        // A map large enough that it never fills up here (filling it also clears stale slots).
        let container = try openContainer(root, group, mapSize: 1 << 30, staleReaderCheckInterval: .some(interval))
        let churn = try container.store.collection("churn", key: Int.self, value: [UInt8].self)
        var rng = SplitMix64(seed: 7)
        var commits = 0
        say("ready")
        while !exists(rest[0]) {
            try container.store.write { tx in
                for key in 0..<32 {
                    try churn.put((0..<512).map { _ in UInt8(truncatingIfNeeded: rng.next()) }, forKey: key, in: tx)
                }
            }
            commits += 1
            if commits % 20 == 0 {
                let info = try container.store.environmentInfo()
                var file = stat()
                stat(container.storeDirectory + "/data.mdb", &file)
                let stale = try container.store.readerSlots().filter { !$0.processAlive }.count
                say("pages \(info.usedPages) \(file.st_size) \(stale) \(monotonicNow())")
            }
            usleep(1_000)
        }
        say("summary commits=\(commits)")

    case "contention-writer":
        // contention-writer ROOT GROUP STOPFILE SELFSTOPFILE FEEDEVERY: transactions that keep
        // ledgerMeta (count, sum, seq) in step with "ledger", set the four "stamps" to seq and put
        // seq into the history-enabled "events"; publishes the "live" feed every FEEDEVERY commits.
        // When SELFSTOPFILE appears, removes it, prints "self-stopped" and stops itself (SIGSTOP)
        // in the middle of a transaction, holding the write lock. Prints "ready", then a summary.
        let container = try openContainer(root, group)
        _ = try History.attach(to: container)
        let store = container.store
        let ledger = try store.collection("ledger", key: Int.self, value: Int.self)
        let meta = try store.collection("ledgerMeta", key: String.self, value: Int.self)
        let stamps = try store.collection("stamps", key: Int.self, value: Int.self)
        let events = try store.collection("events", key: Int.self, value: Int.self)
        let feed = try WidgetFeed<TestFeedPayload>(name: "live", container: container)
        let feedEvery = Int(rest[2])!
        var rng = SplitMix64(seed: UInt64(getpid()))
        var seq = try meta.get("seq") ?? 0
        var (commits, feeds) = (0, 0)
        var latencies: [Double] = []
        say("ready")
        let start = monotonicNow()
        while !exists(rest[0]) {
            let selfStop = exists(rest[1])
            let began = monotonicNow()
            try store.write(author: "app") { tx in
                var count = try meta.get("count", in: tx) ?? 0
                var sum = try meta.get("sum", in: tx) ?? 0
                let changes = 1 + Int(rng.next() % 8)
                for change in 0..<changes {
                    let key = Int(rng.next() % 256)
                    let old = try ledger.get(key, in: tx)
                    let value = Int(rng.next() % 2001) - 1000
                    try ledger.put(value, forKey: key, in: tx)
                    if old == nil { count += 1 }
                    sum += value - (old ?? 0)
                    if selfStop && change == changes / 2 && unlink(rest[1]) == 0 {
                        say("self-stopped")
                        raise(SIGSTOP)
                    }
                }
                for stamp in 0..<4 { try stamps.put(seq + 1, forKey: stamp, in: tx) }
                try events.put(seq + 1, forKey: seq + 1, in: tx)
                try meta.put(count, forKey: "count", in: tx)
                try meta.put(sum, forKey: "sum", in: tx)
                try meta.put(seq + 1, forKey: "seq", in: tx)
            }
            latencies.append(microseconds(since: began))
            seq += 1
            commits += 1
            if seq % feedEvery == 0 {
                try feed.publish(TestFeedPayload(sequence: seq, size: 2048))
                feeds += 1
            }
        }
        let seconds = Double(monotonicNow() - start) / 1e9
        let p = Percentiles(latencies)
        say("summary commits=\(commits) seconds=\(seconds) feeds=\(feeds) lastSeq=\(seq) "
            + "p50us=\(Int(p.p50)) p99us=\(Int(p.p99)) maxus=\(Int(p.max))")

    case "contention-reader":
        // contention-reader ROOT GROUP STOPFILE: read transactions until STOPFILE exists, each checking
        // the writer's invariants (ledger count and sum match ledgerMeta, all four stamps equal seq)
        // and that seq never goes back (reads of the still empty store are not counted). Prints
        // "tick NOW_NS READS MAXUS" every 100 ms (MAXUS: the slowest read since the last tick),
        // "inconsistent …" and "regression …" for the first problems, and a summary.
        let container = try openContainer(root, group, readOnly: true)
        let store = container.store
        let ledger = try store.collection("ledger", key: Int.self, value: Int.self)
        let meta = try store.collection("ledgerMeta", key: String.self, value: Int.self)
        let stamps = try store.collection("stamps", key: Int.self, value: Int.self)
        var (reads, inconsistent, regressions, lastSeq, lastTransaction) = (0, 0, 0, 0, 0)
        var latencies: [Double] = []
        var tickMax = 0.0
        var lastTick = monotonicNow()
        say("ready")
        while !exists(rest[0]) {
            let began = monotonicNow()
            let (seq, transaction, problem) = try store.read { tx -> (Int, Int, String?) in
                var (count, sum) = (0, 0)
                try ledger.forEach(in: tx) { _, value in count += 1; sum += value; return true }
                let seq = try meta.get("seq", in: tx) ?? 0
                let expected = (try meta.get("count", in: tx) ?? 0, try meta.get("sum", in: tx) ?? 0)
                let seen = try stamps.entries(in: tx).map(\.value)
                if (count, sum) != expected {
                    return (seq, tx.transactionID, "seq \(seq): ledger holds \(count) entries summing to \(sum), meta says \(expected)")
                }
                if seen != (seq == 0 ? [] : [seq, seq, seq, seq]) {
                    return (seq, tx.transactionID, "seq \(seq): stamps \(seen)")
                }
                return (seq, tx.transactionID, nil)
            }
            // Until the writer's first commit the store is empty: such reads are not counted.
            if seq == 0 && problem == nil { usleep(1_000); continue }
            let elapsed = microseconds(since: began)
            latencies.append(elapsed)
            tickMax = max(tickMax, elapsed)
            reads += 1
            if let problem {
                inconsistent += 1
                if inconsistent <= 5 { say("inconsistent \(problem)") }
            }
            if seq < lastSeq || transaction < lastTransaction {
                regressions += 1
                if regressions <= 5 {
                    say("regression read \(reads): seq \(seq) after \(lastSeq), transaction \(transaction) after \(lastTransaction)")
                }
            }
            lastSeq = max(lastSeq, seq)
            lastTransaction = max(lastTransaction, transaction)
            let now = monotonicNow()
            if now - lastTick >= 100_000_000 {
                say("tick \(now) \(reads) \(Int(tickMax))")
                tickMax = 0
                lastTick = now
            }
        }
        let p = Percentiles(latencies)
        say("summary reads=\(reads) inconsistent=\(inconsistent) regressions=\(regressions) lastSeq=\(lastSeq) "
            + "p50us=\(Int(p.p50)) p99us=\(Int(p.p99)) maxus=\(Int(p.max))")

    case "contention-consumer":
        // contention-consumer ROOT GROUP NAME STOPFILE: a registered history consumer that reads and
        // acknowledges, checking that tokens come one after the other and that each entry's key (the
        // writer's seq) equals its token; once STOPFILE exists it drains what is left. Prints a summary.
        let container = try openContainer(root, group)
        let history = try History.attach(to: container)
        let consumer = try history.consumer(named: rest[0], startingAt: .oldest)
        var last = try consumer.token()
        var (entries, gaps, duplicates, mismatches, acks) = (0, 0, 0, 0, 0)
        say("ready \(last)")
        while true {
            let stopping = exists(rest[1])
            guard case .changes(let transactions, let next) = try consumer.pendingChanges(
                matching: HistoryFilter(transactionLimit: 50)) else {
                throw SyncError.unknownConsumer("\(rest[0]) expired")
            }
            for entry in transactions.flatMap(\.entries) {
                entries += 1
                if entry.token.rawValue > last.rawValue + 1 { gaps += 1 }
                if entry.token <= last { duplicates += 1 }
                if (try? Int.decodeKey(entry.key)) != Int(entry.token.rawValue) { mismatches += 1 }
                last = entry.token
            }
            if transactions.isEmpty {
                if stopping { break }
                usleep(2_000)
                continue
            }
            try consumer.acknowledge(through: next)
            acks += 1
        }
        say("summary entries=\(entries) last=\(last) gaps=\(gaps) duplicates=\(duplicates) "
            + "mismatches=\(mismatches) acks=\(acks)")

    case "feed-watch":
        // feed-watch ROOT GROUP NAME STOPFILE: a widget reading the feed NAME until STOPFILE exists:
        // counts reads, torn or invalid files, generations going back and inconsistent payloads.
        let feed = try WidgetFeed<TestFeedPayload>(name: rest[0], groupIdentifier: group, root: root)
        var (reads, invalid, decreasing, inconsistent, notPublished) = (0, 0, 0, 0, 0)
        var last: UInt64 = 0
        say("ready")
        while !exists(rest[1]) {
            do {
                guard let published = try feed.readIfPublished() else { notPublished += 1; usleep(1_000); continue }
                reads += 1
                if published.generation < last { decreasing += 1 }
                if !published.payload.isConsistent { inconsistent += 1 }
                last = max(last, published.generation)
            } catch {
                invalid += 1
                if invalid <= 5 { say("invalid \(error)") }
            }
        }
        say("summary reads=\(reads) invalid=\(invalid) decreasing=\(decreasing) inconsistent=\(inconsistent) "
            + "notPublished=\(notPublished) last=\(last)")

    case "hold-write":
        // hold-write ROOT GROUP: begins a write transaction, puts one value, says "writing" and keeps
        // the write lock until killed.
        let container = try openContainer(root, group)
        let held = try container.store.collection("held", key: Int.self, value: Int.self)
        try container.store.write { tx in
            try held.put(1, forKey: 1, in: tx)
            say("writing")
            while true { sleep(60) }
        }

    case "rw-open-read":
        // rw-open-read ROOT GROUP: opens the container read-write, as an app process does by default,
        // and reads ledgerMeta's seq. Prints "read seq=N ms=T" (T: open and read, in milliseconds).
        let began = monotonicNow()
        let container = try openContainer(root, group)
        let meta = try container.store.collection("ledgerMeta", key: String.self, value: Int.self)
        let seq = try meta.get("seq") ?? 0
        say("read seq=\(seq) ms=\(Double(monotonicNow() - began) / 1e6)")

    case "fire-exporter":
        // fire-exporter ROOT GROUP: exports snapshots of the (read-only) store one after another, and
        // prunes to the newest three every fourth time, until killed. Prints "exported G" and "pruned".
        let container = try openContainer(root, group, readOnly: true)
        let snapshots = try Snapshots(container: container)
        var exports = 0
        while true {
            let entry = try snapshots.export(from: container.store)
            exports += 1
            say("exported \(entry.generation)")
            if exports % 4 == 0 {
                try snapshots.prune(keep: 3)
                say("pruned")
            }
        }

    case "fire-publisher":
        // fire-publisher ROOT GROUP NAME SIZE: publishes TestFeedPayloads of SIZE padding bytes one
        // after another until killed. Prints "published G".
        let feed = try WidgetFeed<TestFeedPayload>(name: rest[0], groupIdentifier: group, root: root)
        var sequence = Int(getpid()) % 1000
        while true {
            sequence += 1
            say("published \(try feed.publish(TestFeedPayload(sequence: sequence, size: Int(rest[1])!)))")
        }

    case "fire-widget":
        // fire-widget ROOT GROUP NAME STOPFILE: a widget under fire, until STOPFILE exists: reads the
        // feed NAME (torn, inconsistent, going back) and opens the latest snapshot with its SHA-256
        // checked, then checks the invariant writer's ledger in it. A snapshot pruned between reading
        // the manifest and opening it is counted apart (the manifest no longer lists it).
        let feed = try WidgetFeed<TestFeedPayload>(name: rest[0], groupIdentifier: group, root: root)
        var (feedReads, feedTorn, feedBack, feedInconsistent) = (0, 0, 0, 0)
        var (snapshotReads, snapshotTorn, prunedUnderUs, noSnapshotYet, inconsistent) = (0, 0, 0, 0, 0)
        var lastFeed: UInt64 = 0
        var lastGeneration = 0
        func note(_ text: String, _ count: Int) { if count <= 5 { say(text) } }
        say("ready")
        while !exists(rest[1]) {
            do {
                if let published = try feed.readIfPublished() {
                    feedReads += 1
                    if published.generation < lastFeed { feedBack += 1 }
                    if !published.payload.isConsistent { feedInconsistent += 1 }
                    lastFeed = max(lastFeed, published.generation)
                }
            } catch {
                feedTorn += 1
                note("torn feed: \(error)", feedTorn)
            }
            let snapshots: Snapshots
            do {
                snapshots = try Snapshots(groupIdentifier: group, root: root)
            } catch {
                noSnapshotYet += 1
                usleep(1_000)
                continue
            }
            guard let entry = try snapshots.latest() else { noSnapshotYet += 1; usleep(1_000); continue }
            do {
                let store = try snapshots.open(entry, verifying: true)
                let ledger = try store.collection("ledger", key: Int.self, value: Int.self)
                let meta = try store.collection("ledgerMeta", key: String.self, value: Int.self)
                let problem = try store.read { tx -> String? in
                    var (count, sum) = (0, 0)
                    try ledger.forEach(in: tx) { _, value in count += 1; sum += value; return true }
                    let expected = (try meta.get("count", in: tx) ?? 0, try meta.get("sum", in: tx) ?? 0)
                    return (count, sum) == expected ? nil : "generation \(entry.generation): \(count), \(sum) vs \(expected)"
                }
                snapshotReads += 1
                if entry.generation < lastGeneration { snapshotTorn += 1; note("generation went back", snapshotTorn) }
                lastGeneration = max(lastGeneration, entry.generation)
                if let problem { inconsistent += 1; note("inconsistent snapshot \(problem)", inconsistent) }
            } catch {
                if try snapshots.list().contains(where: { $0.generation == entry.generation }) {
                    snapshotTorn += 1
                    note("torn snapshot \(entry.generation): \(error)", snapshotTorn)
                } else {
                    prunedUnderUs += 1
                }
            }
        }
        say("summary feedReads=\(feedReads) feedTorn=\(feedTorn) feedBack=\(feedBack) feedInconsistent=\(feedInconsistent) "
            + "snapshotReads=\(snapshotReads) snapshotTorn=\(snapshotTorn) inconsistent=\(inconsistent) "
            + "prunedUnderUs=\(prunedUnderUs) noSnapshotYet=\(noSnapshotYet) lastGeneration=\(lastGeneration)")

    case "map-actor":
        // map-actor ROOT GROUP ROLE STOPFILE: one process of the map-growth test, opened with a 64 KiB
        // map. grower: puts 256 KiB blobs into "blobs", one per transaction, until STOPFILE exists;
        // writer: small puts into "small"; reader (read-only): reads the blobs and checks them; joiner:
        // opens, writes one small value, reads every blob and exits. Each prints "map SIZE" whenever
        // its map size changes and a summary: ops, the sizes seen, shrinks, bad blobs, final size.
        let role = rest[0], stop = rest[1]
        let container = try openContainer(root, group, readOnly: role == "reader", mapSize: 64 << 10)
        let store = container.store
        let blobs = try store.collection("blobs", key: Int.self, value: [UInt8].self)
        let small = try store.collection("small", key: Int.self, value: [UInt8].self)
        var sizes: [Int] = []
        var (ops, bad, shrinks) = (0, 0, 0)
        func observe() throws {
            let size = try store.environmentInfo().mapSize
            if let last = sizes.last, size < last { shrinks += 1 }
            if sizes.last != size { sizes.append(size); say("map \(size)") }
        }
        func check(_ key: Int, _ blob: [UInt8]) {
            let expected = mapBlob(key)
            if blob.count != expected.count || blob.first != expected.first || blob.last != expected.last
                || stride(from: 0, to: blob.count, by: 4093).contains(where: { blob[$0] != expected[$0] }) {
                bad += 1
            }
        }
        func readAll() throws {
            try store.read { tx in
                try blobs.forEach(in: tx) { key, blob in check(key, blob); return true }
            }
        }
        try observe()
        say("ready")
        switch role {
        case "grower":
            var key = try store.read { tx in try blobs.last(in: tx).map { $0.key + 1 } ?? 0 }
            while !exists(stop) {
                try blobs.put(mapBlob(key), forKey: key)
                key += 1
                ops += 1
                try observe()
            }
        case "writer":
            var key = 0
            while !exists(stop) {
                try small.put([UInt8](repeating: UInt8(truncatingIfNeeded: key), count: 100), forKey: key)
                key += 1
                ops += 1
                try observe()
                usleep(500)
            }
        case "reader":
            while !exists(stop) {
                try readAll()
                ops += 1
                try observe()
                usleep(2_000)
            }
        default:  // joiner
            try small.put([1], forKey: -Int(getpid()))
            try readAll()
            ops += 1
            try observe()
        }
        if role != "joiner" {
            // Whatever the others grew to: read it all once more.
            try readAll()
            try observe()
        }
        say("summary role=\(role) ops=\(ops) sizes=\(sizes.map(String.init).joined(separator: ",")) "
            + "shrinks=\(shrinks) bad=\(bad) final=\(sizes.last ?? 0)")

    case "disk-full":
        // disk-full ROOT GROUP FILLER KVTOOL: run on a small file system. Publishes a feed and a
        // snapshot, writes FILLER (64 KiB) and then commits checksummed records (4 KiB, history
        // enabled) until a commit fails; tries more commits, a feed publication and a snapshot export
        // on the full disk; checks every earlier commit and runs `kvtool check`; deletes FILLER and
        // commits again. Prints one `key=value` line per step.
        let container = try openContainer(root, group)
        let history = try History.attach(to: container)
        let records = try container.store.collection("records", key: Int.self, value: StressRecord.self)
        try history.enable(.collection("records"))
        let feed = try WidgetFeed<TestFeedPayload>(name: "full", container: container)
        let snapshots = try Snapshots(container: container)
        try feed.publish(TestFeedPayload(sequence: 1, size: 128))
        try snapshots.export(from: container.store)
        let filler = rest[0], kvtool = rest[1]
        try Data(repeating: 0xAB, count: 64 << 10).write(to: URL(fileURLWithPath: filler))
        var rng = SplitMix64(seed: 99)
        func record(_ seq: Int) -> StressRecord {
            StressRecord(seq: seq, index: 0, count: 1, payload: (0..<4096).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
        }
        func describe(_ error: any Error) -> String {
            let type = String(describing: Swift.type(of: error))
            if let lmdb = error as? LMDBError { return "type=\(type) code=\(lmdb.rawValue) text=\"\(lmdb)\"" }
            return "type=\(type) text=\"\(error)\""
        }
        func verify(_ label: String, through last: Int) throws {
            let (ok, bad) = try container.store.read { tx -> (Int, Int) in
                var (ok, bad) = (0, 0)
                for seq in 0..<(last + 1) {
                    if let stored = try records.get(seq, in: tx), stored.seq == seq, stored.isIntact { ok += 1 } else { bad += 1 }
                }
                return (ok, bad)
            }
            let problems = try history.checkIntegrity().count
            let check = Process()
            check.executableURL = URL(fileURLWithPath: kvtool)
            check.arguments = ["check", "--root", root, "--group", group]
            check.standardOutput = FileHandle.nullDevice
            check.standardError = FileHandle.nullDevice
            try check.run()
            // A deadline, so that a hung check fails the test (check=timeout) instead of hanging it.
            let deadline = monotonicNow() + 120_000_000_000
            while check.isRunning && monotonicNow() < deadline { usleep(10_000) }
            let timedOut = check.isRunning
            if timedOut { kill(check.processIdentifier, SIGKILL) }
            check.waitUntilExit()
            say("\(label) ok=\(ok) bad=\(bad) history=\(problems) check=\(timedOut ? "timeout" : String(check.terminationStatus))")
        }

        var seq = 0
        var firstError: (any Error)?
        while firstError == nil && seq < 100_000 {
            do {
                let next = record(seq)
                try container.store.write(author: "app") { tx in try records.put(next, forKey: seq, in: tx) }
                seq += 1
            } catch {
                firstError = error
            }
        }
        let acked = seq - 1
        let used = try container.store.environmentInfo().usedPages
        say("filled commits=\(seq) pages=\(used)")
        guard let firstError else { say("error none"); return true }
        say("error \(describe(firstError))")
        // More commits on the full disk: each fails the same clean way.
        var later: [String] = []
        for attempt in 0..<5 {
            do {
                let next = record(seq + attempt)
                try container.store.write(author: "app") { tx in try records.put(next, forKey: seq + attempt, in: tx) }
                later.append("committed")
            } catch {
                later.append(String(describing: Swift.type(of: error)) + ((error as? LMDBError).map { ":\($0.rawValue)" } ?? ""))
            }
        }
        say("later \(later.joined(separator: ","))")
        do {
            let generation = try feed.publish(TestFeedPayload(sequence: 2, size: 256 << 10))
            say("feed published=\(generation)")
        } catch {
            say("feed \(describe(error))")
        }
        do {
            let entry = try snapshots.export(from: container.store)
            say("snapshot exported=\(entry.generation)")
        } catch {
            say("snapshot \(describe(error))")
        }
        let leftovers = try FileManager.default.subpathsOfDirectory(atPath: container.snapshotsDirectory)
            .filter { $0.contains(".kvtmp-") }
        say("temporary files=\(leftovers.count) \(leftovers.joined(separator: ","))")
        let published = try feed.read()
        say("feed-read generation=\(published.generation) consistent=\(published.payload.isConsistent)")
        try verify("readable", through: acked)

        try FileManager.default.removeItem(atPath: filler)
        var resumed = 0
        // Committed only if the disk-full attempts above did not (a later one may have fitted).
        var next = try container.store.read { tx in try records.last(in: tx).map { $0.key + 1 } ?? 0 }
        for _ in 0..<8 {
            let value = record(next)
            try container.store.write(author: "app") { tx in try records.put(value, forKey: next, in: tx) }
            next += 1
            resumed += 1
        }
        say("resumed commits=\(resumed)")
        try verify("after", through: next - 1)

    default:
        return false
    }
    return true
}

/// The blob the map-growth test stores at `key`: 256 KiB whose bytes depend on the key and position.
private func mapBlob(_ key: Int) -> [UInt8] {
    var blob = [UInt8](repeating: 0, count: 256 << 10)
    let seed = UInt8(truncatingIfNeeded: key &* 37)
    blob.withUnsafeMutableBufferPointer { buffer in
        for i in stride(from: 0, to: buffer.count, by: 1) { buffer[i] = seed &+ UInt8(truncatingIfNeeded: i >> 6) }
    }
    return blob
}
