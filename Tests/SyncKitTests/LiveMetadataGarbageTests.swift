import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport

/// Issue 12, section 3: a compromised widget (kvtest-helper's `hostile-put`, `hostile-file` and
/// `hostile-sparse`: raw LMDB calls and plain file writes, no KVStore code) writes garbage into the live
/// metadata of a container: `_catalog` entries, history entries, consumer records, history's
/// counters, a widget feed file and the snapshot manifest. Every other process then gets a typed,
/// one-line error (never a trap, a crash or a hang: every process runs under `timeout -s KILL`), and
/// `kvtool check` names each problem (exit 74, one line per problem).
///
/// The readers are other processes (kvtool commands and kvtest-helper's `garbage-read`, which runs one
/// reader of the public API and prints `ok …` or `error TYPE: …`) and this process's API calls.
@Suite struct LiveMetadataGarbageTests {
    let dir = TemporaryDirectory()

    // MARK: - Processes, each with a timeout

    /// Runs a program under `timeout -s KILL`, so that a hang is a failed expectation (status 137),
    /// not a hung suite.
    func timed(_ executable: String, _ arguments: [String], seconds: Int = 120) throws -> ProcessResult {
        try run("/usr/bin/timeout", ["-s", "KILL", String(seconds), executable] + arguments)
    }

    func kvtool(_ group: String, _ arguments: String...) throws -> ProcessResult {
        try kvtool(group, arguments)
    }

    func kvtool(_ group: String, _ arguments: [String]) throws -> ProcessResult {
        try timed(productsDirectory() + "/kvtool", arguments + ["--root", dir.path, "--group", group])
    }

    func helper(_ arguments: [String]) throws -> ProcessResult {
        try timed(productsDirectory() + "/kvtest-helper", arguments)
    }

    /// The compromised widget's raw put into `Store/`.
    func hostilePut(_ group: String, database: String, key: [UInt8], value: String) throws {
        let result = try helper(["hostile-put", dir.path, group, database, "hex:" + hex(key), value])
        try #require(result.status == 0, "hostile-put failed: \(result.stderr)")
    }

    func hostilePut(_ group: String, database: String, key: [UInt8], value: [UInt8]) throws {
        try hostilePut(group, database: database, key: key, value: "hex:" + hex(value))
    }

    func hostileFile(_ group: String, _ path: String, _ bytes: [UInt8]) throws {
        let result = try helper(["hostile-file", dir.path, group, path, "hex:" + hex(bytes)])
        try #require(result.status == 0, "hostile-file failed: \(result.stderr)")
    }

    /// `garbage-read WHAT ARGS` in another process: its one-line outcome and its peak RSS.
    func read(_ group: String, _ what: String...) throws -> (status: Int32, line: String, peakKiB: Int) {
        try read(group, what)
    }

    func read(_ group: String, _ what: [String]) throws -> (status: Int32, line: String, peakKiB: Int) {
        let result = try helper(["garbage-read", dir.path, group] + what)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        let peak = lines.first { $0.hasPrefix("peak-rss-kib ") }.flatMap { Int($0.dropFirst(13)) } ?? -1
        return (result.status, lines.first ?? "<no output; stderr: \(result.stderr)>", peak)
    }

