// kvtest-helper commands for the durability tests (Tests/ReliabilityTests/DurabilityFlagsTests.swift,
// PowerCutTests.swift): a second process that reports the environment flags it got, the recorded
// writer and publisher the power-cut simulator (Tests/PowerCut) watches, and the checkers that open
// each rebuilt power-cut state.
import Foundation
import KVStore
import SyncKit
import TestSupport
import Workloads
#if canImport(Glibc)
import Glibc
#endif

private func durability(_ name: String) -> Durability {
    guard let mode = Durability(rawValue: name) else { fail("unknown durability \(name)") }
    return mode
}

private func openContainer(_ root: String, _ group: String, _ mode: Durability = .durable) throws -> SharedContainer {
    var options = SharedContainer.Options()
    options.store.durability = mode
    return try SharedContainer(groupIdentifier: group, root: root, options: options)
}

/// One line, no newlines in it.
private func oneLine(_ error: any Error) -> String {
    String(describing: error).replacingOccurrences(of: "\n", with: " ")
}

/// Records per transaction of `powercut-writer`.
private let powerCutRecords = 3

/// Runs the durability commands; `false` for a command it does not know.
func powerCutCommand(_ command: String, root: String, group: String, rest: [String]) throws -> Bool {
    switch command {
    case "env-flags":
        // env-flags ROOT GROUP MODE: opens the container with durability MODE and prints
        // "flags N", N being what mdb_env_get_flags reports for this process's environment.
        let container = try openContainer(root, group, durability(rest[0]))
        say("flags \(try container.store.environmentFlags)")

    case "powercut-writer":
        // powercut-writer ROOT GROUP MODE COUNT SYNCEVERY: COUNT transactions with durability MODE,
        // each putting 3 checksummed StressRecords into "ledger" and one StressLogEntry into "log"
        // (as stress-writer), resuming after the last one in the store. Prints "acked SEQ" after
        // each commit returns; with SYNCEVERY > 0, calls Store.sync() after every SYNCEVERY-th
        // commit and prints "synced SEQ" when it returns. Prints "done SEQ" at the end.
        let mode = durability(rest[0])
        let count = Int(rest[1])!, syncEvery = Int(rest[2])!
        let container = try openContainer(root, group, mode)
        let ledger = try container.store.collection("ledger", key: Int.self, value: StressRecord.self)
        let log = try container.store.collection("log", key: Int.self, value: StressLogEntry.self)
        var seq = try container.store.read { tx in try log.last(in: tx).map { $0.key + 1 } ?? 0 }
        var rng = SplitMix64(seed: UInt64(seq) &+ 11)
        for done in 1...max(1, count) {
            let records = (0..<powerCutRecords).map { index -> StressRecord in
                // Mostly small values, now and then one on overflow pages.
                let size = rng.next() % 8 == 0 ? 5_000 + Int(rng.next() % 3_000) : 50 + Int(rng.next() % 300)
                return StressRecord(seq: seq, index: index, count: powerCutRecords,
                                    payload: (0..<size).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
            }
            try container.store.write { tx in
                var checksum: UInt64 = 0
                for record in records {
                    try ledger.put(record, forKey: StressRecord.key(seq: seq, index: record.index), in: tx)
                    checksum ^= record.checksum
                }
                try log.put(StressLogEntry(seq: seq, count: powerCutRecords, checksum: checksum), forKey: seq, in: tx)
            }
            say("acked \(seq)")
            if syncEvery > 0 && done % syncEvery == 0 {
                try container.store.sync()
                say("synced \(seq)")
            }
            seq += 1
        }
        say("done \(seq - 1)")

    case "powercut-check":
        // powercut-check GROUP STATE…: (ROOT is unused: pass "-") opens the container in each STATE
        // directory read-write, as an app after a reboot, and checks what powercut-writer wrote:
        // "state STATE last=SEQ problems=N [first problem]", or "state STATE error TEXT" when opening
        // or reading throws. A state that crashes the process prints nothing: the test sees which.
        for state in rest {
            do {
                let container = try openContainer(state, group)
                let ledger = try container.store.collection("ledger", key: Int.self, value: StressRecord.self)
                let log = try container.store.collection("log", key: Int.self, value: StressLogEntry.self)
                let (last, problems) = try container.store.read { tx -> (Int, [String]) in
                    var problems: [String] = []
                    let last = try log.last(in: tx)?.key ?? -1
                    if try log.count(in: tx) != last + 1 { problems.append("log-count") }
                    if try ledger.count(in: tx) != powerCutRecords * (last + 1) { problems.append("ledger-count") }
                    var seen = 0
                    try ledger.forEach(in: tx) { key, record in
                        if !record.isIntact || StressRecord.key(seq: record.seq, index: record.index) != key || record.seq > last {
                            problems.append("record-\(key)")
                        }
                        seen += 1
                        return true
                    }
                    if last >= 0 {
                        for seq in 0...last {
                            var checksum: UInt64 = 0
                            for index in 0..<powerCutRecords {
                                checksum ^= try ledger.get(StressRecord.key(seq: seq, index: index), in: tx)?.checksum ?? 0
                            }
                            if try log.get(seq, in: tx) != StressLogEntry(seq: seq, count: powerCutRecords, checksum: checksum) {
                                problems.append("log-\(seq)")
                            }
                        }
                    }
                    return (last, problems)
                }
                say("state \(state) last=\(last) problems=\(problems.count)" + (problems.first.map { " \($0)" } ?? ""))
            } catch {
                say("state \(state) error \(oneLine(error))")
            }
        }

    case "powercut-publisher":
        // powercut-publisher ROOT GROUP COUNT: COUNT rounds of: publish the feed "pc" (a
        // TestFeedPayload of sequence = generation), print "acked feed G"; export a snapshot, print
        // "acked snapshot G"; every third round prune to the newest two and print "pruned".
        let container = try openContainer(root, group)
        let feed = try WidgetFeed<TestFeedPayload>(name: "pc", container: container)
        let snapshots = try Snapshots(container: container)
        let marks = try container.store.collection("marks", key: Int.self, value: Int.self)
        for round in 1...max(1, Int(rest[0])!) {
            let next = (try feed.readIfPublished()?.generation ?? 0) + 1
            say("acked feed \(try feed.publish(TestFeedPayload(sequence: Int(next), size: 3_000 + round * 100)))")
            try marks.put(round, forKey: round)
            say("acked snapshot \(try snapshots.export(from: container.store).generation)")
            if round % 3 == 0 {
                try snapshots.prune(keep: 2)
                say("pruned")
            }
        }
        say("done")

    case "powercut-check-publish":
        // powercut-check-publish GROUP STATE…: (ROOT unused) for each STATE directory, reads the feed
        // "pc" and every snapshot the manifest lists (SHA-256 verified, then opened and read):
        // "state STATE feed=G|none|bad manifest=ok|bad snapshots=N bad=B latest=G [first problem]".
        for state in rest {
            var problems: [String] = []
            var feedText = "none"
            do {
                let feed = try WidgetFeed<TestFeedPayload>(name: "pc", groupIdentifier: group, root: state)
                if let published = try feed.readIfPublished() {
                    feedText = String(published.generation)
                    if !published.payload.isConsistent || published.payload.sequence != Int(published.generation) {
                        feedText = "bad"
                        problems.append("feed-inconsistent")
                    }
                }
            } catch {
                feedText = "bad"
                problems.append("feed: \(oneLine(error))")
            }
            var manifestText = "ok"
            var (count, bad, latest) = (0, 0, 0)
            do {
                let snapshots = try Snapshots(groupIdentifier: group, root: state)
                for entry in try snapshots.list() {
                    count += 1
                    latest = max(latest, entry.generation)
                    do {
                        let store = try snapshots.open(entry, verifying: true)
                        let marks = try store.collection("marks", key: Int.self, value: Int.self)
                        _ = try marks.count()
                    } catch {
                        bad += 1
                        problems.append("snapshot \(entry.generation): \(oneLine(error))")
                    }
                }
            } catch {
                manifestText = "bad"
                problems.append("manifest: \(oneLine(error))")
            }
            say("state \(state) feed=\(feedText) manifest=\(manifestText) snapshots=\(count) bad=\(bad) latest=\(latest)"
                + (problems.first.map { " \($0)" } ?? ""))
        }

    default:
        return false
    }
    return true
}
