import Foundation
import Testing
import TestSupport
import KVStore
import SyncKit
import Workloads
#if canImport(Glibc)
import Glibc
#endif

/// Snapshots: export → list → verify → prune, damage and bad input, orphans, concurrent exporters,
/// and a snapshot read in another process.
@Suite struct SnapshotExportTests {
    let dir = TemporaryDirectory()
    let group = "group.com.shibu.checklist"

    /// A container holding the checklist dataset for day indexes `0..<days`.
    func checklistContainer(days: Int) throws -> (SharedContainer, ChecklistStore) {
        let container = try dir.container(group)
        let checklist = try ChecklistStore(store: container.store)
        try container.store.write { tx in
            for record in ChecklistDataset.records(days: days) { try checklist.records.put(record, forKey: record.day, in: tx) }
        }
        return (container, checklist)
    }

    func bytes(_ path: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path))) }

    /// The pid of a process that has exited (and been reaped).
    static func deadPID() throws -> Int32 {
        // (Through BackgroundProcess, whose wait has a deadline.)
        let process = try BackgroundProcess("/bin/true", [])
        process.wait()
        return process.pid
    }

    @Test(.blockingWork) func exportListVerifyPrune() throws {
        let (container, checklist) = try checklistContainer(days: 30)
        let snapshots = try Snapshots(container: container)
        #expect(try snapshots.list().isEmpty)

        var exported: [SnapshotEntry] = []
        for extra in 0..<3 {
            let record = DailyRecord(day: ChecklistDataset.firstDay + 100 + extra, scores: ["think.1": 5], memos: [:])
            try checklist.records.put(record, forKey: record.day)
            exported.append(try snapshots.export(from: container.store))
            #expect(exported.last?.sourceTransactionID == (try container.store.environmentInfo().lastTransactionID))
        }
        #expect(exported.map(\.generation) == [1, 2, 3])
        #expect(exported.map(\.file) == ["snapshot-000001.mdb", "snapshot-000002.mdb", "snapshot-000003.mdb"])
        #expect(zip(exported, exported.dropFirst()).allSatisfy { $0.sourceTransactionID < $1.sourceTransactionID })
        #expect(try snapshots.list() == exported)
        #expect(try snapshots.latest() == exported[2])

        // The manifest is what the entries say, and sha256sum agrees with it.
        let manifest = try JSONSerialization.jsonObject(with: Data(try bytes(snapshots.directory + "/manifest.json"))) as? [String: Any]
        #expect(manifest?["formatVersion"] as? Int == 1)
        #expect(manifest?["lastGeneration"] as? Int == 3)
        for entry in exported {
            let r = try run("/usr/bin/sha256sum", [snapshots.path(of: entry)])
            #expect(r.stdout.hasPrefix(entry.sha256 + " "))
            #expect(try bytes(snapshots.path(of: entry)).count == entry.size)
        }
        // Each generation holds the state it was exported from.
        for (index, entry) in exported.enumerated() {
            let store = try snapshots.open(generation: entry.generation)
            let records = try ChecklistStore(store: store).records
            #expect(try records.count() == ChecklistDataset.records(days: 30).count + index + 1)
        }
        let verification = try snapshots.verify()
        #expect(verification.isValid && verification.checked == exported)

        // Prune keeps the newest; generations are never reused.
        let pruned = try snapshots.prune(keep: 2)
        #expect(pruned.removed == [exported[0]] && pruned.kept == Array(exported[1...]))
        #expect(try snapshots.list().map(\.generation) == [2, 3])
        #expect(!FileManager.default.fileExists(atPath: snapshots.path(of: exported[0])))
        #expect(try snapshots.export(from: container.store).generation == 4)
        #expect(try snapshots.prune(keep: 0).removed.map(\.generation) == [2, 3, 4])
        #expect(try snapshots.list().isEmpty)
        #expect(try snapshots.export(from: container.store).generation == 5)
        #expect(try snapshots.verify().isValid)
        let files = try FileManager.default.contentsOfDirectory(atPath: snapshots.directory).sorted()
        #expect(files == [".snapshots.lock", "manifest.json", "snapshot-000005.mdb"])
    }

    @Test(.blockingWork) func verifyReportsEachDamagedFileByName() throws {
        let (container, _) = try checklistContainer(days: 20)
        let snapshots = try Snapshots(container: container)
        let entries = try (0..<4).map { _ in try snapshots.export(from: container.store) }
        #expect(try snapshots.verify().isValid)

        // One flipped byte in the middle of generation 1.
        let first = snapshots.path(of: entries[0])
        var data = try bytes(first)
        data[data.count / 2] ^= 0x01
        try Data(data).write(to: URL(fileURLWithPath: first))
        var result = try snapshots.verify()
        #expect(result.problems.count == 1)
        let problem = try #require(result.problems.first)
        #expect(problem.file == "snapshot-000001.mdb" && problem.generation == 1)
        guard case .checksumMismatch(let expected, let actual) = problem.kind else {
            Issue.record("expected a checksum mismatch, got \(problem)")
            return
        }
        #expect(expected == entries[0].sha256 && actual != expected)
        #expect(problem.description.hasPrefix("snapshot-000001.mdb (generation 1): checksum mismatch"))
        #expect(!problem.description.contains("\n"))
        #expect(throws: SnapshotError.self) { try snapshots.open(generation: 1, verifying: true) }

        // A truncated file, a missing one, a directory in place of one, and a stray unlisted one.
        #expect(truncate(snapshots.path(of: entries[1]), 4096) == 0)
        #expect(unlink(snapshots.path(of: entries[2])) == 0)
        #expect(unlink(snapshots.path(of: entries[3])) == 0 && mkdir(snapshots.path(of: entries[3]), 0o700) == 0)
        try Data("stray".utf8).write(to: URL(fileURLWithPath: snapshots.directory + "/snapshot-000009.mdb"))
        result = try snapshots.verify()
        #expect(result.problems.map(\.file) == ["snapshot-000001.mdb", "snapshot-000002.mdb", "snapshot-000003.mdb",
                                                "snapshot-000004.mdb", "snapshot-000009.mdb"])
        #expect(result.problems.map(\.kindName) == ["checksumMismatch", "sizeMismatch", "missing", "notARegularFile", "unlisted"])
        #expect(result.problems[1].kind == .sizeMismatch(expected: entries[1].size, actual: 4096))
        // Verifying changed nothing.
        #expect(try snapshots.list() == entries)
    }

    @Test(.blockingWork) func aCorruptManifestIsAClearErrorAndNothingIsChanged() throws {
        let (container, _) = try checklistContainer(days: 10)
        let snapshots = try Snapshots(container: container)
        let entry = try snapshots.export(from: container.store)
        let manifestPath = snapshots.directory + "/manifest.json"
        let good = try bytes(manifestPath)
        let goodText = String(decoding: good, as: UTF8.self)

        let cases: [(String, String)] = [
            ("{ not json", "not valid JSON"),
            ("{}", "missing field 'formatVersion'"),
            (goodText.replacingOccurrences(of: "\"snapshot-000001.mdb\"", with: "\"../../Store/data.mdb\""),
             "names file \"../../Store/data.mdb\"; expected snapshot-000001.mdb"),
            (goodText.replacingOccurrences(of: entry.sha256, with: "xyz"), "malformed sha256"),
            (goodText.replacingOccurrences(of: "\"lastGeneration\" : 1", with: "\"lastGeneration\" : 0"), "lastGeneration 0"),
            (goodText.replacingOccurrences(of: "\"lastGeneration\" : 1", with: "\"lastGeneration\" : 9223372036854775807"),
             "over the limit"),
            (goodText.replacingOccurrences(of: "\"size\" : \(entry.size)", with: "\"size\" : \"big\""), "size"),
        ]
        for (text, fragment) in cases {
            try Data(text.utf8).write(to: URL(fileURLWithPath: manifestPath))
            for attempt in [{ _ = try snapshots.list() }, { _ = try snapshots.export(from: container.store) },
                            { _ = try snapshots.prune(keep: 0) }, { _ = try snapshots.verify() }] {
                do {
                    try attempt()
                    Issue.record("no error for manifest \(text.prefix(40))")
                } catch let error as SnapshotError {
                    guard case .corruptManifest(let path, let reason) = error else {
                        Issue.record("\(error)")
                        continue
                    }
                    #expect(path == manifestPath)
                    #expect(reason.contains(fragment), "\(reason)")
                    #expect(!error.description.contains("\n"))
                }
            }
            // Nothing was exported, pruned or rewritten.
            #expect(try bytes(manifestPath) == Array(text.utf8))
            #expect(try FileManager.default.contentsOfDirectory(atPath: snapshots.directory).filter { $0.hasSuffix(".mdb") }
                    == ["snapshot-000001.mdb"])
        }
        try Data(goodText.replacingOccurrences(of: "\"formatVersion\" : 1", with: "\"formatVersion\" : 7").utf8)
            .write(to: URL(fileURLWithPath: manifestPath))
        #expect(throws: SnapshotError.unsupportedManifestVersion(path: manifestPath, version: 7, supported: 1)) {
            try snapshots.list()
        }
        // Repaired, everything works again.
        try Data(good).write(to: URL(fileURLWithPath: manifestPath))
        #expect(try snapshots.list() == [entry])
    }

    @Test(.blockingWork) func badGenerationsAndEmptyDirectoriesAreClearErrors() throws {
        let container = try dir.container(group)
        let snapshots = try Snapshots(container: container)
        #expect(throws: SnapshotError.noSnapshots(directory: snapshots.directory)) { try snapshots.openLatest() }
        #expect(throws: SnapshotError.generationNotFound(42)) { try snapshots.open(generation: 42) }
        #expect(throws: SnapshotError.invalidKeepCount(-1)) { try snapshots.prune(keep: -1) }
        try snapshots.export(from: container.store)
        #expect(throws: SnapshotError.generationNotFound(0)) { try snapshots.entry(generation: 0) }
        #expect(throws: KVStoreError.self) { try Snapshots(groupIdentifier: "group.com.example.absent", root: dir.path) }
        #expect(throws: KVStoreError.self) { try Snapshots(groupIdentifier: "../etc", root: dir.path) }
        #expect(SnapshotEntry.generation(ofFileName: "snapshot-000007.mdb") == 7)
        #expect(SnapshotEntry.generation(ofFileName: "snapshot-1234567.mdb") == 1_234_567)
        for name in ["snapshot-7.mdb", "snapshot-0000007.mdb", "snapshot-000000.mdb", "snapshot-00000a.mdb", "x-000007.mdb"] {
            #expect(SnapshotEntry.generation(ofFileName: name) == nil, "\(name)")
        }
    }

    @Test(.blockingWork) func orphansOfCrashedExportsAreRemovedAndTheirGenerationsSkipped() throws {
        let (container, _) = try checklistContainer(days: 10)
        let snapshots = try Snapshots(container: container)
        try snapshots.export(from: container.store)
        let dead = try Self.deadPID()
        let orphans = [".kvtmp-snapshot-000002.mdb-\(dead)-0123456789abcdef",
                       ".kvtmp-manifest.json-\(getpid())-fedcba9876543210"]
        for name in orphans + [".unrelated", "notes.txt"] {
            try Data("partial".utf8).write(to: URL(fileURLWithPath: snapshots.directory + "/" + name))
        }
        // An export that crashed after publishing generation 2 but before writing the manifest.
        try FileManager.default.copyItem(atPath: snapshots.directory + "/snapshot-000001.mdb",
                                         toPath: snapshots.directory + "/snapshot-000002.mdb")
        #expect(try snapshots.verify().problems.map(\.description) == ["snapshot-000002.mdb: not listed in the manifest"])

        let next = try snapshots.export(from: container.store)
        #expect(next.generation == 3)
        var names = try FileManager.default.contentsOfDirectory(atPath: snapshots.directory).sorted()
        #expect(names == [".snapshots.lock", ".unrelated", "manifest.json", "notes.txt",
                          "snapshot-000001.mdb", "snapshot-000002.mdb", "snapshot-000003.mdb"])
        let pruned = try snapshots.prune(keep: 5)
        #expect(pruned.removed.isEmpty && pruned.removedUnlisted == ["snapshot-000002.mdb"])
        names = try FileManager.default.contentsOfDirectory(atPath: snapshots.directory).sorted()
        #expect(names == [".snapshots.lock", ".unrelated", "manifest.json", "notes.txt", "snapshot-000001.mdb", "snapshot-000003.mdb"])
        #expect(try snapshots.verify().isValid)
    }

    @Test(.blockingWork) func concurrentExportersInThreeProcessesGetDistinctIncreasingGenerations() throws {
        let (container, _) = try checklistContainer(days: 60)
        let snapshots = try Snapshots(container: container)
        let others = try (0..<2).map { _ in try BackgroundProcess.helper(["snapshot-export", dir.path, group, "6"]) }
        var mine: [Int] = []
        for _ in 0..<6 { mine.append(try snapshots.export(from: container.store).generation) }
        var all = mine
        for other in others {
            let (status, lines, stderr) = other.wait()
            #expect(status == 0, "\(stderr)")
            let generations = lines.compactMap { Int($0.split(separator: " ").first ?? "") }
            #expect(generations == generations.sorted() && generations.count == 6)
            all += generations
        }
        #expect(mine == mine.sorted())
        #expect(all.sorted() == Array(1...18))
        let listed = try snapshots.list()
        #expect(listed.map(\.generation) == Array(1...18))
        #expect(zip(listed, listed.dropFirst()).allSatisfy { $0.sourceTransactionID <= $1.sourceTransactionID })
        #expect(try snapshots.verify().isValid)
    }

    @Test(.blockingWork) func aWidgetProcessReadsTheSnapshotWithoutTheMainStore() throws {
        let (container, _) = try checklistContainer(days: 365)
        let snapshots = try Snapshots(container: container)
        let entry = try snapshots.export(from: container.store)
        // Take the live store away: the widget must not need it.
        let store = container.path + "/Store"
        try FileManager.default.moveItem(atPath: store, toPath: container.path + "/Store.away")
        try Data("not a directory".utf8).write(to: URL(fileURLWithPath: store))
        let denied = try helper(["open-store", dir.path, group])
        #expect(denied.status != 0)

        for generation in ["latest", String(entry.generation)] {
            let r = try helper(["snapshot-checklist", dir.path, group, generation])
            #expect(r.status == 0, "\(r.stderr)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
            #expect(object["readOnly"] as? Bool == true && object["copyFile"] as? Bool == true)
            #expect(object["records"] as? Int == 343 && object["summaries"] as? Int == 343)
            #expect(object["scores"] as? Int == 9288)
            #expect(object["current"] as? Int == 2 && object["longest"] as? Int == 16)
            let today = try #require(ChecklistDataset.records().last)
            #expect(object["total"] as? Double == today.cachedTotalAverage)
        }
        // Nothing but the snapshot itself was created next to it (MDB_NOLOCK).
        #expect(!FileManager.default.fileExists(atPath: snapshots.path(of: entry) + "-lock"))
    }
}