    /// Another process's reader got the typed error `type`, with `fragment` in its one-line message.
    func expectTypedError(_ group: String, _ what: [String], _ type: String, _ fragment: String,
                          sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try helper(["garbage-read", dir.path, group] + what)
        let first = result.stdout.split(separator: "\n").first.map(String.init) ?? ""
        #expect(result.status == 3, "garbage-read \(what) exited \(result.status): \(first) \(result.stderr)",
                sourceLocation: sourceLocation)
        #expect(first.hasPrefix("error \(type): ") && first.contains(fragment),
                "garbage-read \(what): \(first)", sourceLocation: sourceLocation)
    }

    /// `kvtool check` exits 74 and names the problem (`fragment` is on one of its lines).
    func expectCheckNames(_ group: String, _ fragments: String..., sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try kvtool(group, "check")
        #expect(result.status == 74, "kvtool check exited \(result.status): \(result.stderr)", sourceLocation: sourceLocation)
        for fragment in fragments {
            #expect(result.stdout.split(separator: "\n").contains { $0.contains(fragment) },
                    "kvtool check does not name \(fragment):\n\(result.stdout)", sourceLocation: sourceLocation)
        }
        #expect(result.stderr.split(separator: "\n").count == 1 && result.stderr.contains("integrity problem"),
                "\(result.stderr)", sourceLocation: sourceLocation)
    }

    /// A kvtool command failed with a one-line message (no trap: status below 128).
    func expectOneLineFailure(_ result: ProcessResult, _ fragment: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.status != 0 && result.status < 128, "status \(result.status): \(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "\n").count == 1
                && result.stderr.contains(fragment), "\(result.stderr)", sourceLocation: sourceLocation)
    }

    // MARK: - A live container

    /// A container as the app leaves it: a history-enabled collection `events` with three entries
    /// (tokens 1–3), a consumer `widget` at token 0, a defaults suite, a published feed `today` and
    /// one snapshot. Returns it open in this process.
    func populated(_ group: String) throws -> SharedContainer {
        let container = try dir.container(group)
        let history = try History.attach(to: container)
        let events = try container.store.collection("events", key: Int.self, value: Int.self)
        try history.enable(.collection("events"))
        for i in 1...3 { try container.store.write(author: "app") { tx in try events.put(i, forKey: i, in: tx) } }
        _ = try history.consumer(named: "widget", startingAt: .oldest)
        try container.defaults(suite: "prefs").set("v", forKey: "k")
        try WidgetFeed<Today>(name: "today", container: container).publish(Today(total: 1, streak: 2, note: nil))
        _ = try Snapshots(directory: container.snapshotsDirectory, create: true).export(from: container.store)
        return container
    }

    func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
    func key(_ text: String) -> [UInt8] { Array(text.utf8) }

    // MARK: - Tests

    /// The baseline: before any garbage, every reader this suite uses succeeds and `kvtool check` is
    /// clean, so the errors below come from the garbage and nothing else.
    @Test(.blockingWork) func everyReaderSucceedsOnTheIntactContainer() throws {
        let group = "group.com.example.garbage.baseline"
        _ = try populated(group)
        for what in [["catalog"], ["collection", "events"], ["defaults", "prefs"], ["history"], ["consumer", "widget"],
                     ["feed", "today"], ["manifest"], ["write"], ["purge"]] {
            let outcome = try read(group, what)
            #expect(outcome.status == 0 && outcome.line.hasPrefix("ok "), "\(what): \(outcome.line)")
        }
        let check = try kvtool(group, "check")
        #expect(check.status == 0, "\(check.stdout)\(check.stderr)")
        #expect(check.stdout.contains("history") && check.stdout.contains("1 snapshot") && check.stdout.contains("1 feed"))
    }

    /// Garbage in `_catalog`: not CBOR, CBOR of the wrong shape, 4 MiB of it, an unknown key encoding,
    /// a `fixed(N)` out of range, an entry pointing at another database (`_catalog` itself), an entry
    /// under another name's key, and a key that is not a catalog key at all. Opening the collection,
    /// listing the catalog, `kvtool collections`, `info` and `scan` fail with `corruptValue` naming
    /// `_catalog` (before the fix, an entry pointing at `_catalog` made `kvtool scan events` read, and
    /// `kvtool put events` write, the catalog itself);
    /// `kvtool check` names each entry.
    @Test(.blockingWork, arguments: [
        ("not CBOR", "c/events", "hex:ff00fe", "the entry does not decode"),
        ("CBOR of the wrong shape", "c/events", "hex:07", "the entry does not decode"),
        // A 4 MiB CBOR text string where a map belongs.
        ("huge", "c/events", "big:7a00400000:4194304:78:", "the entry does not decode"),
    ])
    func undecodableCatalogEntries(_ label: String, _ catalogKey: String, _ value: String, _ fragment: String) throws {
        let group = "group.com.example.garbage.catalog"
        let container = try populated(group)
        try hostilePut(group, database: "_catalog", key: key(catalogKey), value: value)
        try expectCatalogGarbage(group, container, "_catalog key \"\(catalogKey)\": \(fragment)")
    }

    @Test(.blockingWork, arguments: [
        ("an unknown key encoding", "keyEncoding", "unknown key encoding \"int65\""),
        ("a fixed layout of 2^40 bytes", "valueEncoding",
         "the value encoding \"fixed(1099511627776)\" is over the 1048576-byte limit of a fixed layout"),
        ("another database", "database", "its database is \"_catalog\", not c/events"),
        ("another name", "name", "its database is \"c/events\", not c/prefs"),
    ])
    func catalogEntriesKVStoreNeverWrites(_ label: String, _ field: String, _ fragment: String) throws {
        let group = "group.com.example.garbage.catalog-shape"
        let container = try populated(group)
        var entry = try #require(try container.store.catalogEntry(forCollection: "events"))
        switch field {
        case "keyEncoding": entry.keyEncoding = "int65"
        case "valueEncoding": entry.valueEncoding = ValueEncoding("fixed(1099511627776)")
        case "database": entry.database = "_catalog"
        default: entry.name = "prefs"
        }
        try hostilePut(group, database: "_catalog", key: key("c/events"), value: try CBOREncoder().encode(entry))
        try expectCatalogGarbage(group, container, "_catalog key \"c/events\": \(fragment)")
    }

    func expectCatalogGarbage(_ group: String, _ container: SharedContainer, _ checkFragment: String,
                              sourceLocation: SourceLocation = #_sourceLocation) throws {
        try expectTypedError(group, ["catalog"], "KVStoreError", "_catalog", sourceLocation: sourceLocation)
        try expectTypedError(group, ["collection", "events"], "KVStoreError", "_catalog", sourceLocation: sourceLocation)
        for command in [["collections"], ["info"], ["scan", "events"]] {
            expectOneLineFailure(try kvtool(group, command), "_catalog", sourceLocation: sourceLocation)
        }
        // This process, which had the container open all along.
        #expect(sourceLocation: sourceLocation) { try container.store.catalog() } throws: { error in
            guard case KVStoreError.corruptValue(let collection, _, let reason, _) = error else { return false }
            return collection == "_catalog" && !reason.contains("\n") && reason.utf8.count < 1_000
        }
        try expectCheckNames(group, checkFragment, sourceLocation: sourceLocation)
    }

    /// A key in `_catalog` that is not `c/NAME` or `d/NAME`: nothing opens through it, and `kvtool
    /// check` names it; the other entries still work for everyone.
    @Test(.blockingWork) func aCatalogKeyThatIsNoCatalogKey() throws {
        let group = "group.com.example.garbage.catalog-key"
        let container = try populated(group)
        let entry = try #require(try container.store.catalogEntry(forCollection: "events"))
        try hostilePut(group, database: "_catalog", key: [0xFF, 0x00, 0x63], value: try CBOREncoder().encode(entry))
        try expectTypedError(group, ["catalog"], "KVStoreError", "not its key")
        let events = try read(group, "collection", "events")
        #expect(events.status == 0 && events.line == "ok 3 entries", "\(events.line)")
        try expectCheckNames(group, "_catalog key \"", "not its key")
    }

    /// History's counters at UInt64.max: before the fix, the next write to a history-enabled
    /// collection trapped on `lastToken + 1` in every writer process, and `kvtool check` trapped on
    /// `purgedThrough + 1`. Now the writer gets `SyncError.corruptHistory`, readers get answers, and
    /// check names both counters.
    @Test(.blockingWork) func historyCountersAtTheirMaximum() throws {
        let group = "group.com.example.garbage.counters"
        _ = try populated(group)
        let max = try CBOREncoder().encode(UInt64.max)
        try hostilePut(group, database: "c/_history.state", key: "purgedThrough".encodedKey, value: max)
        let consumer = try read(group, "consumer", "widget")
        #expect(consumer.status == 0 && consumer.line == "ok expired", "\(consumer.line)")
        try expectCheckNames(group, "_history: purged through 18446744073709551615, past the last token 3",
                             "_history key 1: an entry at or below the purge point 18446744073709551615")

        try hostilePut(group, database: "c/_history.state", key: "lastToken".encodedKey, value: max)
        try expectTypedError(group, ["write"], "SyncError", "corrupt history: the last token is 18446744073709551615")
        let history = try read(group, "history")
        #expect(history.status == 0, "\(history.line)")
        try expectCheckNames(group, "_history key 3: an entry at or below the purge point 18446744073709551615")
    }

    /// Garbage as history's state, entries and consumer records: the readers that meet it (history,
    /// a consumer, a writer) get `corruptValue` naming the collection and key; check names each.
    @Test(.blockingWork, arguments: [
        ("a state counter that is not CBOR", "c/_history.state", "lastToken", "hex:ff",
         ["history"], "show", "_history.state", "_history.state key lastToken: does not decode as a token"),
        ("a negative state counter", "c/_history.state", "lastToken", "hex:20",
         ["write"], "show", "_history.state", "_history.state key lastToken: does not decode as a token"),
        ("an entry whose byte-string length lies (2^64 - 1 bytes)", "c/_history", "token:2",
         "hex:a86574" + "6f6b656e02636b65795bffffffffffffffff", ["history"], "show", "_history",
         "_history key 2: the entry does not decode"),
        ("a consumer record with a negative token", "c/_history.consumers", "widget",
         "hex:a265746f6b656e20697570646174656441 74c1fb0000000000000000".replacingOccurrences(of: " ", with: ""),
         ["consumer", "widget"], "consumers", "_history.consumers",
         "_history.consumers key \"widget\": the consumer record does not decode"),
    ] as [(String, String, String, String, [String], String, String, String)])
    func historyGarbage(_ label: String, _ database: String, _ keyText: String, _ value: String,
                        _ reader: [String], _ kvtoolCommand: String, _ errorFragment: String, _ checkFragment: String) throws {
        let group = "group.com.example.garbage.history"
        _ = try populated(group)
        let rawKey = keyText.hasPrefix("token:") ? UInt64(keyText.dropFirst(6))!.encodedKey : keyText.encodedKey
        try hostilePut(group, database: database, key: rawKey, value: value)
        try expectTypedError(group, reader, "KVStoreError", errorFragment)
        expectOneLineFailure(try kvtool(group, "history", kvtoolCommand), errorFragment)
        try expectCheckNames(group, checkFragment)
    }

    /// Well-formed CBOR that SyncKit never writes: an entry of an unknown kind, an entry at a token
    /// other than its key, a consumer far past the last token, and a consumer key that is not UTF-8.
    /// Reading the history throws `SyncError.corruptHistory` naming the entry (it is not handed to
    /// consumers as news), a consumer past the end reads as expired, purge keeps working, and check
    /// names each.
    @Test(.blockingWork) func historyRecordsSyncKitNeverWrites() throws {
        let group = "group.com.example.garbage.history-shape"
        let container = try populated(group)
        let history = try History.attach(to: container)
        let first = try #require(try history.changes(since: .zero).transactions?.first?.entries.first)
        var entry = first
        entry.token = ChangeToken(rawValue: 2)
        entry.kind = "table"
        try hostilePut(group, database: "c/_history", key: UInt64(2).encodedKey, value: try CBOREncoder().encode(entry))
        try hostilePut(group, database: "c/_history", key: UInt64(3).encodedKey, value: try CBOREncoder().encode(first))
        struct FakeConsumer: Codable { var token: UInt64; var updatedAt: Date }
        try hostilePut(group, database: "c/_history.consumers", key: "widget".encodedKey,
                       value: try CBOREncoder().encode(FakeConsumer(token: .max, updatedAt: Date())))
        try hostilePut(group, database: "c/_history.consumers", key: [0xFF, 0xFE], value: try CBOREncoder().encode(
            FakeConsumer(token: 1, updatedAt: Date())))

        let consumer = try read(group, "consumer", "widget")
        #expect(consumer.status == 0 && consumer.line == "ok expired", "\(consumer.line)")
        try expectTypedError(group, ["history"], "SyncError", "corrupt history: entry 2 in _history: unknown kind \"table\"")
        #expect(throws: SyncError.corruptHistory("entry 2 in _history: unknown kind \"table\"")) {
            try history.changes(since: .zero)
        }
        let purge = try read(group, "purge")
        #expect(purge.status == 0 || purge.line.hasPrefix("error KVStoreError"), "\(purge.line)")
        try expectCheckNames(group, "_history key 3: the entry says it is token 1",
                             "_history key 2: unknown kind \"table\"",
                             "_history.consumers key \"widget\": the consumer is at token 18446744073709551615, past the last token 3",
                             "_history.consumers key 0xfffe: not a consumer name")
    }

    /// Garbage in a widget feed file (a header whose payload length lies, or no feed at all): the
    /// widget's `read()` in another process and in this one throws `WidgetFeedError.corrupt`; check
    /// names the feed.
    @Test(.blockingWork) func garbageInAFeedFile() throws {
        let group = "group.com.example.garbage.feed"
        let container = try populated(group)
        var header = Array("KVFEED".utf8) + [0, 1] + [UInt8](repeating: 0, count: 7) + [2]
        header += [UInt8](repeating: 0xFF, count: 8) + [UInt8](repeating: 0, count: 40)
        try hostileFile(group, "Snapshots/feeds/today.feed", header + [0xA0])
        try expectTypedError(group, ["feed", "today"], "WidgetFeedError", "announces a 18446744073709551615-byte payload")
        #expect(throws: WidgetFeedError.self) { try WidgetFeed<Today>(name: "today", container: container).read() }
        try expectCheckNames(group, "Snapshots/feeds/today.feed: corrupt feed")

        try hostileFile(group, "Snapshots/feeds/today.feed", Array("not a feed at all".utf8))
        try expectTypedError(group, ["feed", "today"], "WidgetFeedError", "shorter than the 64-byte header")
    }

    /// Section 2's feed cap: a 1 GiB sparse feed file is refused from its size before it is read
    /// (`fstat` on the opened file), with `WidgetFeedError.fileTooLarge`, and the reading process's
    /// peak resident memory stays far below the file's size (it is printed). Check names it too.
    @Test(.blockingWork) func aFeedFileOverItsCapIsRefusedBeforeItIsRead() throws {
        let group = "group.com.example.garbage.feed-cap"
        let container = try populated(group)
        let size = 1 << 30
        let sparse = try helper(["hostile-sparse", dir.path, group, "Snapshots/feeds/today.feed", String(size)])
        try #require(sparse.status == 0, "\(sparse.stderr)")
        let outcome = try read(group, "feed", "today")
        #expect(outcome.status == 3 && outcome.line.hasPrefix("error WidgetFeedError: ")
                && outcome.line.contains("is \(size) bytes, over the \(64 + (1 << 20))-byte limit"), "\(outcome.line)")
        print("[garbage] a \(size)-byte sparse feed refused; the reader's peak RSS: \(outcome.peakKiB) KiB")
        #expect(outcome.peakKiB > 0 && outcome.peakKiB < 256 << 10, "peak RSS \(outcome.peakKiB) KiB")
        let feed = try WidgetFeed<Today>(name: "today", container: container)
        #expect(throws: WidgetFeedError.fileTooLarge(path: feed.path, size: size, limit: 64 + (1 << 20))) { try feed.read() }
        try expectCheckNames(group, "Snapshots/feeds/today.feed: feed \(feed.path) is \(size) bytes")
    }

    /// Garbage manifests: a `../` path, an absolute path, an absurd generation, a generation beyond
    /// Int, JSON nested 20,000 deep, and bytes that are not JSON. Listing snapshots in another process
    /// and in this one, and `kvtool snapshot list`, fail with `SnapshotError.corruptManifest`; check
    /// names the manifest. Nothing is opened outside `Snapshots/`.
    @Test(.blockingWork, arguments: [
        ("../ path", #"{"formatVersion":1,"lastGeneration":1,"snapshots":[{"createdAt":"2026-11-21T08:00:00Z","file":"../Store/data.mdb","generation":1,"sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","size":1,"sourceTransactionID":1}]}"#,
         "names file \"../Store/data.mdb\""),
        ("absolute path", #"{"formatVersion":1,"lastGeneration":1,"snapshots":[{"createdAt":"2026-11-21T08:00:00Z","file":"/etc/passwd","generation":1,"sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","size":1,"sourceTransactionID":1}]}"#,
         "names file \"/etc/passwd\""),
        ("absurd generation", #"{"formatVersion":1,"lastGeneration":1000000000000000,"snapshots":[{"createdAt":"2026-11-21T08:00:00Z","file":"snapshot-1000000000000000.mdb","generation":1000000000000000,"sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","size":1,"sourceTransactionID":1}]}"#,
         "is over the limit 999999999999"),
        ("generation beyond Int", #"{"formatVersion":1,"lastGeneration":99999999999999999999999,"snapshots":[]}"#,
         "corrupt snapshot manifest"),
        ("deep nesting", #"{"formatVersion":1,"snapshots":"# + String(repeating: "[", count: 20_000) + String(repeating: "]", count: 20_000) + "}",
         "corrupt snapshot manifest"),
        ("not JSON", "\u{0}\u{1}garbage", "corrupt snapshot manifest"),
    ])
    func garbageManifests(_ label: String, _ manifest: String, _ fragment: String) throws {
        let group = "group.com.example.garbage.manifest"
        let container = try populated(group)
        try hostileFile(group, "Snapshots/manifest.json", Array(manifest.utf8))
        try expectTypedError(group, ["manifest"], "SnapshotError", fragment)
        #expect(throws: SnapshotError.self) { try Snapshots(directory: container.snapshotsDirectory, create: false).list() }
        expectOneLineFailure(try kvtool(group, "snapshot", "list"), "corrupt snapshot manifest")
        try expectCheckNames(group, "Snapshots/manifest.json: corrupt snapshot manifest")
    }
}
