import Foundation
import Testing
import TestSupport
import KVStore
import SyncKit
import Workloads

/// `kvtool info`, `check`, `readers`, `compact` and `files` against real containers, with the built
/// binary and LMDB's own tools.
@Suite struct AdminCommandTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.admin"

    func tool(_ arguments: String..., stdin: String? = nil) throws -> ProcessResult {
        try run(productsDirectory() + "/kvtool", arguments + ["--root", dir.path, "--group", group], stdin: stdin)
    }

    var containerPath: String { dir.path + "/" + group }

    /// A container with history on `dailyRecords`, 20 checklist days, the subscription sample (an
    /// index), a `scores` collection, a consumer and one snapshot.
    @discardableResult
    func fixture() throws -> SharedContainer {
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        let history = try History.attach(to: container)
        let checklist = try ChecklistStore(store: container.store)
        try history.enable(.collection("dailyRecords"))
        _ = try history.consumer(named: "widget", startingAt: .oldest)
        try container.store.write(author: "app") { tx in
            for record in ChecklistDataset.records(days: 20) { try checklist.records.put(record, forKey: record.day, in: tx) }
        }
        try SubscriptionSampleData.populate(SubscriptionStore(store: container.store))
        let scores = try container.store.collection("scores", key: String.self, value: Int.self)
        try container.store.write { tx in
            try scores.put(42, forKey: "alice", in: tx)
            try scores.put(7, forKey: "bob", in: tx)
        }
        _ = try Snapshots(container: container).export(from: container.store)
        return container
    }

    func jsonObject(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    // MARK: - info

    @Test(.blockingWork) func infoShowsTheEnvironmentHistoryConsumersAndSnapshots() throws {
        let container = try fixture()
        let records = ChecklistDataset.records(days: 20).count
        var r = try tool("info")
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines[0] == "container  \(containerPath)")
        #expect(lines[1].hasPrefix("map size   ") && lines[1].hasSuffix(" pages of 4096 bytes)"))
        #expect(lines[2].hasPrefix("pages      ") && lines[2].contains(" used, ") && lines[2].hasSuffix(" free for reuse"))
        #expect(lines.contains("history    \(records) entries, tokens 1–\(records), purged through 0"))
        #expect(lines.contains("  recorded for collection 'dailyRecords'"))
        #expect(lines.contains { $0.hasPrefix("widget    ") && $0.contains("  0  ") && $0.contains("  \(records)  ") })
        #expect(lines.contains { $0.hasPrefix("1         ") })  // snapshot generation 1

        r = try tool("info", "--json")
        let info = try jsonObject(r.stdout)
        let environment = try #require(info["environment"] as? [String: Any])
        let stored = try container.store.environmentInfo()
        #expect(environment["lastTransactionID"] as? Int == stored.lastTransactionID)
        #expect(environment["freePages"] as? Int == stored.freePages)
        let history = try #require(info["history"] as? [String: Any])
        #expect(history["entries"] as? Int == records && history["firstToken"] as? Int == 1)
        #expect(history["currentToken"] as? Int == records && history["purgedThrough"] as? Int == 0)
        #expect(history["enabledFor"] as? [String] == ["collection 'dailyRecords'"])
        let consumers = try #require(history["consumers"] as? [[String: Any]])
        #expect(consumers.count == 1 && consumers[0]["name"] as? String == "widget" && consumers[0]["behind"] as? Int == records)
        let snapshots = try #require(info["snapshots"] as? [[String: Any]])
        #expect(snapshots.count == 1 && snapshots[0]["generation"] as? Int == 1)
        let collections = try #require(info["collections"] as? [[String: Any]])
        #expect(collections.first { $0["name"] as? String == "dailyRecords" }?["count"] as? Int == records)
    }

    @Test(.blockingWork) func infoOnAContainerWithoutHistoryOrSnapshots() throws {
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        try container.store.collection("scores", key: String.self, value: Int.self).put(1, forKey: "a")
        let r = try tool("info")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("\nhistory    not recorded in this container\n"))
        #expect(r.stdout.hasSuffix("\nsnapshots  none\n"))
        let info = try jsonObject(try tool("info", "--json").stdout)
        #expect(info["history"] == nil)
        #expect((info["snapshots"] as? [Any])?.isEmpty == true)
    }

    // MARK: - check

    @Test(.blockingWork) func checkPassesOnAHealthyContainer() throws {
        try fixture()
        let r = try tool("check")
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines == [
            "note: recomputed the index entries and derived values of 'dailyRecords'",
            "note: recomputed the index entries and derived values of 'billingEvents'",
            "note: decoded every value of 'billingEvents' as the subscriptions app's BillingEvent",
            "note: decoded every value of 'dailyRecords' as the checklist app's DailyRecord",
            "note: decoded every value of 'subscriptions' as the subscriptions app's Subscription",
            lines.last ?? "",
        ])
        #expect(lines.last?.hasPrefix("ok: ") == true && lines.last?.contains(", history, 1 snapshot; 0 stale reader slots cleared") == true)
        #expect(r.stderr.isEmpty)
        let json = try jsonObject(try tool("check", "--json").stdout)
        #expect(json["ok"] as? Bool == true && json["historyChecked"] as? Bool == true && json["snapshotsVerified"] as? Int == 1)
        #expect((json["problems"] as? [Any])?.isEmpty == true)
    }

    @Test(.blockingWork) func checkNamesEachKindOfInjectedDamage() throws {
        let container = try fixture()
        let store = container.store
        let day = ChecklistDataset.records(days: 20)[3].day
        let orphanDay = LogicalDay(year: 2020, month: 1, day: 1)!
        let event = try #require(try SubscriptionStore(store: store).billingEvents.entries(limit: 1).first)
        let scores = try #require(try store.rawDatabase(named: "c/scores"))
        let events = try #require(try store.rawDatabase(named: "c/billingEvents"))
        let summaries = try #require(try store.rawDatabase(named: "c/dailySummaries"))
        let history = try #require(try store.rawDatabase(named: "c/_history"))
        // Damage written raw: nothing is recorded, so no observer or history sees it.
        try store.write { tx in
            try tx.rawPut(scores, "bob".encodedKey, [0xFF, 0x00])                             // a corrupt value
            try tx.rawPut(scores, [0xFF, 0xFE], [0x01])                                         // a key that is not UTF-8
            #expect(try tx.rawDelete(events, event.key.encodedKey))                             // index entry left without its record
            try tx.rawPut(summaries, day.encodedKey, [UInt8](repeating: 0x7F, count: 56))       // a stale derived value
            try tx.rawPut(summaries, orphanDay.encodedKey, [UInt8](repeating: 0, count: 56))    // a derived entry without source
            #expect(try tx.rawDelete(history, UInt64(5).encodedKey))                            // a hole in history
        }
        let snapshot = try #require(try Snapshots(container: container).latest())
        let snapshotPath = container.snapshotsDirectory + "/" + snapshot.file
        let handle = try #require(FileHandle(forUpdatingAtPath: snapshotPath))
        try handle.seek(toOffset: 5000)
        handle.write(Data([0xAB]))
        try handle.close()

        let r = try tool("check")
        #expect(r.status == 74)
        let expected = [
            "scores key 0xfffe: does not decode as string:",
            "scores key bob: not valid CBOR:",
            "billingEvents index bySubscription key \(event.key.uuidString): index key [",
            "dailySummaries key 2020-01-01: no record at this key in 'dailyRecords'",
            "dailyRecords key \(day): the derived entry in dailySummaries differs from what the record derives",
            "_history key 6: token 5 is missing",
            "Snapshots/\(snapshot.file): ",
        ]
        let lines = r.stdout.split(separator: "\n").map(String.init)
        for fragment in expected {
            #expect(lines.contains { $0.hasPrefix(fragment) }, "\(fragment) in:\n\(r.stdout)")
        }
        #expect(lines.last?.hasPrefix("\(expected.count) problems: ") == true, "\(r.stdout)")
        #expect(r.stderr == "kvtool: error: \(expected.count) integrity problems in \(group)\n")

        let json = try jsonObject(try tool("check", "--json").stdout)
        let kinds = Set(((json["problems"] as? [[String: Any]]) ?? []).compactMap { $0["kind"] as? String })
        #expect(kinds == ["corruptKey", "corruptValue", "indexEntryWithoutRecord", "derivedEntryWithoutSource",
                          "derivedEntryMismatch", "history", "snapshot"])
    }

    @Test(.blockingWork) func checkFindsARecordMissingFromItsIndex() throws {
        let container = try fixture()
        let event = try #require(try SubscriptionStore(store: container.store).billingEvents.entries(limit: 1).first)
        let index = try #require(try container.store.rawDatabase(named: "i/billingEvents/bySubscription"))
        var removed = 0
        try container.store.write { tx in
            var doomed: [[UInt8]] = []
            try tx.rawScan(index) { key, _ in
                if Array(key).suffix(16) == Array(event.key.encodedKey) { doomed.append(Array(key)) }
                return true
            }
            for key in doomed where try tx.rawDelete(index, key) { removed += 1 }
        }
        #expect(removed == 1)
        let r = try tool("check")
        #expect(r.status == 74)
        #expect(r.stdout.hasPrefix("billingEvents index bySubscription key \(event.key): the record has no entry in the index\n"), "\(r.stdout)")
    }

    @Test(.blockingWork) func longCommandsDrawAProgressBarOnlyOnATerminal() throws {
        try fixture()
        // Python gives kvtool a pseudo-terminal as standard error and prints what was drawn on it.
        let script = """
            import os, pty, subprocess, sys
            master, slave = pty.openpty()
            subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=slave)
            os.close(slave)
            drawn = b""
            try:
                while chunk := os.read(master, 4096): drawn += chunk
            except OSError:
                pass
            sys.stdout.write(drawn.decode())
            """
        let kvtool = productsDirectory() + "/kvtool"
        let base = ["--root", dir.path, "--group", group]
        let check = try run("/usr/bin/python3", ["-c", script, kvtool, "check"] + base)
        #expect(check.stdout.contains("check [==============================] 100% "), "\(check.stdout.debugDescription)")
        #expect(check.stdout.hasSuffix("\r\u{1B}[K"), "the bar is erased when done: \(check.stdout.debugDescription)")
        let compact = try run("/usr/bin/python3", ["-c", script, kvtool, "compact", dir.path + "/tty.mdb"] + base)
        #expect(compact.stdout.contains("compact ["), "\(compact.stdout.debugDescription)")
        // Not a terminal: nothing at all on standard error.
        let piped = try tool("compact", dir.path + "/piped.mdb")
        #expect(piped.status == 0 && piped.stderr.isEmpty)
    }

    @Test(.blockingWork) func mdbStatReadsTheContainersWeCreate() throws {
        let container = try fixture()
        let demoRoot = dir.path + "/demo"
        try FileManager.default.createDirectory(atPath: demoRoot, withIntermediateDirectories: true)
        let demo = try run(productsDirectory() + "/kvtool", ["demo", "--root", demoRoot])
        #expect(demo.status == 0, "\(demo.stderr)")
        for store in [containerPath + "/Store", demoRoot + "/group.com.yourcompany.VirtualTrainer/Store"] {
            let stat = try run("/usr/bin/mdb_stat", ["-e", "-f", "-r", "-a", store])
            #expect(stat.status == 0, "\(store): \(stat.stderr)")
            #expect(stat.stdout.contains("Status of c/dailyRecords") && stat.stdout.contains("Status of _catalog"), "\(stat.stdout)")
        }
        for name in try container.store.databaseNames() {
            #expect(try run("/usr/bin/mdb_stat", ["-s", name, containerPath + "/Store"]).status == 0, "\(name)")
        }
    }

    @Test(.blockingWork) func helpListsEverySubcommandOfTheContractAndCompletionScriptsExist() throws {
        var contract = ["info", "collections", "get", "put", "delete", "scan", "dump", "load", "defaults", "files",
                        "history", "watch", "snapshot", "readers", "check", "compact", "bench", "demo"]
        #if Serve
        contract.append("serve")
        #endif
        let help = try run(productsDirectory() + "/kvtool", ["--help"])
        #expect(help.status == 0)
        let listed = help.stdout.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("  "), !line.hasPrefix("   "), let word = line.split(separator: " ").first else { return nil }
            return String(word)
        }
        #expect(contract.allSatisfy(listed.contains), "\(listed)")
        for shell in ["bash", "zsh", "fish"] {
            let script = try run(productsDirectory() + "/kvtool", ["--generate-completion-script", shell])
            #expect(script.status == 0 && ["dump", "readers", "compact", "files"].allSatisfy(script.stdout.contains), "\(shell)")
        }
        // The README's command table names every subcommand too.
        let readme = try String(contentsOfFile: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().path + "/README.md", encoding: .utf8)
        let table = readme.split(separator: "\n").filter { $0.hasPrefix("| `") }
        #expect(contract.allSatisfy { name in table.contains { $0.contains("`\(name)") } })
    }

    // MARK: - readers

    @Test(.blockingWork) func readersShowsLiveAndStaleSlotsAndCheckClearsTheStaleOnes() throws {
        try fixture()
        let reader = try BackgroundProcess.helper(["hold-read", dir.path, group])
        #expect(reader.waitForLine { $0 == "reading" } != nil)
        var r = try tool("readers")
        #expect(r.status == 0, "\(r.stderr)")
        let row = r.stdout.split(separator: "\n").first { $0.hasPrefix("\(reader.pid) ") }
        #expect(row?.contains(" alive ") == true, "\(r.stdout)")
        #expect(r.stdout.hasPrefix("PID  "))

        reader.kill(SIGKILL)
        _ = reader.wait()
        r = try tool("readers", "--json")
        let slots = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])
        let stale = slots.first { $0["pid"] as? Int == Int(reader.pid) }
        #expect(stale?["alive"] as? Bool == false && stale?["transactionID"] is Int, "\(r.stdout)")

        r = try tool("readers", "--check")
        #expect(r.stdout == "cleared 1 stale reader slot\n", "\(r.stderr)")
        r = try tool("readers")
        #expect(!r.stdout.contains("\(reader.pid) "), "\(r.stdout)")
        r = try tool("readers", "--check", "--json")
        #expect(r.stdout == "{\"cleared\":0}\n")
    }

    // MARK: - compact

    @Test(.blockingWork) func compactPublishesACopyThatLMDBsToolsReadAndThatHoldsTheSameData() throws {
        try fixture()
        let destination = dir.path + "/compact.mdb"
        var r = try tool("compact", destination)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasPrefix("compacted ") && r.stdout.contains(" into \(destination): "))
        var info = stat()
        #expect(lstat(destination, &info) == 0 && info.st_mode & 0o777 == 0o600)

        let stat = try run("/usr/bin/mdb_stat", ["-n", "-a", destination])
        #expect(stat.status == 0 && stat.stdout.contains("Status of dailyRecords") == false && stat.stdout.contains("Status of c/dailyRecords"), "\(stat.stderr)")
        let original = try run("/usr/bin/mdb_dump", ["-a", containerPath + "/Store"])
        let copy = try run("/usr/bin/mdb_dump", ["-n", "-a", destination])
        #expect(original.status == 0 && copy.status == 0)
        func withoutMapSize(_ text: String) -> [Substring] { text.split(separator: "\n").filter { !$0.hasPrefix("mapsize=") } }
        #expect(withoutMapSize(original.stdout) == withoutMapSize(copy.stdout))

        r = try tool("compact", destination)
        #expect(r.status == 65 && r.stderr == "kvtool: error: \(destination) exists; pass --force to replace it\n")
        r = try tool("compact", destination, "--force", "--json")
        #expect(r.status == 0, "\(r.stderr)")
        let json = try jsonObject(r.stdout)
        #expect(json["path"] as? String == destination && (json["size"] as? Int ?? 0) > 0)
        r = try tool("compact", dir.path + "/missing/copy.mdb")
        #expect(r.status == 1 && r.stderr == "kvtool: error: the destination's directory \(dir.path)/missing does not exist\n")
        // No temporary file is left next to the destination.
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path)
        #expect(names.filter { $0.contains("kvtmp") }.isEmpty, "\(names)")
    }

    // MARK: - files

    @Test(.blockingWork) func filesPutLsCatRm() throws {
        try fixture()
        var r = try tool("files", "put", "notes/today.txt", "-", stdin: "こんにちは\n")
        #expect(r.status == 0 && r.stdout.isEmpty, "\(r.stderr)")
        let local = dir.path + "/local.bin"
        try Data([0x89, 0x50, 0x4E, 0x47]).write(to: URL(fileURLWithPath: local))
        r = try tool("files", "put", "img/a.png", local, "--json")
        #expect(r.stdout == "{\"path\":\"img\\/a.png\",\"size\":4}\n" || r.stdout == "{\"path\":\"img/a.png\",\"size\":4}\n", "\(r.stdout)")

        r = try tool("files", "cat", "notes/today.txt")
        #expect(r.stdout == "こんにちは\n")
        r = try tool("files", "ls", "-r")
        #expect(r.stdout == "img/a.png\nnotes/today.txt\n", "\(r.stdout)")
        r = try tool("files", "ls", "notes", "--json")
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])
        #expect(entries.count == 1 && entries[0]["path"] as? String == "notes/today.txt" && entries[0]["size"] as? Int == 16)
        r = try tool("files", "ls")
        let rows = r.stdout.split(separator: "\n").map(String.init)
        #expect(rows.first == "KIND  SIZE  MODIFIED              NAME")
        #expect(rows.dropFirst().map { $0.split(separator: " ").last.map(String.init) ?? "" } == ["img/", "notes/"])
        var mode = stat()
        #expect(lstat(containerPath + "/Files/notes/today.txt", &mode) == 0 && mode.st_mode & 0o777 == 0o600)

        r = try tool("files", "rm", "notes/today.txt")
        #expect(r.status == 0)
        r = try tool("files", "rm", "notes/today.txt")
        #expect(r.status == 1 && r.stderr.hasPrefix("kvtool: error: ") && r.stderr.contains("notes/today.txt"), "\(r.stderr)")
        r = try tool("files", "cat", "notes/missing.txt")
        #expect(r.status == 1)
    }

    @Test(.blockingWork) func filesRefusesSymbolicLinksPlantedInFiles() throws {
        try fixture()
        let outside = dir.path + "/outside.txt"
        try Data("secret".utf8).write(to: URL(fileURLWithPath: outside))
        try FileManager.default.createDirectory(atPath: containerPath + "/Files", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: containerPath + "/Files/link.txt", withDestinationPath: outside)
        try FileManager.default.createSymbolicLink(atPath: containerPath + "/Files/linkdir", withDestinationPath: dir.path)
        var r = try tool("files", "cat", "link.txt")
        expectOneLineError(r, ["files", "cat", "link.txt"], status: 65, mentioning: "symbolic link")
        r = try tool("files", "put", "linkdir/x.txt", "-", stdin: "x")
        expectOneLineError(r, ["files", "put", "linkdir/x.txt"], status: 65, mentioning: "symbolic link")
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/x.txt"))
        r = try tool("files", "put", "link.txt", "-", stdin: "overwritten")
        expectOneLineError(r, ["files", "put", "link.txt"], status: 65, mentioning: "symbolic link")
        #expect(try String(contentsOfFile: outside, encoding: .utf8) == "secret")
        r = try tool("files", "ls")
        #expect(r.stdout.contains("symlink") && r.stdout.contains("link.txt"))
        // Removing the link removes the link, never its target.
        r = try tool("files", "rm", "link.txt")
        #expect(r.status == 0 && FileManager.default.fileExists(atPath: outside))
    }
}
