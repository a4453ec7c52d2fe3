import Foundation
import KVStore
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

extension ReliabilityTests {
    /// One process grows the map again and again (from 64 KiB) while others read and write, and new
    /// processes keep opening the store with a 64 KiB map of their own.
    @Suite struct MapGrowth {
        let dir = TemporaryDirectory()
        let group = "group.com.example.mapgrowth"

        @Test(.blockingWork) func everyProcessAdoptsTheGrownMapNoneShrinksItAndNoneDiesOfSIGBUS() throws {
            let target = StressLevel.pick(short: 8 << 20, long: 128 << 20)
            var options = SharedContainer.Options()
            options.store.mapSize = 64 << 10
            let storeDirectory: String
            do {
                // Created with a 64 KiB map; this process lets go of it again.
                let container = try dir.container(group, options: options)
                _ = try container.store.collection("blobs", key: Int.self, value: [UInt8].self)
                _ = try container.store.collection("small", key: Int.self, value: [UInt8].self)
                storeDirectory = container.storeDirectory
            }
            let reaper = ProcessReaper()
            defer { reaper.stopAll() }
            let stop = dir.path + "/stop"
            let actors = try ["grower", "writer", "reader"].map { role in
                try reaper.helper(["map-actor", dir.path, group, role, stop])
            }
            for actor in actors { #expect(actor.waitForLine { $0 == "ready" } != nil) }
            let grower = actors[0]

            // While it grows: new processes open with a 64 KiB map, write, read everything and leave;
            // and the size recorded in the environment must never go down.
            var recorded: [Int] = []
            var joiners: [(before: Int, summary: [String: String], clean: Bool)] = []
            let deadline = monotonicNow() + 600_000_000_000
            let started = monotonicNow()
            while monotonicNow() < deadline {
                let before = try recordedMapSize(storeDirectory) ?? 0
                if recorded.last != before { recorded.append(before) }
                if before >= target { break }
                let joiner = try reaper.helper(["map-actor", dir.path, group, "joiner", stop])
                let (_, lines, stderr) = joiner.wait()
                #expect(exitedCleanly(joiner), "joiner: \(describeTermination(joiner)) \(stderr)")
                joiners.append((before, summaryFields(lines.last { $0.hasPrefix("summary") }), exitedCleanly(joiner)))
                if !grower.process.isRunning { break }
                usleep(100_000)
            }
            let growSeconds = Double(monotonicNow() - started) / 1e9
            touch(stop)
            var summaries: [String: [String: String]] = [:]
            for actor in actors {
                let (_, lines, stderr) = actor.wait()
                #expect(exitedCleanly(actor), "\(describeTermination(actor)) \(stderr)")
                let fields = summaryFields(lines.last { $0.hasPrefix("summary") })
                summaries[fields["role"] ?? "?"] = fields
            }
            let final = try #require(try recordedMapSize(storeDirectory))
            if recorded.last != final { recorded.append(final) }
            #expect(final >= target)
            #expect(recorded == recorded.sorted(), "the recorded map size went down: \(recorded)")

            let usedBytes = try #require(try usedPages(storeDirectory)) * 4096
            for (role, fields) in summaries {
                #expect(fields["shrinks"] == "0", "\(role) saw its map shrink: \(fields["sizes"] ?? "")")
                #expect(fields["bad"] == "0", "\(role) read a wrong blob")
                // Every long-running process adopted a size that maps all the data (a process takes a
                // larger recorded size when the data outgrows its map, or its own writes fill it), and
                // none mapped more than the environment records.
                let mapped = Int(fields["final"] ?? "") ?? 0
                #expect(mapped >= usedBytes && mapped <= final,
                        "\(role) ends with a \(mapped)-byte map; \(usedBytes) bytes are in use, the environment records \(final)")
            }
            for joiner in joiners {
                #expect(joiner.summary["bad"] == "0" && joiner.summary["shrinks"] == "0")
                // A process that opens with a smaller map takes the recorded size at once.
                let opened = Int(joiner.summary["sizes"]?.split(separator: ",").first ?? "") ?? 0
                #expect(opened >= joiner.before,
                        "a process opened with 64 KiB after the map reached \(joiner.before) bytes mapped \(opened)")
            }
            // Ten more processes open with a 64 KiB map and each commit 3 × 64 KiB (new pages, not
            // reused ones): the map has room for that, so it may grow once at most (each of them
            // used to double it).
            for i in 0..<10 {
                let grow = try helper(["grow", dir.path, group, "small", "3", "65536", String(1_000_000 + 10 * i)])
                #expect(grow.status == 0, "\(grow.stderr)")
            }
            let afterSmallWriters = try #require(try recordedMapSize(storeDirectory))
            #expect(afterSmallWriters <= 2 * final, "10 small writers took the map from \(final) to \(afterSmallWriters) bytes")
            let check = try run(kvtool, ["check", "--root", dir.path, "--group", group])
            #expect(check.status == 0, "\(check.stdout)\(check.stderr)")

            let growerSizes = (summaries["grower"]?["sizes"] ?? "").split(separator: ",")
            report("map-growth", "grown from 64 KiB to \(final) bytes in \(fixed(growSeconds)) s (\(growerSizes.count - 1) growths by the grower, "
                   + "\(summaries["grower"]?["ops"] ?? "?") × 256 KiB blobs); recorded sizes seen: \(recorded.count), never down")
            report("map-growth", "writer \(summaries["writer"]?["ops"] ?? "?") commits, reader \(summaries["reader"]?["ops"] ?? "?") full reads, "
                   + "map sizes they went through: writer \((summaries["writer"]?["sizes"] ?? "").split(separator: ",").count), "
                   + "reader \((summaries["reader"]?["sizes"] ?? "").split(separator: ",").count); \(joiners.count) processes opened mid-growth with 64 KiB; "
                   + "0 shrinks, 0 bad blobs, 0 SIGBUS, all \(3 + joiners.count) processes exited 0; "
                   + "then 10 new processes wrote 192 KiB each: map \(final) → \(afterSmallWriters) bytes")
        }
    }
}
