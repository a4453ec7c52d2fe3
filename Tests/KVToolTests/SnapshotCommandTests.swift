import Foundation
import Testing
import TestSupport
import KVStore
import Workloads
#if canImport(Glibc)
import Glibc
#endif

/// `kvtool snapshot export|list|verify|prune`, run as the built binary.
@Suite struct SnapshotCommandTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.cli"

    func kvtool(_ arguments: [String]) throws -> ProcessResult {
        try run(productsDirectory() + "/kvtool", arguments)
    }

    /// `kvtool snapshot ARGS --root DIR --group G`.
    func snapshot(_ arguments: String...) throws -> ProcessResult {
        try kvtool(["snapshot"] + arguments + ["--root", dir.path, "--group", group])
    }

    func json(_ result: ProcessResult) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
    }

    func fixture() throws -> SharedContainer {
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        let checklist = try ChecklistStore(store: container.store)
        try container.store.write { tx in
            for record in ChecklistDataset.records(days: 30) { try checklist.records.put(record, forKey: record.day, in: tx) }
        }
        return container
    }

    var snapshotsDirectory: String { dir.path + "/" + group + "/Snapshots" }

    @Test(.blockingWork) func exportListVerifyPrune() throws {
        let container = try fixture()
        let txn = try container.store.environmentInfo().lastTransactionID
        var r = try snapshot("export")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasPrefix("exported snapshot-000001.mdb: generation 1, source txn \(txn), "))
        r = try kvtool(["--root", dir.path, "--group", group, "--json", "snapshot", "export"])  // global options first
        #expect(r.status == 0, "\(r.stderr)")
        let exported = try #require(try json(r) as? [String: Any])
        #expect(exported["generation"] as? Int == 2 && exported["file"] as? String == "snapshot-000002.mdb")
        #expect(exported["sourceTransactionID"] as? Int == txn)
        #expect(exported["path"] as? String == snapshotsDirectory + "/snapshot-000002.mdb")
        let sha = try #require(exported["sha256"] as? String)
        #expect(try run("/usr/bin/sha256sum", [snapshotsDirectory + "/snapshot-000002.mdb"]).stdout.hasPrefix(sha + " "))
        _ = try snapshot("export")

        r = try snapshot("list")
        #expect(r.status == 0)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 4 && lines[0].hasPrefix("GENERATION  FILE"))
        #expect(lines[2].hasPrefix("2           snapshot-000002.mdb  \(txn)") && lines[2].hasSuffix(sha))
        r = try snapshot("list", "--json")
        let listed = try #require(try json(r) as? [[String: Any]])
        #expect(listed.map { $0["generation"] as? Int } == [1, 2, 3])
        #expect(listed[1]["sha256"] as? String == sha && listed[1]["size"] as? Int == exported["size"] as? Int)

        r = try snapshot("verify")
        #expect(r.status == 0 && r.stdout == "ok: 3 snapshots verified\n", "\(r.stderr)")
        r = try snapshot("verify", "--json")
        let verified = try #require(try json(r) as? [String: Any])
        #expect(verified["ok"] as? Bool == true && verified["checked"] as? Int == 3)

        r = try snapshot("prune", "--keep", "1")
        #expect(r.status == 0)
        #expect(r.stdout == "removed snapshot-000001.mdb\nremoved snapshot-000002.mdb\nkept 1 snapshot\n")
        r = try snapshot("prune", "--keep", "1", "--json")
        #expect(r.stdout == "{\"kept\":[\"snapshot-000003.mdb\"],\"removed\":[],\"removedTemporaryFiles\":[],\"removedUnlisted\":[]}\n")
        r = try snapshot("list", "--json")
        #expect((try json(r) as? [[String: Any]])?.map { $0["generation"] as? Int } == [3])
    }

    @Test(.blockingWork) func verifyPrintsOneLinePerProblemAndExitsNonZero() throws {
        _ = try fixture()
        for _ in 0..<3 { #expect(try snapshot("export").status == 0) }
        // Flip a byte in generation 2 and remove generation 3.
        let second = snapshotsDirectory + "/snapshot-000002.mdb"
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: second)))
        bytes[100] ^= 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: second))
        #expect(unlink(snapshotsDirectory + "/snapshot-000003.mdb") == 0)

        var r = try snapshot("verify")
        #expect(r.status == 74)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 2)
        #expect(lines[0].hasPrefix("snapshot-000002.mdb (generation 2): checksum mismatch: manifest has sha256 "))
        #expect(lines[1] == "snapshot-000003.mdb (generation 3): listed in the manifest but missing")
        #expect(r.stderr == "kvtool: error: 2 problems in the snapshots of \(group)\n")

        r = try snapshot("verify", "--json")
        #expect(r.status == 74)
        let report = try #require(try json(r) as? [String: Any])
        #expect(report["ok"] as? Bool == false)
        let problems = try #require(report["problems"] as? [[String: Any]])
        #expect(problems.map { $0["file"] as? String } == ["snapshot-000002.mdb", "snapshot-000003.mdb"])
        #expect(problems.map { $0["kind"] as? String } == ["checksumMismatch", "missing"])
    }

    @Test(.blockingWork) func badInputIsOneLineWithItsExitCode() throws {
        _ = try fixture()
        func check(_ arguments: [String], _ status: Int32, _ fragment: String) throws {
            expectOneLineError(try kvtool(arguments), arguments, status: status, mentioning: fragment)
        }
        let base = ["--root", dir.path, "--group", group]
        try check(["snapshot", "prune", "--keep=-1"] + base, 64, "--keep must be 0 or more")
        try check(["snapshot", "prune"] + base, 64, "--keep")
        try check(["snapshot", "frobnicate"], 64, "frobnicate")
        try check(["snapshot", "list", "--root", dir.path, "--group", "group.com.example.absent"], 1, "no container")
        try check(["snapshot", "export", "--root", dir.path, "--group", "group.com.example.absent"], 1, "no container")
        try check(["snapshot", "list", "--root", dir.path, "--group", "../etc"], 65, "invalid group identifier")

        // A corrupt manifest: every subcommand refuses it in one line and changes nothing.
        #expect(try kvtool(["snapshot", "export"] + base).status == 0)
        let manifest = snapshotsDirectory + "/manifest.json"
        try Data("{\"formatVersion\": 1, \"lastGeneration\": 1, \"snapshots\": [{\"generation\": \"one\"}]}".utf8)
            .write(to: URL(fileURLWithPath: manifest))
        for command in ["export", "list", "verify"] {
            try check(["snapshot", command] + base, 74, "corrupt snapshot manifest \(manifest)")
        }
        try check(["snapshot", "prune", "--keep", "0"] + base, 74, "corrupt snapshot manifest")
        #expect(try FileManager.default.contentsOfDirectory(atPath: snapshotsDirectory).filter { $0.hasSuffix(".mdb") }
                == ["snapshot-000001.mdb"])
    }
}
