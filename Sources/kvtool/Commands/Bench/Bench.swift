import ArgumentParser
import Foundation
import KVStore
import SyncKit
import Workloads

/// `kvtool bench`: workloads timed on this machine.
struct Bench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Time the workloads of DESIGN.md on this machine.",
        subcommands: [Dashboard.self] + syncSubcommands)

    #if PostgreSQL
    static let syncSubcommands: [any ParsableCommand.Type] = [Sync.self, Pushers.self, Requests.self, GatewayScale.self, GatewayDevices.self, Files.self, JSON.self, Validators.self]
    #else
    static let syncSubcommands: [any ParsableCommand.Type] = []
    #endif

    /// Monotonic nanoseconds (CLOCK_MONOTONIC), comparable between processes.
    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// p50 and p90, in microseconds, of `iterations` runs of `body`.
    static func time(_ iterations: Int, _ body: () throws -> Void) rethrows -> (p50: Double, p90: Double) {
        var samples: [Double] = []
        samples.reserveCapacity(iterations)
        for _ in 0..<iterations {
            let start = now()
            try body()
            samples.append(Double(now() - start) / 1000)
        }
        samples.sort()
        return (samples[samples.count / 2], samples[min(samples.count - 1, samples.count * 9 / 10)])
    }

    /// `kvtool bench dashboard`.
    struct Dashboard: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "dashboard",
            abstract: "Seed the one-year checklist dataset and time the dashboard, a cold open, saves and the size on disk.",
            discussion: """
                Seeds DESIGN.md's dataset into a temporary container (or into --group), then times the \
                dashboard for each period (and all five), a cold open (the checklist-widget process opens the container, \
                reads the widget feed and computes the year), saving one DailyRecord (record, summary and \
                history) at each durability mode, and measures the store's size after compaction.
                """)

        @OptionGroup var global: GlobalOptions
        @Option(parsing: .unconditional, help: "Days of data, ending 2026-11-21 for 365.") var days = 365
        @Option(parsing: .unconditional, help: "Runs of each dashboard timing.") var iterations = 2_000

        func validate() throws {
            if days < 1 || days > 3_650 { throw ValidationError("--days must be 1 to 3650") }
            if iterations < 1 || iterations > 1_000_000 { throw ValidationError("--iterations must be 1 to 1000000") }
        }

        func run() throws {
            let (root, group, temporary) = try location()
            defer { if let temporary { try? FileManager.default.removeItem(atPath: temporary) } }
            // Stages: seeding, five periods, all five, cold open, three saves, compaction.
            let progress = ProgressBar(total: 3 + DashboardPeriod.allCases.count + Durability.allCases.count, label: "bench")
            defer { progress.finish() }
            let records = ChecklistDataset.records(days: days)
            let today = ChecklistDataset.firstDay + (days - 1)
            let container = try SharedContainer(groupIdentifier: group, root: root)
            let app = try ChecklistWidgetFlow.App(container: container)
            try app.save(records, today: today, author: "bench")
            progress.advance()
            let checklist = app.checklist
            let reference = DashboardReference.dashboard(records, today: today)

            var object: JSONValue = [:]
            var table: [[String]] = []
            var computed: Workloads.Dashboard?
            for period in DashboardPeriod.allCases {
                let timing = try Bench.time(iterations) {
                    computed = try container.store.read { tx in try checklist.dashboard([period], today: today, in: tx) }
                }
                guard let result = computed?[period], let expected = reference[period],
                      result.records == expected.records, result.trends == expected.trends else {
                    throw CLIError(.failure, "the \(period.rawValue) dashboard does not match the reference computation")
                }
                object[period.rawValue] = [
                    "records": .integer(result.records),
                    "categoryAverages": .object(result.categoryAverages.map { .init($0.key.rawValue, .float($0.value)) }),
                    "trends": .object(result.trends.map { .init($0.key.rawValue, .string($0.value.rawValue)) }),
                    "p50_us": .float(timing.p50), "p90_us": .float(timing.p90),
                ]
                table.append(["dashboard \(period.rawValue)", Self.microseconds(timing.p50), Self.microseconds(timing.p90)])
                progress.advance()
            }
            let allFive = try Bench.time(iterations) {
                computed = try container.store.read { tx in try checklist.dashboard(today: today, in: tx) }
            }
            table.append(["dashboard, all five periods", Self.microseconds(allFive.p50), Self.microseconds(allFive.p90)])
            let streak = computed?.streak ?? Streak(current: 0, longest: 0)
            guard streak == reference.streak else { throw CLIError(.failure, "the streak does not match the reference computation") }

            progress.advance()
            let cold = try coldOpen(root: root, group: group)
            table.append(["cold open: the widget process, feed + year dashboard", Self.microseconds(cold.p50), Self.microseconds(cold.p90)])

            var saves: JSONValue = [:]
            for durability in Durability.allCases {
                let timing = try save(durability, records: records, today: today, root: root, group: group)
                saves[durability.rawValue] = ["p50_us": .float(timing.p50), "p90_us": .float(timing.p90)]
                table.append(["save one DailyRecord, \(durability.rawValue)", Self.microseconds(timing.p50), Self.microseconds(timing.p90)])
                progress.advance()
            }

            let sizeDirectory = try Self.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: sizeDirectory) }
            let compacted = try container.store.copy(toNewFile: sizeDirectory + "/compacted.mdb").size

            if global.json {
                object["records"] = .integer(records.count)
                object["scores"] = .integer(records.reduce(0) { $0 + $1.cachedInputCount })
                object["streak"] = ["current": .integer(streak.current), "longest": .integer(streak.longest)]
                object["allPeriods"] = ["p50_us": .float(allFive.p50), "p90_us": .float(allFive.p90)]
                object["coldOpen"] = ["p50_us": .float(cold.p50), "p90_us": .float(cold.p90)]
                object["save"] = saves
                object["compactedBytes"] = .integer(compacted)
                try Output.json(object)
            } else {
                print("\(records.count) records, \(records.reduce(0) { $0 + $1.cachedInputCount }) scores, streak \(streak.current) (longest \(streak.longest)); \(iterations) runs each")
                Output.table(["WORKLOAD", "P50", "P90"], table)
                print("store after compaction: \(compacted) bytes")
            }
        }

        /// The container to use: `--group` (and `--root`), or a new temporary one.
        private func location() throws -> (root: String?, group: String, temporary: String?) {
            if global.group != nil || ProcessInfo.processInfo.environment["KVSTORE_GROUP"].map({ !$0.isEmpty }) == true {
                return (global.root, try global.groupIdentifier(), nil)
            }
            let directory = try Self.temporaryDirectory()
            return (directory, "group.com.example.bench", directory)
        }

        static func temporaryDirectory() throws -> String {
            var template = Array((NSTemporaryDirectory() + "/kvtool-bench-XXXXXX").utf8CString)
            guard let made = mkdtemp(&template) else { throw CLIError(.failure, "cannot create a temporary directory: \(String(cString: strerror(errno)))") }
            return String(cString: made)
        }

        static func microseconds(_ value: Double) -> String {
            value >= 10_000 ? String(format: "%.1f ms", value / 1000) : String(format: "%.1f µs", value)
        }

        /// Five runs of the `checklist-widget` executable (which opens the container read-only, reads
        /// the feed and computes the year dashboard): from spawning the process to the end of its output
        /// (its exit closes the pipe; `Process.waitUntilExit` itself polls every 50 ms, so it is not timed).
        private func coldOpen(root: String?, group: String) throws -> (p50: Double, p90: Double) {
            let widget = try Demo.programPath("checklist-widget")
            var samples: [Double] = []
            for _ in 0..<5 {
                let started = Bench.now()
                let child = try ChildProcess(program: widget, arguments: ["--group", group] + (root.map { ["--root", $0] } ?? []),
                                             timeout: 120, relayIndent: nil)
                let output = String(decoding: child.remainingOutput(), as: UTF8.self)
                let elapsed = Double(Bench.now() - started) / 1000
                child.process.waitUntilExit()
                guard child.process.terminationStatus == 0, output.contains("year dashboard: "), !output.contains("year dashboard: 0 records") else {
                    throw CLIError(.failure, "the widget process failed (status \(child.process.terminationStatus)): \(output)")
                }
                samples.append(elapsed)
            }
            samples.sort()
            return (samples[2], samples[4])
        }

        /// Saves today's record again and again in a container of its own opened with `durability`
        /// (LMDB's sync flags are per environment), with history on as in the app.
        private func save(_ durability: Durability, records: [DailyRecord], today: LogicalDay,
                          root: String?, group: String) throws -> (p50: Double, p90: Double) {
            let directory = try Self.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            var options = SharedContainer.Options()
            options.store.durability = durability
            let container = try SharedContainer(groupIdentifier: group + ".save", root: directory, options: options)
            let app = try ChecklistWidgetFlow.App(container: container)
            try container.store.write(author: "bench") { tx in
                for record in records { try app.checklist.records.put(record, forKey: record.day, in: tx) }
            }
            guard var record = records.last else { return (0, 0) }
            var score = 0
            return try Bench.time(durability == .durable ? 100 : 1_000) {
                score = score % 5 + 1
                record = DailyRecord(day: today, scores: record.scores.merging(["think.1": score]) { $1 }, memos: record.memos)
                try container.store.write(author: "app") { tx in try app.checklist.records.put(record, forKey: today, in: tx) }
            }
        }
    }
}
