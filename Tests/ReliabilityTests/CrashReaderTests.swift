import Foundation
import KVStore
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

extension ReliabilityTests {
    /// kill -9 of readers holding read transactions, while a long-running writer keeps rewriting the
    /// same keys: the dead readers' slots must be cleared, and then the file must stop growing.
    @Suite struct CrashReaders {
        let dir = TemporaryDirectory()

        struct Sample {
            var pages: Int
            var fileBytes: Int
            var stale: Int
            var time: UInt64
        }

        struct Run {
            var samples: [Sample]
            var killedAt: UInt64
            var commits: Int
            /// The first sample after the kill that finds no stale slot.
            var clearedAt: UInt64? {
                samples.first { $0.time > killedAt && $0.stale == 0 }?.time
            }
            func sample(atOrAfter time: UInt64) -> Sample? { samples.first { $0.time >= time } }
        }

        static func sample(_ line: String) -> Sample? {
            let f = line.split(separator: " ")
            guard f.count == 5, f[0] == "pages", let pages = Int(f[1]), let bytes = Int(f[2]), let stale = Int(f[3]),
                  let time = UInt64(f[4]) else { return nil }
            return Sample(pages: pages, fileBytes: bytes, stale: stale, time: time)
        }

        /// Starts a churning writer (stale-reader check every `interval` seconds, or "off"), three
        /// readers that each begin a read transaction and hold it, and kills the readers. Then waits
        /// until the writer's samples after the kill satisfy `reached` (given the first sample after
        /// the kill and the latest), and records its samples until they span `seconds` more after the
        /// first sample `settle` seconds later than that. The waits end on states of the samples, not
        /// on times (at most `BuildScale.seconds(limit)` each): in a slow build (the sanitizers, a
        /// loaded machine) a sample comes every second or so, and a fixed sleep measured too little.
        func churn(group: String, interval: String, limit: Double, until reached: (Sample, Sample) -> Bool,
                   settle: Double = 0, seconds: Double, reaper: ProcessReaper) throws -> Run {
            let stop = dir.path + "/stop-" + group
            let writer = try reaper.helper(["churn-writer", dir.path, group, stop, interval])
            #expect(writer.waitForLine(timeout: BuildScale.seconds(60)) { $0 == "ready" } != nil)
            let readers = try (0..<3).map { _ in try reaper.helper(["hold-read", dir.path, group]) }
            for reader in readers { #expect(reader.waitForLine(timeout: BuildScale.seconds(60)) { $0 == "reading" } != nil) }
            usleep(300_000)
            for reader in readers { reader.kill(SIGKILL) }
            for reader in readers {
                reader.wait()
                // The fault was injected: each reader died by SIGKILL inside its read transaction
                // (it printed "reading" from inside it, and never leaves it by itself).
                #expect(reader.process.terminationReason == .uncaughtSignal && reader.process.terminationStatus == SIGKILL,
                        "a reader was not killed: \(describeTermination(reader))")
            }
            let killedAt = monotonicNow()
            var first: Sample?, reachedAt: Sample?, settled: Sample?
            let done = writer.waitForLine(timeout: BuildScale.seconds(limit) + (settle + seconds) * 3) { line in
                guard let sample = Self.sample(line), sample.time > killedAt else { return false }
                if first == nil { first = sample }
                if reachedAt == nil {
                    guard reached(first!, sample) else { return false }
                    reachedAt = sample
                }
                if settled == nil {
                    guard sample.time >= reachedAt!.time + UInt64(settle * 1e9) else { return false }
                    settled = sample
                }
                return sample.time >= settled!.time + UInt64(seconds * 1e9)
            }
            let state = "reached: \(reachedAt != nil), settled: \(settled != nil)"
            #expect(done != nil, "\(group): the writer's samples never reached the state the test waits for (\(state))")
            touch(stop)
            let (_, lines, stderr) = writer.wait()
            #expect(exitedCleanly(writer), "\(stderr)")
            let samples = lines.compactMap(Self.sample)
            let commits = Int(summaryFields(lines.last { $0.hasPrefix("summary") })["commits"] ?? "") ?? 0
            return Run(samples: samples, killedAt: killedAt, commits: commits)
        }

