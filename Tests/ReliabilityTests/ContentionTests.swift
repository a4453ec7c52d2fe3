import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

extension ReliabilityTests {
    /// One writer, three readers, a `kvtool watch`, a history consumer and a widget reading the feed,
    /// all at once; twice during the run the writer is stopped (SIGSTOP), once at a random point and
    /// once in the middle of a transaction, holding the write lock.
    @Suite struct Contention {
        let dir = TemporaryDirectory()
        let group = "group.com.example.contention"

        /// Reads from the readers' ticks: how many reads completed in [from, to], and the slowest read
        /// reported by a tick in that window (a read blocked through the window would show there, or
        /// as missing reads).
        func readsBetween(_ reader: BackgroundProcess, _ from: UInt64, _ to: UInt64) -> (reads: Int, maxMicroseconds: Int) {
            let ticks = reader.output.compactMap { line -> (time: UInt64, reads: Int, max: Int)? in
                let f = line.split(separator: " ")
                guard f.count == 4, f[0] == "tick" else { return nil }
                return (UInt64(f[1])!, Int(f[2])!, Int(f[3])!)
            }
            let inside = ticks.filter { $0.time >= from && $0.time <= to }
            guard let first = inside.first, let last = inside.last else { return (0, 0) }
            let before = ticks.last { $0.time < from }?.reads ?? first.reads
            return (last.reads - before, inside.map(\.max).max() ?? 0)
        }

        /// Reads the ledger's invariants in this process again and again for `seconds`; returns the
        /// count and the slowest read in milliseconds.
        func readFor(_ seconds: Double, _ store: Store) throws -> (reads: Int, maxMilliseconds: Double) {
            let ledger = try store.collection("ledger", key: Int.self, value: Int.self)
            let meta = try store.collection("ledgerMeta", key: String.self, value: Int.self)
            let end = monotonicNow() + UInt64(seconds * 1e9)
            var (reads, slowest) = (0, 0.0)
            while monotonicNow() < end {
                let start = monotonicNow()
                let (sum, expected) = try store.read { tx in
                    var sum = 0
                    try ledger.forEach(in: tx) { _, value in sum += value; return true }
                    return (sum, try meta.get("sum", in: tx) ?? 0)
                }
                #expect(sum == expected)
                slowest = max(slowest, milliseconds(since: start))
                reads += 1
                usleep(5_000)
            }
            return (reads, slowest)
        }

