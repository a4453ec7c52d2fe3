import Foundation
import Testing
import TestSupport
import KVStore
import Workloads

/// Replays `Fixtures/bad-inputs.jsonl` against the built binary: each bad input must print exactly the
/// recorded one-line error, exit with its class's code, print nothing on stdout, and leave the store
/// and the shared files exactly as they were.
///
/// Each line is `{"args": [...], "stdin": "...", "status": N, "error": "kvtool: error: ..."}`. In
/// `args`, `stdin` and `error`, `{root}` and `{group}` stand for the fixture's; a `stdin` of
/// `{repeat:TEXT:N}` is TEXT repeated N times. To re-record after a deliberate wording change, run
/// with `KVTOOL_RECORD_CORPUS=1` and review the diff.
@Suite struct BadInputCorpusTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.corpus"

    static var corpusPath: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().path + "/Fixtures/bad-inputs.jsonl"
    }

    func fixture() throws {
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        try container.store.collection("scores", key: String.self, value: Int.self).put(42, forKey: "alice")
        try container.store.collection("days", key: LogicalDay.self, value: Int.self).put(1, forKey: LogicalDay(year: 2026, month: 11, day: 21)!)
        try container.store.collection("ids", key: UUID.self, value: Int.self).put(1, forKey: UUID(uuidString: "6F9619FF-8B86-D011-B42D-00C04FC964FF")!)
        try container.store.collection("counters", key: Int64.self, value: Int.self).put(1, forKey: 42)
        try container.store.collection("events", key: Pair<LogicalDay, String>.self, value: Int.self)
            .put(1, forKey: Pair(LogicalDay(year: 2026, month: 1, day: 1)!, "a"))
        _ = try ChecklistStore(store: container.store)
        try container.defaults().set("v", forKey: "k")
        try container.files.write(Data("hello".utf8), to: "a.txt")
    }

    func substitute(_ text: String) -> String {
        text.replacingOccurrences(of: "{root}", with: dir.path).replacingOccurrences(of: "{group}", with: group)
    }

    func expand(_ stdin: String) -> String {
        guard stdin.hasPrefix("{repeat:"), stdin.hasSuffix("}"), let colon = stdin.lastIndex(of: ":"),
              let count = Int(stdin[stdin.index(after: colon)..<stdin.index(before: stdin.endIndex)]) else { return substitute(stdin) }
        let text = String(stdin[stdin.index(stdin.startIndex, offsetBy: 8)..<colon])
        return String(repeating: text, count: count)
    }

    /// Everything a bad input must not change: every database's entries, and the shared files.
    func state() throws -> String {
        let dump = try run("/usr/bin/mdb_dump", ["-a", dir.path + "/" + group + "/Store"])
        let files = try run("/usr/bin/find", [dir.path + "/" + group + "/Files", "-printf", "%P %s %m\n"])
        return dump.stdout.split(separator: "\n").filter { !$0.hasPrefix("mapsize=") }.joined(separator: "\n") + files.stdout
    }

    @Test(.blockingWork) func everyBadInputGetsItsOneLineErrorAndChangesNothing() throws {
        try fixture()
        let record = ProcessInfo.processInfo.environment["KVTOOL_RECORD_CORPUS"] == "1"
        let lines = try String(contentsOfFile: Self.corpusPath, encoding: .utf8).split(separator: "\n")
        #expect(lines.count >= 60)
        let before = try state()
        var changed: [[String]] = []
        var recorded: [String] = []
        for line in lines {
            var entry = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let args = try #require(entry["args"] as? [String]).map(substitute)
            let stdin = (entry["stdin"] as? String).map(expand)
            let r = try run(productsDirectory() + "/kvtool", args, stdin: stdin)
            if try state() != before { changed.append(args) }
            if record {
                entry["status"] = Int(r.status)
                entry["error"] = r.stderr.replacingOccurrences(of: dir.path, with: "{root}").replacingOccurrences(of: group, with: "{group}")
                    .trimmingCharacters(in: .newlines)
                let data = try JSONSerialization.data(withJSONObject: entry, options: [.sortedKeys, .withoutEscapingSlashes])
                recorded.append(String(decoding: data, as: UTF8.self))
                continue
            }
            let status = try #require(entry["status"] as? Int)
            let error = substitute(try #require(entry["error"] as? String))
            #expect(status != 0, "\(args)")
            #expect(r.status == Int32(status), "\(args): \(r.stderr)")
            #expect(r.stderr == error + "\n", "\(args)")
            #expect(r.stdout.isEmpty, "\(args): \(r.stdout)")
            #expect(r.stderr.hasPrefix("kvtool: error: ") && r.stderr.filter { $0 == "\n" }.count == 1, "\(args)")
        }
        if record {
            try (recorded.joined(separator: "\n") + "\n").write(toFile: Self.corpusPath, atomically: true, encoding: .utf8)
        }
        #expect(changed.isEmpty, "these bad inputs changed the store or the files: \(changed)")
    }
}
