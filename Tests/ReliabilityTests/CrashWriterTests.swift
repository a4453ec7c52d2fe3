import CLMDB
import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport
import Workloads
#if canImport(Glibc)
import Glibc
#endif

extension ReliabilityTests {
    /// kill -9 of a writer at random points, over and over, checking after every kill what a crash may
    /// never do. In every ``Durability`` mode: a process crash never loses an acknowledged commit in
    /// any of them (the commit is in the page cache, which outlives the process), and that is the
    /// promise ``Durability`` makes; only a power loss tells the modes apart (PowerCutTests).
    @Suite struct CrashWriter {
        let dir = TemporaryDirectory()
        let group = "group.com.example.crashwriter"

        /// The LMDB flags ``Durability`` documents for `mode`.
        static func flags(_ mode: Durability) -> UInt32 {
            switch mode {
            case .durable: 0
            case .noMetaSync: UInt32(MDB_NOMETASYNC)
            case .noSync: UInt32(MDB_NOSYNC)
            }
        }

        @Test(.blockingWork, arguments: Durability.allCases)
        func killingTheWriterLosesNoAcknowledgedCommitAndLeavesNoPartialTransaction(mode: Durability) throws {
            // The default mode as many times as before; the others enough to land in every phase.
            let kills = mode == .durable ? StressLevel.pick(short: 50, long: 1_000) : StressLevel.pick(short: 20, long: 300)
            let perTransaction = 4
            let seed = UInt64(ProcessInfo.processInfo.environment["KVSTORE_STRESS_SEED"] ?? "") ?? UInt64(monotonicNow() % 1_000_000)
            var rng = SplitMix64(seed: seed)

            let container = try dir.container(group)
            let history = try History.attach(to: container)
            let ledger = try container.store.collection("ledger", key: Int.self, value: StressRecord.self)
            let log = try container.store.collection("log", key: Int.self, value: StressLogEntry.self)
            let probe = try container.store.collection("probe", key: Int.self, value: Int.self)
            try history.enable(.collection("log"))
            let phase = try SharedPhase(path: dir.path + "/phase")
            let reaper = ProcessReaper()
            defer { reaper.stopAll() }

            var verifiedThrough = -1      // every transaction up to here was checked whole and intact
            var maxAcknowledged = -1
            var acknowledged = 0
            var (lost, partial, corrupt, committedUnacknowledged, historyProblems, checkFailures, checks) = (0, 0, 0, 0, 0, 0, 0)
            var nextWriterMilliseconds: [Double] = []
            var phases: [WriterPhase: Int] = [:]
            let started = monotonicNow()

            for kill in 0..<kills {
                phase.value = WriterPhase.beforeBegin.rawValue
                let writer = try reaper.helper(["stress-writer", dir.path, group, phase.path, String(perTransaction), String(rng.next()),
                                                mode.rawValue])
                guard let ready = writer.waitForLine(timeout: 60, where: { $0.hasPrefix("ready ") }) else {
                    writer.kill()
                    Issue.record("kill \(kill): the writer did not start: \(writer.wait().stderr)")
                    break
                }
                // The new writer resumes right after the last committed transaction.
                #expect(Int(ready.dropFirst(6)) == verifiedThrough + 1, "kill \(kill)")
                // A random point: right away (before the first begin), or up to 40 ms of commits later.
                let delay = rng.next() % 8 == 0 ? 0 : UInt32(rng.next() % 40_000)
                if delay > 0 { usleep(delay) }
                writer.kill(SIGKILL)
                let (_, lines, stderr) = writer.wait()
                guard writer.process.terminationReason == .uncaughtSignal && writer.process.terminationStatus == SIGKILL else {
                    Issue.record("kill \(kill): the writer ended by itself (\(describeTermination(writer))): \(stderr)")
                    break
                }
                // The writer really committed in `mode` (it prints its flags before "ready").
                let flags = lines.first { $0.hasPrefix("flags ") }.flatMap { UInt32($0.dropFirst(6)) }
                #expect(flags.map { $0 & UInt32(MDB_NOSYNC | MDB_NOMETASYNC) } == Self.flags(mode), "kill \(kill): writer flags \(String(describing: flags))")
                phases[WriterPhase(rawValue: phase.value) ?? .beforeBegin, default: 0] += 1
                let acked = lines.compactMap { $0.hasPrefix("acked ") ? Int($0.dropFirst(6)) : nil }
                #expect(acked == Array((verifiedThrough + 1)..<(verifiedThrough + 1 + acked.count)), "kill \(kill)")
                acknowledged += acked.count
                maxAcknowledged = acked.last ?? maxAcknowledged

                // The next writer gets the lock: a write transaction from this process, timed.
                let lockStart = monotonicNow()
                try probe.put(kill, forKey: 0)
                nextWriterMilliseconds.append(milliseconds(since: lockStart))

                // What the store holds now: whole transactions, every acknowledged one, all intact.
                let (last, problems) = try container.store.read { tx -> (Int, [String]) in
                    var problems: [String] = []
                    let last = try log.last(in: tx)?.key ?? -1
                    let logCount = try log.count(in: tx)
                    let ledgerCount = try ledger.count(in: tx)
                    if logCount != last + 1 { problems.append("log holds \(logCount) entries, last seq \(last)") }
                    // Keys are seq * 16 + index for index < perTransaction: with the count and the largest
                    // key, this proves every transaction up to `last` is whole and nothing else is there.
                    if ledgerCount != perTransaction * (last + 1) {
                        problems.append("partial: ledger holds \(ledgerCount) records for \(last + 1) transactions")
                    }
                    if let largest = try ledger.last(in: tx)?.key, largest >= StressRecord.key(seq: last + 1, index: 0) {
                        problems.append("partial: record \(largest) belongs to an uncommitted transaction")
                    }
                    if last > verifiedThrough {
                        for seq in (verifiedThrough + 1)...last {
                            var checksum: UInt64 = 0
                            for index in 0..<perTransaction {
                                guard let record = try ledger.get(StressRecord.key(seq: seq, index: index), in: tx) else {
                                    problems.append("partial: seq \(seq) lacks record \(index)")
                                    continue
                                }
                                if !record.isIntact || record.seq != seq || record.index != index || record.count != perTransaction {
                                    problems.append("corrupt: seq \(seq) record \(index)")
                                }
                                checksum ^= record.checksum
                            }
                            if try log.get(seq, in: tx) != StressLogEntry(seq: seq, count: perTransaction, checksum: checksum) {
                                problems.append("corrupt: the log entry of seq \(seq) does not match its records")
                            }
                        }
                    }
                    return (last, problems)
                }
                if last < maxAcknowledged { lost += maxAcknowledged - last }
                partial += problems.filter { $0.hasPrefix("partial") }.count
                corrupt += problems.filter { !$0.hasPrefix("partial") }.count
                #expect(last >= maxAcknowledged, "kill \(kill): acknowledged \(maxAcknowledged), store ends at \(last)")
                #expect(last - maxAcknowledged <= 1, "kill \(kill): at most the transaction being acknowledged is unacknowledged")
                #expect(problems.isEmpty, "kill \(kill): \(problems.prefix(5))")
                committedUnacknowledged += max(0, last - maxAcknowledged)
                maxAcknowledged = max(maxAcknowledged, last)
                verifiedThrough = max(verifiedThrough, last)

                // History: one entry per committed transaction, no gap.
                let historyReport = try history.checkIntegrity()
                let token = try history.currentToken().rawValue
                historyProblems += historyReport.count + (token == UInt64(last + 1) ? 0 : 1)
                #expect(historyReport.isEmpty, "kill \(kill): \(historyReport.prefix(3))")
                #expect(token == UInt64(last + 1), "kill \(kill): history at token \(token) for \(last + 1) transactions")

                // The whole environment, by the command-line tool, after every kill.
                let check = try run(kvtool, ["check", "--root", dir.path, "--group", group])
                checks += 1
                if check.status != 0 { checkFailures += 1 }
                #expect(check.status == 0, "kill \(kill): kvtool check: \(check.stdout)\(check.stderr)")
            }

            // Once more at the end, every record of every transaction.
            let finalProblems = try container.store.read { tx -> Int in
                var bad = 0
                try ledger.forEach(in: tx) { key, record in
                    if !record.isIntact || StressRecord.key(seq: record.seq, index: record.index) != key { bad += 1 }
                    return true
                }
                return bad
            }
            #expect(finalProblems == 0)
            #expect(verifiedThrough >= 0, "the writers committed nothing")
            let lock = Percentiles(nextWriterMilliseconds)
            // The lock must be free at once after a kill; the bound scales with the build (sanitizers).
            #expect(lock.max < BuildScale.seconds(1) * 1_000, "a new writer waited \(lock.max) ms for the lock")

            let seconds = Double(monotonicNow() - started) / 1e9
            report("crash-writer \(mode)", "\(phases.values.reduce(0, +)) kills (SIGKILL) in \(fixed(seconds)) s, seed \(seed); "
                   + "killed " + WriterPhase.allCases.map { "\($0): \(phases[$0] ?? 0)" }.joined(separator: ", "))
            report("crash-writer \(mode)", "\(verifiedThrough + 1) transactions committed (\(perTransaction) records + 1 history-enabled log entry each), "
                   + "\(acknowledged) acknowledged, \(committedUnacknowledged) committed but killed before the ack; "
                   + "lost \(lost), partial \(partial), corrupt \(corrupt), history problems \(historyProblems), "
                   + "kvtool check failures \(checkFailures) of \(checks) runs (every kill), final scan bad records \(finalProblems)")
            report("crash-writer \(mode)", "next writer's first commit after a kill (lock + durable commit by the test): p50 \(fixed(lock.p50, 2)) ms, "
                   + "p99 \(fixed(lock.p99, 2)) ms, max \(fixed(lock.max, 2)) ms")
        }
    }
}
