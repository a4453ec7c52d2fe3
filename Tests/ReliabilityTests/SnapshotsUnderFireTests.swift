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
    /// Snapshot exports and feed publications, killed again and again at random points, while a
    /// writer commits and widgets read both.
    @Suite struct SnapshotsUnderFire {
        let dir = TemporaryDirectory()
        let group = "group.com.example.underfire"

        @Test(.blockingWork) func widgetsSeeNoTornFileAndOrphanedTemporaryFilesAreCleanedUp() throws {
            let duration = StressLevel.pick(short: 8.0, long: 45.0)
            let seed = UInt64(ProcessInfo.processInfo.environment["KVSTORE_STRESS_SEED"] ?? "") ?? UInt64(monotonicNow() % 1_000_000)
            var rng = SplitMix64(seed: seed)
            let container = try dir.container(group)
            _ = try container.store.collection("ledger", key: Int.self, value: Int.self)
            _ = try container.store.collection("ledgerMeta", key: String.self, value: Int.self)
            let reaper = ProcessReaper()
            defer { reaper.stopAll() }
            let (stopWriter, stopWidgets) = (dir.path + "/stop-writer", dir.path + "/stop-widgets")

            // The contention writer keeps ledgerMeta's count and sum in step with the ledger (no feed of
            // its own here, and never stopping itself).
            let writer = try reaper.helper(["contention-writer", dir.path, group, stopWriter, dir.path + "/never", "1000000000"])
            #expect(writer.waitForLine { $0 == "ready" } != nil)
            let widgets = try (0..<2).map { _ in try reaper.helper(["fire-widget", dir.path, group, "fire", stopWidgets]) }
            for widget in widgets { #expect(widget.waitForLine { $0 == "ready" } != nil) }

            let snapshotsDirectory = container.snapshotsDirectory
            var (rounds, kills, exports, publications, orphansSeen) = (0, 0, 0, 0, 0)
            // The temporary files (each named with its publisher's pid) seen right after a kill: each
            // is proof that a kill landed in the middle of a publication, between create and rename.
            var orphanNames = Set<String>()
            let started = monotonicNow()
            while Double(monotonicNow() - started) / 1e9 < duration {
                rounds += 1
                let exporter = try reaper.helper(["fire-exporter", dir.path, group])
                let publisher = try reaper.helper(["fire-publisher", dir.path, group, "fire", "16384"])
                // Let them work a random while (their start-up included), then kill each at once.
                usleep(UInt32(80_000 + rng.next() % 400_000))
                for process in [exporter, publisher] {
                    process.kill(SIGKILL)
                    let (_, lines, stderr) = process.wait()
                    if process.process.terminationReason == .uncaughtSignal {
                        kills += 1
                    } else {
                        Issue.record("a publisher ended by itself: \(describeTermination(process)) \(stderr)")
                    }
                    exports += lines.filter { $0.hasPrefix("exported ") }.count
                    publications += lines.filter { $0.hasPrefix("published ") }.count
                }
                let orphans = temporaryFiles(under: snapshotsDirectory)
                orphansSeen += orphans.count
                orphanNames.formUnion(orphans)
            }
            // The faults were injected: every publisher was killed (none finished by itself), and
            // some kills landed mid-publication. Without that, the checks below prove nothing.
            #expect(rounds > 0 && kills == 2 * rounds, "\(kills) kills in \(rounds) rounds")
            #expect(!orphanNames.isEmpty, "no kill landed in the middle of a publication (no temporary file was ever left): the test injected no fault")
            touch(stopWriter)
            let (_, writerLines, writerError) = writer.wait()
            #expect(exitedCleanly(writer), "the writer: \(writerError)")
            let commits = summaryFields(writerLines.last { $0.hasPrefix("summary") })["commits"] ?? "?"
            touch(stopWidgets)

            var figures: [[String: String]] = []
            for widget in widgets {
                let (_, lines, stderr) = widget.wait()
                #expect(exitedCleanly(widget), "\(stderr)")
                let fields = summaryFields(lines.last { $0.hasPrefix("summary") })
                figures.append(fields)
                let notes = lines.filter { !$0.hasPrefix("summary") && $0 != "ready" }
                for key in ["feedTorn", "feedBack", "feedInconsistent", "snapshotTorn", "inconsistent"] {
                    #expect(fields[key] == "0", "\(key): \(notes)")
                }
                #expect((Int(fields["feedReads"] ?? "") ?? 0) > 0 && (Int(fields["snapshotReads"] ?? "") ?? 0) > 0, "\(fields)")
            }

            // What the killed publishers left behind: the next export and publication clean it up.
            let leftBehind = temporaryFiles(under: snapshotsDirectory)
            let snapshots = try Snapshots(container: container)
            let unlistedBefore = try FileManager.default.contentsOfDirectory(atPath: snapshotsDirectory)
                .filter { SnapshotEntry.generation(ofFileName: $0) != nil }.count - (try snapshots.list().count)
            try snapshots.export(from: container.store)
            let pruned = try snapshots.prune(keep: 3)
            let feed = try WidgetFeed<TestFeedPayload>(name: "fire", container: container)
            try feed.publish(TestFeedPayload(sequence: 1, size: 16384))
            #expect(temporaryFiles(under: snapshotsDirectory) == [], "left after the next export, prune and publication")
            #expect(try feed.read().payload.isConsistent)
            let verify = try run(kvtool, ["snapshot", "verify", "--root", dir.path, "--group", group])
            #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
            let check = try run(kvtool, ["check", "--root", dir.path, "--group", group])
            #expect(check.status == 0, "\(check.stdout)\(check.stderr)")

            func sum(_ key: String) -> Int { figures.reduce(0) { $0 + (Int($1[key] ?? "") ?? 0) } }
            let seconds = Double(monotonicNow() - started) / 1e9
            report("snapshots-under-fire", "\(fixed(seconds)) s, seed \(seed): \(rounds) rounds, \(kills) publishers killed (SIGKILL) at random points; "
                   + "\(exports) snapshot exports and \(publications) feed publications completed meanwhile, while a writer committed \(commits) transactions")
            report("snapshots-under-fire", "2 widgets: \(sum("feedReads")) feed reads, \(sum("snapshotReads")) snapshots opened with SHA-256 checked and invariants held; "
                   + "torn feeds \(sum("feedTorn")), torn snapshots \(sum("snapshotTorn")), inconsistent \(sum("inconsistent") + sum("feedInconsistent")), "
                   + "generations going back \(sum("feedBack")); snapshots pruned between manifest and open (retried) \(sum("prunedUnderUs"))")
            report("snapshots-under-fire", "temporary files seen right after the kills (sum over rounds) \(orphansSeen), \(orphanNames.count) distinct (kills mid-publication), left at the end \(leftBehind.count) "
                   + "(+ \(max(0, unlistedBefore)) unlisted snapshots); after one export, prune and publication: 0 "
                   + "(prune removed \(pruned.removedTemporaryFiles.count) temporary, \(pruned.removedUnlisted.count) unlisted)")
        }
    }
}