        @Test(.blockingWork) func readersAndConsumersKeepGoingAndSeeConsistentStatesInOrder() throws {
            let duration = StressLevel.pick(short: 10.0, long: 60.0)
            let stopLength = StressLevel.pick(short: 1.5, long: 5.0)
            let container = try dir.container(group)
            let history = try History.attach(to: container)
            let store = container.store
            // Created up front, so that the read-only processes find every collection.
            for name in ["ledger", "stamps", "events"] { _ = try store.collection(name, key: Int.self, value: Int.self) }
            _ = try store.collection("ledgerMeta", key: String.self, value: Int.self)
            try history.enable(.collection("events"))

            let reaper = ProcessReaper()
            defer { reaper.stopAll() }
            let (stopWriter, stopOthers, selfStop) = (dir.path + "/stop-writer", dir.path + "/stop", dir.path + "/self-stop")
            let watch = try reaper.start(kvtool, ["watch", "--root", dir.path, "--group", group])
            let consumer = try reaper.helper(["contention-consumer", dir.path, group, "widget-sync", stopOthers])
            let readers = try (0..<3).map { _ in try reaper.helper(["contention-reader", dir.path, group, stopOthers]) }
            let widget = try reaper.helper(["feed-watch", dir.path, group, "live", stopOthers])
            #expect(watch.waitForLine { $0.hasPrefix("watching ") }?.hasPrefix("watching \(group) from token 0, transaction ") == true)
            for process in [consumer, widget] + readers { #expect(process.waitForLine { $0.hasPrefix("ready") } != nil) }

            let writer = try reaper.helper(["contention-writer", dir.path, group, stopWriter, selfStop, "20"])
            #expect(writer.waitForLine { $0 == "ready" } != nil)
            let started = monotonicNow()
            func sleep(until fraction: Double) {
                let target = started + UInt64(duration * fraction * 1e9)
                let now = monotonicNow()
                if target > now { usleep(UInt32((target - now) / 1000)) }
            }

            struct StopWindow { var label: String; var from: UInt64; var to: UInt64; var inProcess: (reads: Int, maxMilliseconds: Double); var newReaderMilliseconds: Double; var readWriteOpenMilliseconds: Double? }
            var windows: [StopWindow] = []
            func stopped(_ label: String) throws {
                let from = monotonicNow()
                // A new process opening the store read-only and reading, as a widget or kvtool does.
                let tool = monotonicNow()
                let get = try run(kvtool, ["get", "ledgerMeta", "seq", "--root", dir.path, "--group", group])
                let newReader = milliseconds(since: tool)
                #expect(get.status == 0, "\(get.stderr)")
                // A new process opening the container read-write (the default) to read.
                let opener = try reaper.helper(["rw-open-read", dir.path, group])
                let line = opener.waitForLine(timeout: stopLength + BuildScale.seconds(3)) { $0.hasPrefix("read ") }
                #expect(line != nil, "\(label): a process that opens the container read-write to read waited for the stopped writer")
                let readWrite = summaryFields(line)["ms"].flatMap(Double.init)
                let spent = Double(monotonicNow() - from) / 1e9
                let inProcess = try readFor(max(0.2, stopLength - spent), store)
                windows.append(StopWindow(label: label, from: from, to: monotonicNow(), inProcess: inProcess,
                                          newReaderMilliseconds: newReader, readWriteOpenMilliseconds: readWrite))
            }

            // A stop at whatever point the writer happens to be.
            sleep(until: 0.35)
            writer.kill(SIGSTOP)
            try stopped("SIGSTOP at a random point")
            writer.kill(SIGCONT)
            // A stop in the middle of a transaction: the writer holds LMDB's write lock.
            sleep(until: 0.65)
            touch(selfStop)
            #expect(writer.waitForLine(timeout: BuildScale.seconds(10)) { $0 == "self-stopped" } != nil)
            try stopped("SIGSTOP mid-transaction, holding the write lock")
            writer.kill(SIGCONT)

            sleep(until: 1)
            touch(stopWriter)
            let (_, writerLines, writerError) = writer.wait()
            #expect(exitedCleanly(writer), "\(writerError)")
            let written = summaryFields(writerLines.last { $0.hasPrefix("summary") })
            let lastSeq = Int(written["lastSeq"] ?? "") ?? -1
            #expect(lastSeq > 0)
            touch(stopOthers)

            // Readers: only consistent states, never going back, and never blocked by the stopped writer.
            var totalReads = 0
            var readerLatency: [String] = []
            for reader in readers {
                let (_, lines, stderr) = reader.wait()
                #expect(exitedCleanly(reader), "\(stderr)")
                let fields = summaryFields(lines.last { $0.hasPrefix("summary") })
                totalReads += Int(fields["reads"] ?? "") ?? 0
                #expect(fields["inconsistent"] == "0", "\(lines.filter { $0.hasPrefix("inconsistent") })")
                #expect(fields["regressions"] == "0", "\(lines.filter { $0.hasPrefix("regression") })")
                readerLatency.append("p50 \(fields["p50us"] ?? "?") µs, p99 \(fields["p99us"] ?? "?") µs, max \(fields["maxus"] ?? "?") µs")
            }
            var windowFigures: [String] = []
            for window in windows {
                let seen = readers.map { readsBetween($0, window.from, window.to) }
                for (reads, slowest) in seen {
                    #expect(reads > 0, "\(window.label): a reader made no progress while the writer was stopped")
                    #expect(Double(slowest) < BuildScale.seconds(0.5) * 1e6, "\(window.label): a read took \(slowest) µs")
                }
                #expect(window.inProcess.reads > 0 && window.inProcess.maxMilliseconds < BuildScale.seconds(0.5) * 1e3)
                let seconds = Double(window.to - window.from) / 1e9
                windowFigures.append("\(window.label), \(fixed(seconds)) s: the 3 readers made \(seen.map { String($0.reads) }.joined(separator: "/")) reads "
                    + "(slowest \(seen.map(\.maxMicroseconds).max() ?? 0) µs), this process \(window.inProcess.reads) (slowest \(fixed(window.inProcess.maxMilliseconds, 2)) ms), "
                    + "a new kvtool get took \(fixed(window.newReaderMilliseconds, 0)) ms, a new read-write open + read "
                    + (window.readWriteOpenMilliseconds.map { "\(fixed($0, 0)) ms" } ?? "blocked"))
            }

            // Consumers: every entry once, in order, without gaps, up to the writer's last transaction.
            let (_, consumerLines, consumerError) = consumer.wait()
            #expect(exitedCleanly(consumer), "\(consumerError)")
            let consumed = summaryFields(consumerLines.last { $0.hasPrefix("summary") })
            #expect(consumed["gaps"] == "0" && consumed["duplicates"] == "0" && consumed["mismatches"] == "0", "\(consumed)")
            #expect(consumed["last"] == String(lastSeq) && consumed["entries"] == String(lastSeq))
            let watched = watch.waitForLine(timeout: 20) { $0.hasPrefix("\(lastSeq)  ") }
            #expect(watched != nil, "kvtool watch never printed token \(lastSeq)")
            // SIGKILL: children of the test runner inherit the signal mask of the thread that spawned them,
            // which blocks SIGTERM and SIGINT.
            watch.kill(SIGKILL)
            watch.wait()
            let tokens = watch.output.dropFirst().compactMap { UInt64($0.split(separator: " ").first ?? "") }
            #expect(tokens == Array(1...UInt64(max(lastSeq, 1))), "kvtool watch: \(tokens.count) tokens, not 1…\(lastSeq) in order")

            // The widget: no torn feed, never an older generation.
            let (_, widgetLines, widgetError) = widget.wait()
            #expect(exitedCleanly(widget), "\(widgetError)")
            let fed = summaryFields(widgetLines.last { $0.hasPrefix("summary") })
            #expect(fed["invalid"] == "0" && fed["decreasing"] == "0" && fed["inconsistent"] == "0", "\(widgetLines.suffix(6))")
            #expect((Int(fed["reads"] ?? "") ?? 0) > 0)
            #expect(try history.checkIntegrity().isEmpty)

            let seconds = Double(written["seconds"] ?? "") ?? duration
            let commits = Int(written["commits"] ?? "") ?? 0
            report("contention", "\(fixed(seconds)) s: 1 writer \(commits) commits (\(fixed(Double(commits) / seconds, 0)) commits/s, durable, 1–8 ledger keys + 4 stamps + 1 history entry each; "
                   + "commit p50 \(written["p50us"] ?? "?") µs, p99 \(written["p99us"] ?? "?") µs, max \(written["maxus"] ?? "?") µs incl. the stops), "
                   + "\(written["feeds"] ?? "?") feed publications")
            report("contention", "3 readers \(totalReads) consistent reads (\(fixed(Double(totalReads) / seconds, 0)) reads/s, each a scan of 256 keys + 7 gets), "
                   + "0 inconsistent; latency \(readerLatency.joined(separator: "; "))")
            report("contention", "consumers: kvtool watch \(tokens.count) entries, history consumer \(consumed["entries"] ?? "?") entries in \(consumed["acks"] ?? "?") acknowledgements, 0 gaps; "
                   + "widget \(fed["reads"] ?? "?") feed reads up to generation \(fed["last"] ?? "?"), 0 torn")
            for figure in windowFigures { report("contention", figure) }
        }
    }
}
