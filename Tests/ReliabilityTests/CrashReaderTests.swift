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

        /// Starts a churning writer (stale-reader check every `interval` seconds, or "off"), three
        /// readers that each begin a read transaction and hold it, kills the readers, and records the
        /// writer's figures for `seconds` more.
        func churn(group: String, interval: String, seconds: Double, reaper: ProcessReaper) throws -> Run {
            let stop = dir.path + "/stop-" + group
            let writer = try reaper.helper(["churn-writer", dir.path, group, stop, interval])
            #expect(writer.waitForLine { $0 == "ready" } != nil)
            let readers = try (0..<3).map { _ in try reaper.helper(["hold-read", dir.path, group]) }
            for reader in readers { #expect(reader.waitForLine { $0 == "reading" } != nil) }
            usleep(300_000)
            for reader in readers { reader.kill(SIGKILL) }
            for reader in readers { reader.wait() }
            let killedAt = monotonicNow()
            usleep(UInt32(seconds * 1e6))
            touch(stop)
            let (_, lines, stderr) = writer.wait()
            #expect(exitedCleanly(writer), "\(stderr)")
            let samples = lines.compactMap { line -> Sample? in
                let f = line.split(separator: " ")
                guard f.count == 5, f[0] == "pages" else { return nil }
                return Sample(pages: Int(f[1])!, fileBytes: Int(f[2])!, stale: Int(f[3])!, time: UInt64(f[4])!)
            }
            let commits = Int(summaryFields(lines.last { $0.hasPrefix("summary") })["commits"] ?? "") ?? 0
            return Run(samples: samples, killedAt: killedAt, commits: commits)
        }

        @Test func deadReadersSlotsAreClearedAndTheFileStopsGrowing() throws {
            let window = StressLevel.pick(short: 4.0, long: 20.0)
            let reaper = ProcessReaper()
            defer { reaper.stopAll() }

            // Without the writer's periodic check (the behaviour before it existed): the slots stay
            // stale, and the file grows with every commit until the map fills up.
            let off = try churn(group: "group.com.example.readers.off", interval: "off", seconds: 1.5, reaper: reaper)
            let offStart = try #require(off.sample(atOrAfter: off.killedAt))
            let offEnd = try #require(off.samples.last)
            #expect(offEnd.stale == 3, "the three dead readers' slots stay until someone clears them")
            #expect(offEnd.pages - offStart.pages > 1_000, "pinned by dead readers, the file must grow (the test's own sanity check)")

            // With the default check (every second): cleared within about a second, then flat.
            let on = try churn(group: "group.com.example.readers.on", interval: "1", seconds: window, reaper: reaper)
            let clearedAt = try #require(on.clearedAt, "the writer never cleared the dead readers' slots")
            let clearedAfter = Double(clearedAt - on.killedAt) / 1e9
            #expect(clearedAfter < 2.5)
            // Give LMDB a moment to reuse what the dead snapshots pinned, then measure the rest.
            let settled = try #require(on.sample(atOrAfter: clearedAt + 500_000_000))
            let end = try #require(on.samples.last)
            let settledSeconds = Double(end.time - settled.time) / 1e9
            #expect(settledSeconds > window / 2)
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
