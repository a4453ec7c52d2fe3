import Foundation
import Testing
import TestSupport
import KVStore
import SyncKit
import Workloads

/// kvtool as a newcomer meets it (issue 36): ordinary commands must not damage a container quietly,
/// printed keys must be typeable, failed commands must change nothing, and read-only ones nothing at
/// all, permissions included. Each test names the finding it covers.
@Suite struct NewcomerTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.newcomer"

    func kvtool(_ arguments: [String], stdin: String? = nil, environment: [String: String]? = nil) throws -> ProcessResult {
        try run(productsDirectory() + "/kvtool", arguments, environment: environment, stdin: stdin, timeout: 120)
    }

    func tool(_ arguments: String..., stdin: String? = nil) throws -> ProcessResult {
        try kvtool(arguments + ["--root", dir.path, "--group", group], stdin: stdin)
    }

    /// Keyed as the push SDK's inbox is (date with microseconds, UUID), with plain string values.
    static let inbox = "inbox"

    var storePath: String { dir.path + "/" + group + "/Store" }

    /// A container with history, a plain collection, the subscriptions app's collections and a
    /// notification inbox keyed by (date with microseconds, UUID).
    @discardableResult
    func fixture() throws -> (container: SharedContainer, received: Date, id: UUID) {
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        let history = try History.attach(to: container)
        let notes = try container.store.collection("notes", key: String.self, value: String.self)
        try history.enable(.collection("notes"))
        try notes.put("hello", forKey: "a")
        let subscriptions = try SubscriptionStore(store: container.store)
        try subscriptions.subscriptions.put(SubscriptionSampleData.subscriptions[0], forKey: SubscriptionSampleData.subscriptions[0].id)
        let inbox = try container.store.collection(Self.inbox, key: Pair<Date, UUID>.self, value: String.self)
        let received = Date(timeIntervalSince1970: 1_795_831_112.246376)
        let id = UUID()
        try inbox.put("shown", forKey: Pair(received, id))
        return (container, received, id)
    }

    // MARK: - 1. Internal collections and typed values

    @Test(.blockingWork) func putAndDeleteRefuseInternalCollectionsUnlessForced() throws {
        try fixture()
        for arguments in [["put", "_history", "1", "{}"], ["delete", "_history", "1"], ["put", "_history.state", "x", "{}"]] {
            let r = try kvtool(arguments + ["--root", dir.path, "--group", group])
            expectOneLineError(r, arguments, status: 65, mentioning: "internal collection")
            #expect(r.stderr.contains("--force"), "\(r.stderr)")
        }
        // The history is whole: check passes.
        var r = try tool("check")
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        // Forced, the put lands, and check names the repair of what it broke.
        r = try tool("put", "_history", "1", "{}", "--force")
        #expect(r.status == 0, "\(r.stderr)")
        r = try tool("check")
        #expect(r.status == 74)
        #expect(r.stdout.contains("  repair: "), "\(r.stdout)")
        r = try tool("check", "--json")
        let report = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        let problems = report?["problems"] as? [[String: Any]] ?? []
        #expect(!problems.isEmpty && problems.allSatisfy { ($0["repair"] as? String)?.isEmpty == false }, "\(r.stdout)")
    }

    @Test(.blockingWork) func putChecksAValueAgainstTheTypeTheAppRegisteredAndMergesMembers() throws {
        try fixture()
        let id = SubscriptionSampleData.subscriptions[0].id.uuidString
        let before = try tool("get", "subscriptions", id).stdout
        // A subscription without its currency and status is refused, and nothing is written.
        var r = try tool("put", "subscriptions", id, #"{"id":"\#(id)","name":"x","amount":100}"#)
        #expect(r.status == 65 && r.stderr.contains("not a Subscription") && r.stderr.contains("missing"), "\(r.stderr)")
        #expect(try tool("get", "subscriptions", id).stdout == before)
        // --merge sets one member and keeps the others; the result is checked as a Subscription.
        r = try tool("put", "subscriptions", id, #"{"name":"Renamed"}"#, "--merge")
        #expect(r.status == 0, "\(r.stderr)")
        let store = try SubscriptionStore(store: try SharedContainer(groupIdentifier: group, root: dir.path).store)
        let saved = try #require(try store.subscriptions.get(SubscriptionSampleData.subscriptions[0].id))
        #expect(saved.name == "Renamed")
        #expect(saved.currency == SubscriptionSampleData.subscriptions[0].currency)
        r = try tool("put", "subscriptions", id, #"{"amount":"lots"}"#, "--merge")
        #expect(r.status == 65 && r.stderr.contains("not a Subscription"), "\(r.stderr)")
        #expect(try store.subscriptions.get(SubscriptionSampleData.subscriptions[0].id)?.name == "Renamed")
        // Elsewhere the JSON is stored as given, and kvtool says so.
        r = try tool("put", "notes", "b", #""hi""#)
        #expect(r.status == 0 && r.stderr.contains("stored as given"), "\(r.stderr)")
        // A value another writer stored without the type is named by `check`, with its repair.
        #expect(try tool("check").status == 0)
        let (_, raw) = try SharedContainer(groupIdentifier: group, root: dir.path).store.untypedCollection(named: "subscriptions")
        var key: [UInt8] = []
        SubscriptionSampleData.subscriptions[0].id.encodeKey(into: &key, terminal: true)
        try raw.put(CBORValue.map([CBORMapEntry(key: .text("name"), value: .text("x"))]).encoded(), forKey: ByteKey(key))
        r = try tool("check")
        #expect(r.status == 74 && r.stdout.contains("not a Subscription") && r.stdout.contains("repair: "), "\(r.stdout)")
    }

    // MARK: - 2. Printed keys round-trip

    @Test(.blockingWork) func everyKeyScanPrintsFindsTheSameEntry() throws {
        let (_, received, uuid) = try fixture()
        let r = try tool("scan", Self.inbox)
        let printed = try #require(r.stdout.split(separator: "\t").first.map(String.init))
        #expect(printed.contains(".246376"), "\(printed)")
        #expect(try tool("get", Self.inbox, printed).stdout == "\"shown\"\n")
        let first = try #require(try JSONSerialization.jsonObject(with: Data(printed.utf8)) as? [String]).first!
        #expect(try tool("scan", Self.inbox, "--prefix", first).stdout == r.stdout)
        #expect(try tool("scan", Self.inbox, "--from", printed, "--through", printed).stdout == r.stdout)
        // The JSON key is the same text.
        let json = try tool("scan", Self.inbox, "--json").stdout
        #expect(json.contains(first))
        let deleted = try tool("delete", Self.inbox, printed)
        #expect(deleted.status == 0, "\(deleted.stderr)")
        let inbox = try SharedContainer(groupIdentifier: group, root: dir.path).store
            .collection(Self.inbox, key: Pair<Date, UUID>.self, value: String.self)
        #expect(try inbox.get(Pair(received, uuid)) == nil)
    }

    // MARK: - 3. Dumps edited by hand

    @Test(.blockingWork) func aDumpLineWhoseReadableAndRawFormsDisagreeIsRefusedWithItsLineNumber() throws {
        try fixture()
        let dump = try tool("dump", "--collection", "notes").stdout
        var lines = dump.split(separator: "\n").map(String.init)
        let at = try #require(lines.firstIndex { $0.contains("\"value\":\"hello\"") })
        lines[at] = lines[at].replacingOccurrences(of: "\"value\":\"hello\"", with: "\"value\":\"edited\"")
        let file = dir.path + "/edited.jsonl"
        try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        var r = try tool("load", file)
        expectOneLineError(r, ["load"], status: 65, mentioning: "line \(at + 1)")
        #expect(r.stderr.contains("disagree"), "\(r.stderr)")
        #expect(try tool("get", "notes", "a").stdout == "\"hello\"\n")
        // Without "k" and "v", the readable form is what loads.
        var object = try #require(try JSONSerialization.jsonObject(with: Data(lines[at].utf8)) as? [String: Any])
        object["k"] = nil
        object["v"] = nil
        lines[at] = String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
        try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        r = try tool("load", file)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try tool("get", "notes", "a").stdout == "\"edited\"\n")
    }

    @Test(.blockingWork) func loadPartialAcceptsADumpWithLinesRemovedAndSaysHowMany() throws {
        let (container, _, _) = try fixture()
        let notes = try container.store.collection("notes", key: String.self, value: String.self)
        try notes.put("two", forKey: "b")
        try notes.put("three", forKey: "c")
        let dump = try tool("dump", "--collection", "notes").stdout
        let lines = dump.split(separator: "\n").map(String.init).filter { !$0.contains("\"key\":\"b\"") }
        let file = dir.path + "/partial.jsonl"
        try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        try notes.put("changed", forKey: "a")
        var r = try tool("load", file)
        #expect(r.status == 65 && r.stderr.contains("--partial"), "\(r.stderr)")
        #expect(try notes.get("a") == "changed")
        r = try tool("load", file, "--partial")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("loaded 2 entries") && r.stdout.contains("held 2 of the 3 entries"), "\(r.stdout)")
        #expect(try notes.get("a") == "hello")
    }

    // MARK: - 4. A missing group, and failed commands

    /// Every path under `root` with its type and mode, and the bytes of regular files other than
    /// LMDB's lock file (whose reader table any open may touch).
    static func tree(_ root: String) -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: root) else { return [] }
        var lines: [String] = []
        while let path = walker.nextObject() as? String {
            var st = stat()
            guard lstat(root + "/" + path, &st) == 0 else { continue }
            var line = "\(path) \(String(st.st_mode, radix: 8))"
            if st.st_mode & S_IFMT == S_IFREG, !path.hasSuffix("lock.mdb") {
                line += " \(FileManager.default.contents(atPath: root + "/" + path)?.hashValue ?? 0)"
            }
            lines.append(line)
        }
        return lines.sorted()
    }

    @Test(.blockingWork) func noCommandCreatesAContainerForAMistypedGroupAndAFailedOneLeavesTheRootAsItWas() throws {
        try fixture()
        let before = Self.tree(dir.path)
        let typo = "group.com.typo.app"
        let commands: [[String]] = [
            ["info"], ["collections"], ["get", "notes", "a"], ["put", "notes", "a", "1"], ["delete", "notes", "a"],
            ["scan", "notes"], ["dump"], ["check"], ["repair"], ["compact"], ["readers"],
            ["history", "show"], ["history", "enable", "--suite", "s"], ["history", "disable", "notes"], ["history", "purge"],
            ["history", "consumers"], ["snapshot", "list"], ["defaults", "read", "k"], ["defaults", "delete", "k"],
            ["defaults", "domains"], ["files", "ls"], ["files", "cat", "x"], ["files", "rm", "x"],
            ["defaults", "write", "mysuite", "k", "v"], ["defaults", "write", "k", "notanint", "--type", "int"],
            ["files", "put", "../x", "/etc/hostname"], ["load", "/nonexistent.jsonl"],
        ] + Self.syncCommands
        for command in commands {
            let r = try kvtool(command + ["--root", dir.path, "--group", typo])
            #expect(r.status != 0, "\(command) exited 0: \(r.stdout)")
            #expect(Self.tree(dir.path) == before, "\(command) changed the root: \(r.stderr)")
        }
        // A defaults write into a suite that does not exist, in an existing container, is refused and
        // creates nothing; --suite creates it.
        var r = try tool("defaults", "write", "mysuite", "k", "v")
        expectOneLineError(r, ["defaults", "write", "mysuite"], status: 1, mentioning: "no defaults suite named 'mysuite'")
        #expect(!(try tool("defaults", "domains").stdout.contains("mysuite")))
        r = try tool("defaults", "write", "--suite", "mysuite", "k", "v")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try tool("defaults", "read", "mysuite", "k").stdout == "v\n")
    }

    #if PostgreSQL
    static let syncCommands: [[String]] = [["sync", "status"], ["sync", "enable", "notes"], ["sync", "enable", "--suite", "s"],
                                           ["sync", "run", "--once", "--server", "postgres://u@127.0.0.1:1/db"]]
    #else
    static let syncCommands: [[String]] = []
    #endif

    @Test(.blockingWork) func defaultsWriteTakesMacOSTypeFlags() throws {
        try fixture()
        for (flag, text, expected) in [("-bool", "yes", "true"), ("-int", "42", "42"), ("-float", "0.5", "0.5"),
                                        ("-string", "7", "\"7\""), ("-boolean", "NO", "false"), ("-integer", "3", "3")] {
            let r = try tool("defaults", "write", "k", flag, text)
            #expect(r.status == 0, "\(flag): \(r.stderr)")
            #expect(try tool("defaults", "read", "k", "--json").stdout == expected + "\n", "\(flag)")
        }
    }

    // MARK: - 5. Read-only commands write nothing

    @Test(.blockingWork) func infoAndOtherReadOnlyCommandsChangeNoPermission() throws {
        try fixture()
        chmod(storePath, 0o500)
        chmod(storePath + "/data.mdb", 0o400)
        defer {
            chmod(storePath, 0o700)
            chmod(storePath + "/data.mdb", 0o600)
        }
        let before = Self.tree(dir.path)
        for command in [["info"], ["collections"], ["scan", "notes"], ["get", "notes", "a"], ["check"], ["dump"], ["history", "show"]] {
            let r = try kvtool(command + ["--root", dir.path, "--group", group])
            #expect(r.status == 0, "\(command): \(r.stderr)")
            #expect(Self.tree(dir.path) == before, "\(command) changed the container")
        }
        // A wider mode is not repaired by a read-only command: it is refused, naming the repair.
        chmod(storePath + "/data.mdb", 0o666)
        var r = try tool("info")
        expectOneLineError(r, ["info"], status: 74, mentioning: "kvtool repair")
        #expect(fileMode(storePath + "/data.mdb") == 0o666)
        r = try tool("repair")
        #expect(r.status == 0 && r.stdout.contains("0666 -> 0600"), "\(r.stdout)\(r.stderr)")
        #expect(fileMode(storePath + "/data.mdb") == 0o600)
        #expect(try tool("info").status == 0)
    }

    func fileMode(_ path: String) -> mode_t {
        var st = stat()
        return lstat(path, &st) == 0 ? st.st_mode & 0o7777 : 0
    }

    // MARK: - 9. Smaller findings, one command each

    @Test(.blockingWork) func helpNamesEachDefaultOnceAndRefusesAnUnknownCommand() throws {
        let commands: [[String]] = [["put"], ["history", "purge"], ["history", "show"], ["load"], ["defaults", "write"], ["scan"], ["info"]]
        for command in commands {
            let r = try kvtool(command + ["--help"])
            let text = r.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            #expect(!text.contains("(default: kvtool). (default: kvtool)"), "\(command)")
            #expect(!text.contains("(default: 7 days). (default:"), "\(command)")
            #expect(text.components(separatedBy: "(default:").count <= text.components(separatedBy: "--").count, "\(command)")
            for option in text.components(separatedBy: " --").dropFirst() {
                let words = option.prefix(240)
                #expect(words.components(separatedBy: "(default:").count <= 2, "\(command): \(words)")
            }
        }
        let r = try kvtool(["help", "frobnicate"])
        expectOneLineError(r, ["help", "frobnicate"], status: 64, mentioning: "frobnicate")
        #if PostgreSQL
        #expect(try kvtool(["help", "sync", "run"]).status == 0)
        #endif
    }

    @Test(.blockingWork) func historySinceAFutureTokenSaysSo() throws {
        try fixture()
        let r = try tool("history", "show", "--since", "99999")
        expectOneLineError(r, ["history", "show", "--since", "99999"], status: 1, mentioning: "ahead of the history")
        #expect(!r.stderr.contains("purged"), "\(r.stderr)")
    }

    @Test(.blockingWork) func everyCommandThatChangesSomethingSaysWhatInJSON() throws {
        try fixture()
        let cases: [([String], [String])] = [
            (["defaults", "write", "k", "v"], ["\"suite\"", "\"key\":\"k\"", "\"stored\":true"]),
            (["defaults", "delete", "k"], ["\"deleted\":true"]),
            (["put", "notes", "z", "1"], ["\"collection\":\"notes\"", "\"stored\":true"]),
            (["delete", "notes", "z"], ["\"deleted\":true"]),
            (["history", "enable", "subscriptions"], ["\"collection\":\"subscriptions\"", "\"history\":\"enabled\""]),
            (["history", "disable", "subscriptions"], ["\"collection\":\"subscriptions\"", "\"history\":\"disabled\""]),
            (["files", "put", "a.txt", "-"], ["\"path\":\"a.txt\""]),
            (["files", "rm", "a.txt"], ["\"removed\":true"]),
        ]
        for (command, fragments) in cases {
            let r = try kvtool(command + ["--json", "--root", dir.path, "--group", group], stdin: "x")
            #expect(r.status == 0, "\(command): \(r.stderr)")
            for fragment in fragments { #expect(r.stdout.contains(fragment), "\(command): \(r.stdout)") }
        }
    }

    @Test(.blockingWork) func theSameFaultGetsTheSameExitStatus() throws {
        try fixture()
        #expect(try tool("files", "put", "d/a.txt", "-", stdin: "x").status == 0)
        let local = dir.path + "/local-dir"
        try FileManager.default.createDirectory(atPath: local, withIntermediateDirectories: true)
        let cat = try tool("files", "cat", "d")
        let put = try tool("files", "put", "x", local)
        expectOneLineError(cat, ["files", "cat", "d"], status: 65, mentioning: "is a directory")
        expectOneLineError(put, ["files", "put", "x", local], status: 65, mentioning: "is a directory")
    }

    /// On a terminal (util-linux's `script` gives the command one): `load` with no file says what it
    /// wants instead of waiting on standard input, and a progress bar is cleared when it ends.
    @Test(.blockingWork) func onATerminalLoadNamesWhatItWantsAndProgressBarsAreCleared() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else {
            Issue.record("util-linux's script is missing")
            return
        }
        let (container, _, _) = try fixture()
        let notes = try container.store.collection("notes", key: String.self, value: String.self)
        try container.store.write { tx in for i in 0..<3000 { try notes.put("v", forKey: "k\(i)", in: tx) } }
        let kvtool = productsDirectory() + "/kvtool"
        var r = try run("/usr/bin/script", ["-qec", "\(kvtool) load --root \(dir.path) --group \(group)", "/dev/null"], stdin: "", timeout: 60)
        #expect(r.status == 64, "\(r.stdout)")
        #expect(r.stdout.contains("name the file"), "\(r.stdout)")
        let file = dir.path + "/all.jsonl"
        r = try run("/usr/bin/script", ["-qec", "\(kvtool) dump --root \(dir.path) --group \(group) -o \(file)", "/dev/null"], stdin: "", timeout: 60)
        #expect(r.status == 0, "\(r.stdout)")
        r = try run("/usr/bin/script", ["-qec", "\(kvtool) load \(file) --root \(dir.path) --group \(group)", "/dev/null"], stdin: "", timeout: 60)
        #expect(r.status == 0, "\(r.stdout)")
        // A bar was drawn, and the last one was erased (\r, then erase-line) before the summary line.
        let lastBar = try #require(r.stdout.range(of: "% ", options: .backwards), "no progress bar: \(r.stdout.debugDescription)")
        #expect(r.stdout[lastBar.upperBound...].contains("\r\u{1B}[K"), "\(r.stdout.debugDescription)")
        #expect(r.stdout.contains("loaded"), "\(r.stdout)")
    }

    // MARK: - 8. The README's shell lines

    @Test(.blockingWork) func theREADMEsShellLinesRunAgainstTheDemosContainer() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        let readme = try String(contentsOfFile: root + "/README.md", encoding: .utf8)
        let section = try #require(readme.range(of: "From the shell"))
        let block = readme[section.upperBound...]
        let start = try #require(block.range(of: "```sh\n"))
        let end = try #require(block[start.upperBound...].range(of: "```"))
        let lines = block[start.upperBound..<end.lowerBound].split(separator: "\n").map { $0.split(separator: "#").first.map(String.init) ?? "" }
        let demo = try kvtool(["demo", "--root", dir.path])
        #expect(demo.status == 0, "\(demo.stderr)")
        var environment = ProcessInfo.processInfo.environment
        environment["KVSTORE_ROOT"] = dir.path
        var ran = 0
        for line in lines.map({ $0.trimmingCharacters(in: .whitespaces) }) where !line.isEmpty {
            if line.hasPrefix("export ") {
                let assignment = line.dropFirst("export ".count).split(separator: "=", maxSplits: 1).map(String.init)
                environment[assignment[0]] = assignment[1]
                continue
            }
            var words = line.split(separator: " ").map(String.init)
            #expect(words.removeFirst() == "kvtool", "\(line)")
            let r = try kvtool(words, environment: environment)
            #expect(r.status == 0 && !r.stdout.isEmpty, "\(line): \(r.stderr)")
            ran += 1
        }
        #expect(ran >= 3)
    }
}