        @Test(.blockingWork) func deadReadersSlotsAreClearedAndTheFileStopsGrowing() throws {
            let window = StressLevel.pick(short: 4.0, long: 20.0)
            let reaper = ProcessReaper()
            defer { reaper.stopAll() }

            // Without the writer's periodic check (the behaviour before it existed): the slots stay
            // stale, and the file grows with every commit until the map fills up. The run lasts until
            // it has grown 200 pages (over 2,000 in 1.5 s in a debug build), however long a slow build
            // takes to get there.
            let off = try churn(group: "group.com.example.readers.off", interval: "off", limit: 30,
                                until: { first, latest in latest.pages - first.pages > 200 }, seconds: 0.3, reaper: reaper)
            let offStart = try #require(off.sample(atOrAfter: off.killedAt))
            let offEnd = try #require(off.samples.last)
            #expect(offEnd.stale == 3, "the three dead readers' slots stay until someone clears them")
            // (Far above the 16 pages allowed below.)
            #expect(offEnd.pages - offStart.pages > 200, "pinned by dead readers, the file must grow (the test's own sanity check)")

            // With the default check (every second): cleared within about a second, then flat. The
            // window measured starts 0.5 s after the slots are cleared, whenever that is, and lasts
            // `window` seconds of the writer's samples.
            let on = try churn(group: "group.com.example.readers.on", interval: "1", limit: 30,
                               until: { _, latest in latest.stale == 0 }, settle: 0.5, seconds: window, reaper: reaper)
            let clearedAt = try #require(on.clearedAt, "the writer never cleared the dead readers' slots")
            let clearedAfter = Double(clearedAt - on.killedAt) / 1e9
            // One check interval, plus the writer's sampling and start-up, in a debug build.
            #expect(clearedAfter < BuildScale.seconds(2.5), "the slots were cleared \(fixed(clearedAfter, 2)) s after the kill")
            // Give LMDB a moment to reuse what the dead snapshots pinned, then measure the rest.
            let settled = try #require(on.sample(atOrAfter: clearedAt + 500_000_000))
            let end = try #require(on.samples.last)
            let settledSeconds = Double(end.time - settled.time) / 1e9
            #expect(settledSeconds > window / 2, "only \(fixed(settledSeconds)) s of samples after the slots were cleared")
            #expect(end.pages - settled.pages <= 16, "the file kept growing after the slots were cleared: \(settled.pages) → \(end.pages) pages")
            #expect(end.fileBytes - settled.fileBytes <= 16 * 4096)
            #expect(on.samples.filter { $0.time >= clearedAt }.allSatisfy { $0.stale == 0 })

            // Nothing is left for `kvtool readers --check` to clear, and the environment is sound.
            let readers = try run(kvtool, ["readers", "--check", "--json", "--root", dir.path, "--group", "group.com.example.readers.on"])
            #expect(readers.stdout == "{\"cleared\":0}\n", "\(readers.stderr)")
            let check = try run(kvtool, ["check", "--root", dir.path, "--group", "group.com.example.readers.on"])
            #expect(check.status == 0, "\(check.stdout)\(check.stderr)")

            let offRate = Double(offEnd.pages - offStart.pages) / (Double(offEnd.time - offStart.time) / 1e9)
            report("crash-readers", "3 readers killed (SIGKILL) holding read transactions while a writer rewrote 32 × 512-byte values "
                   + "(\(off.commits) + \(on.commits) commits)")
            report("crash-readers", "check off: 3 stale slots after \(fixed(Double(offEnd.time - off.killedAt) / 1e9)) s, "
                   + "file grew \(offEnd.pages - offStart.pages) pages (\(fixed(offRate, 0)) pages/s) to \(offEnd.fileBytes) bytes")
            report("crash-readers", "check every 1 s (default): slots cleared \(fixed(clearedAfter, 2)) s after the kill; "
                   + "then \(end.pages - settled.pages) pages of growth over \(fixed(settledSeconds)) s (\(settled.pages) → \(end.pages) pages, "
                   + "file \(settled.fileBytes) → \(end.fileBytes) bytes)")
        }
    }
}
