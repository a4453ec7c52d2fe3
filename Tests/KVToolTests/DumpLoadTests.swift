import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport
import Workloads

/// `kvtool dump` and `kvtool load`, run as the built binary against real containers: exact output on
/// a small fixture, round trips, byte-for-byte agreement with LMDB's own `mdb_dump`/`mdb_load`, and a
/// corpus of bad dumps (Fixtures/bad-dumps/) that must each fail with one exact line and leave the
/// target unchanged.
@Suite struct DumpLoadTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.dump"

    struct Event: Codable {
        var tag: String
        var n: Int
    }

    /// A small container: `scores` (string → int), `days` (day → map), `events` (int → map, with the
    /// index `byTag`), the checklist's `dailyRecords` and derived `dailySummaries` (fixed(56)) with one
    /// record, a defaults key, and SyncKit's (empty) history collections.
    @discardableResult
    func fixture(root: String? = nil) throws -> SharedContainer {
        let container = try SharedContainer(groupIdentifier: group, root: root ?? dir.path)
        _ = try History.attach(to: container)
        let store = container.store
        let scores = try store.collection("scores", key: String.self, value: Int.self)
        let days = try store.collection("days", key: LogicalDay.self, value: [String: Int].self)
        let events = try store.collection("events", key: Int.self, value: Event.self,
                                          indexes: [SecondaryIndex<Event, String>("byTag") { $0.tag }])
        let checklist = try ChecklistStore(store: store)
        let day = try #require(LogicalDay(year: 2026, month: 11, day: 21))
        try store.write(author: "fixture") { tx in
            try scores.put(42, forKey: "alice", in: tx)
            try scores.put(7, forKey: "bob", in: tx)
            try days.put(["n": 1], forKey: try #require(LogicalDay(year: 2026, month: 11, day: 20)), in: tx)
            try days.put(["n": 2, "m": 3], forKey: day, in: tx)
            try events.put(Event(tag: "b", n: 1), forKey: 1, in: tx)
            try events.put(Event(tag: "a", n: 2), forKey: 2, in: tx)
            try checklist.records.put(DailyRecord(day: day, scores: ["perceive.1": 3, "think.2": 5], memos: [:]), forKey: day, in: tx)
        }
        try container.defaults().set("ABC", forKey: "selectedTrainerId")
        return container
    }

    func kvtool(_ arguments: [String], stdin: String? = nil) throws -> ProcessResult {
        try run(productsDirectory() + "/kvtool", arguments, stdin: stdin)
    }

    /// `kvtool ARGS --root DIR --group G`.
    func tool(_ arguments: String..., root: String? = nil, stdin: String? = nil) throws -> ProcessResult {
        try tool(arguments: arguments, root: root, stdin: stdin)
    }

    func tool(arguments: [String], root: String? = nil, stdin: String? = nil) throws -> ProcessResult {
        try kvtool(arguments + ["--root", root ?? dir.path, "--group", group], stdin: stdin)
    }

    func storePath(_ root: String? = nil) -> String { (root ?? dir.path) + "/" + group + "/Store" }

    /// `mdb_dump -a` of a store: LMDB's own view of every named database.
    func mdbDump(_ store: String) throws -> String {
        let r = try run("/usr/bin/mdb_dump", ["-a", store])
        #expect(r.status == 0, "mdb_dump: \(r.stderr)")
        return r.stdout
    }

    /// The header line without its sourceTransactionID, which differs between two containers.
    static func withoutTransactionID(_ dump: String) -> String {
        dump.replacingOccurrences(of: #""sourceTransactionID":[0-9]+,"#, with: #""sourceTransactionID":_,"#, options: .regularExpression)
    }

    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/bad-dumps").path

    /// The fixture's dump in JSON Lines, with `_` for the sourceTransactionID.
    static let expectedJSONLines = #"""
{"catalog":[{"database":"c/_history","derived":[],"indexes":[],"keyEncoding":"uint64","kind":"collection","name":"_history","schemaVersion":1,"valueEncoding":"cbor"},{"database":"c/_history.consumers","derived":[],"indexes":[],"keyEncoding":"string","kind":"collection","name":"_history.consumers","schemaVersion":1,"valueEncoding":"cbor"},{"database":"c/_history.state","derived":[],"indexes":[],"keyEncoding":"string","kind":"collection","name":"_history.state","schemaVersion":1,"valueEncoding":"cbor"},{"bucketed":true,"database":"c/checklistMonths","derived":[],"derivedFrom":"dailySummaries","indexes":[],"keyEncoding":"day","kind":"collection","name":"checklistMonths","schemaVersion":1,"valueEncoding":"fixed(128)"},{"database":"c/dailyRecords","derived":["dailySummaries"],"indexes":[],"keyEncoding":"day","kind":"collection","name":"dailyRecords","schemaVersion":1,"valueEncoding":"cbor"},{"database":"c/dailySummaries","derived":["checklistMonths"],"derivedFrom":"dailyRecords","indexes":[],"keyEncoding":"day","kind":"collection","name":"dailySummaries","schemaVersion":1,"valueEncoding":"fixed(56)"},{"database":"c/days","derived":[],"indexes":[],"keyEncoding":"day","kind":"collection","name":"days","schemaVersion":1,"valueEncoding":"cbor"},{"database":"c/events","derived":[],"indexes":[{"database":"i/events/byTag","keyEncoding":"string","name":"byTag"}],"keyEncoding":"int64","kind":"collection","name":"events","schemaVersion":1,"valueEncoding":"cbor"},{"database":"c/scores","derived":[],"indexes":[],"keyEncoding":"string","kind":"collection","name":"scores","schemaVersion":1,"valueEncoding":"cbor"},{"database":"d/group.com.example.dump","derived":[],"indexes":[],"keyEncoding":"string","kind":"defaults","name":"group.com.example.dump","schemaVersion":1,"valueEncoding":"cbor"}],"databases":[{"entries":0,"name":"_requirements"},{"entries":0,"name":"c/_history"},{"entries":0,"name":"c/_history.consumers"},{"entries":0,"name":"c/_history.state"},{"entries":1,"name":"c/checklistMonths"},{"entries":1,"name":"c/dailyRecords"},{"entries":1,"name":"c/dailySummaries"},{"entries":2,"name":"c/days"},{"entries":2,"name":"c/events"},{"entries":2,"name":"c/scores"},{"entries":1,"name":"d/group.com.example.dump"},{"entries":2,"name":"i/events/byTag"}],"format":"kvtool-dump","group":"group.com.example.dump","sourceTransactionID":_,"version":1}
{"db":"c/checklistMonths","key":"2026-11-01","value":"0x010000002a5100002a5100000100000001000000010000000100000001000000000000000000000000000000000000000000000000003000000000000000000000000000000050000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000","k":"80005116","v":"AQAAACpRAAAqUQAAAQAAAAEAAAABAAAAAQAAAAEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAMAAAAAAAAAAAAAAAAAAAAFAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}
{"db":"c/dailyRecords","key":"2026-11-21","value":{"day":"2026-11-21","scores":{"think.2":5,"perceive.1":3},"memos":{},"cachedCategoryAverages":{"think":5.0,"perceive":3.0},"cachedTotalAverage":4.0,"cachedInputCount":2},"k":"8000512a","v":"pmNkYXlqMjAyNi0xMS0yMWZzY29yZXOiZ3RoaW5rLjIFanBlcmNlaXZlLjEDZW1lbW9zoHZjYWNoZWRDYXRlZ29yeUF2ZXJhZ2VzomV0aGlua/tAFAAAAAAAAGhwZXJjZWl2ZftACAAAAAAAAHJjYWNoZWRUb3RhbEF2ZXJhZ2X7QBAAAAAAAABwY2FjaGVkSW5wdXRDb3VudAI="}
{"db":"c/dailySummaries","key":"2026-11-21","value":"0x2a51000002000000000000000000104000000000000008400000000000001440000000000000f87f000000000000f87f000000000000f87f","k":"8000512a","v":"KlEAAAIAAAAAAAAAAAAQQAAAAAAAAAhAAAAAAAAAFEAAAAAAAAD4fwAAAAAAAPh/AAAAAAAA+H8="}
{"db":"c/days","key":"2026-11-20","value":{"n":1},"k":"80005129","v":"oWFuAQ=="}
{"db":"c/days","key":"2026-11-21","value":{"m":3,"n":2},"k":"8000512a","v":"omFtA2FuAg=="}
{"db":"c/events","key":1,"value":{"tag":"b","n":1},"k":"8000000000000001","v":"omN0YWdhYmFuAQ=="}
{"db":"c/events","key":2,"value":{"tag":"a","n":2},"k":"8000000000000002","v":"omN0YWdhYWFuAg=="}
{"db":"c/scores","key":"alice","value":42,"k":"616c696365","v":"GCo="}
{"db":"c/scores","key":"bob","value":7,"k":"626f62","v":"Bw=="}
{"db":"d/group.com.example.dump","key":"selectedTrainerId","value":"ABC","k":"73656c6563746564547261696e65724964","v":"Y0FCQw=="}
{"db":"i/events/byTag","key":["a",2],"value":null,"k":"6100008000000000000002","v":""}
{"db":"i/events/byTag","key":["b",1],"value":null,"k":"6200008000000000000001","v":""}

"""#

    /// Runs `mdb_stat -a`, which must read every container the tests create.
    func expectMdbStatReads(_ store: String) throws {
        let r = try run("/usr/bin/mdb_stat", ["-a", store])
        #expect(r.status == 0 && r.stdout.contains("Status of _catalog"), "mdb_stat \(store): \(r.stderr)")
    }

    func write(_ text: String, to name: String) throws -> String {
        let path = dir.path + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    // MARK: - dump

    @Test(.blockingWork) func jsonLinesDumpIsExact() throws {
        try fixture()
        let r = try tool("dump")
        #expect(r.status == 0 && r.stderr.isEmpty, "\(r.stderr)")
        #expect(Self.withoutTransactionID(r.stdout) == Self.expectedJSONLines)
        // The header names the transaction the dump was read in: here, the last one committed.
        let info = try tool("info", "--json")
        let environment = try #require((try JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any])?["environment"] as? [String: Any])
        let last = try #require(environment["lastTransactionID"] as? Int)
        #expect(r.stdout.contains(#""sourceTransactionID":\#(last),"#))
        try expectMdbStatReads(storePath())
    }

    @Test(.blockingWork) func jsonDumpHoldsTheSameHeaderAndEntries() throws {
        try fixture()
        let lines = try tool("dump").stdout.split(separator: "\n").map(String.init)
        let r = try tool("dump", "--format", "json")
        #expect(r.status == 0 && r.stderr.isEmpty, "\(r.stderr)")
        #expect(r.stdout == "{\"header\":" + lines[0] + ",\"entries\":[\n" + lines.dropFirst().joined(separator: ",\n") + "\n]}\n")
        #expect(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) is [String: Any])
        try expectMdbStatReads(storePath())
    }

    @Test(.blockingWork) func csvDumpHasAKeyColumnAndOneColumnPerField() throws {
        try fixture()
        var r = try tool("dump", "--format", "csv", "--collection", "days")
        #expect(r.status == 0 && r.stderr.isEmpty, "\(r.stderr)")
        #expect(r.stdout == "key,n,m\r\n2026-11-20,1,\r\n2026-11-21,2,3\r\n")
        r = try tool("dump", "--format", "csv", "--collection", "dailyRecords")
        #expect(r.stdout == "key,day,scores,memos,cachedCategoryAverages,cachedTotalAverage,cachedInputCount\r\n"
            + #"2026-11-21,2026-11-21,"{""think.2"":5,""perceive.1"":3}",{},"{""think"":5.0,""perceive"":3.0}",4.0,2"# + "\r\n")
        r = try tool("dump", "--format", "csv", "--collection", "scores")
        #expect(r.stdout == "key,value\r\nalice,42\r\nbob,7\r\n")

        r = try tool("dump", "--format", "csv")
        #expect(r.status == 64 && r.stderr.contains("--format csv dumps exactly one --collection"), "\(r.stderr)")
        r = try tool("dump", "--format", "csv", "--collection", "dailySummaries")
        #expect(r.status == 65 && r.stdout.isEmpty)
        #expect(r.stderr == "kvtool: error: --format csv needs cbor values; collection 'dailySummaries' stores fixed(56)\n")
        try expectMdbStatReads(storePath())
    }

    @Test(.blockingWork) func selectedCollectionsBringTheirIndexesAndDerivedCollections() throws {
        try fixture()
        var r = try tool("dump", "--collection", "events", "--collection", "dailyRecords", "--suite", group)
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        let header = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        let databases = (header["databases"] as? [[String: Any]])?.compactMap { $0["name"] as? String }
        #expect(databases == ["c/checklistMonths", "c/dailyRecords", "c/dailySummaries", "c/events", "d/\(group)", "i/events/byTag"])
        let catalog = (header["catalog"] as? [[String: Any]])?.compactMap { $0["name"] as? String }
        #expect(catalog == ["checklistMonths", "dailyRecords", "dailySummaries", "events", group])
        #expect(lines.count == 1 + 1 + 1 + 1 + 2 + 1 + 2)
        // In mdb format a selection comes with a _catalog section holding only its entries.
        r = try tool("dump", "--format", "mdb", "--collection", "scores")
        #expect(r.stdout.components(separatedBy: "VERSION=3\n").count == 3)
        #expect(r.stdout.hasPrefix("VERSION=3\nformat=bytevalue\ndatabase=_catalog\n"))
        #expect(r.stdout.split(separator: "\n").filter { $0.hasPrefix(" ") }.count == 2 + 4)

        r = try tool("dump", "--collection", "nope")
        #expect(r.status == 1 && r.stdout.isEmpty && r.stderr == "kvtool: error: no collection named 'nope'\n")
        r = try tool("dump", "--suite", "nope")
        #expect(r.status == 1 && r.stderr == "kvtool: error: no defaults suite named 'nope'\n")
        r = try kvtool(["dump", "--root", dir.path, "--group", "group.com.example.absent"])
        #expect(r.status == 1 && r.stderr.hasPrefix("kvtool: error: no container"))
        try expectMdbStatReads(storePath())
    }

    @Test(.blockingWork) func outputFileIsWrittenWholeOrNotAtAll() throws {
        try fixture()
        let path = dir.path + "/out.jsonl"
        var r = try tool("dump", "--output", path)
        #expect(r.status == 0 && r.stdout.isEmpty && r.stderr.isEmpty, "\(r.stderr)")
        #expect(Self.withoutTransactionID(try String(contentsOfFile: path, encoding: .utf8)) == Self.expectedJSONLines)
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        // A failed dump leaves the previous file as it was, and no temporary file behind.
        r = try tool("dump", "--collection", "nope", "-o", path)
        #expect(r.status == 1)
        #expect(Self.withoutTransactionID(try String(contentsOfFile: path, encoding: .utf8)) == Self.expectedJSONLines)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.contains(".kvtmp-") }.isEmpty)
        r = try tool("dump", "--output", dir.path + "/no/such/dir/out.jsonl")
        #expect(r.status == 1 && r.stderr.hasPrefix("kvtool: error: cannot write \(dir.path)/no/such/dir/out.jsonl: "), "\(r.stderr)")
        try expectMdbStatReads(storePath())
    }

    // MARK: - LMDB's own tools

    @Test(.blockingWork) func mdbFormatIsWhatMdbDumpPrintsAndMdbLoadReads() throws {
        try fixture()
        let ours = try tool("dump", "--format", "mdb")
        #expect(ours.status == 0 && ours.stderr.isEmpty, "\(ours.stderr)")
        #expect(ours.stdout == (try mdbDump(storePath())))
        #expect(ours.stdout.hasPrefix("VERSION=3\nformat=bytevalue\ndatabase=_catalog\ntype=btree\nmapsize=16777216\nmaxreaders=126\ndb_pagesize=4096\nHEADER=END\n 632f5f686973746f7279\n"))

        // mdb_load puts it into a fresh environment that mdb_dump then prints the same.
        let file = try write(ours.stdout, to: "fixture.mdb")
        let fresh = dir.path + "/fresh"
        try FileManager.default.createDirectory(atPath: fresh, withIntermediateDirectories: true)
        let loaded = try run("/usr/bin/mdb_load", ["-f", file, fresh])
        #expect(loaded.status == 0, "mdb_load: \(loaded.stderr)")
        #expect(try mdbDump(fresh) == ours.stdout)
        try expectMdbStatReads(fresh)
        try expectMdbStatReads(storePath())

        // A store whose map grew from 64 KiB in another process: mdb_dump prints the map size recorded
        // in the file, not the one this process opened with.
        let grown = "group.com.example.grown"
        let grow = try helper(["grow", dir.path, grown, "blobs", "40", "3000", "0"])
        #expect(grow.status == 0, "\(grow.stderr)")
        let mdb = try kvtool(["dump", "--format", "mdb", "--root", dir.path, "--group", grown])
        #expect(mdb.status == 0, "\(mdb.stderr)")
        #expect(!mdb.stdout.contains("mapsize=16777216"))
        #expect(mdb.stdout == (try mdbDump(dir.path + "/" + grown + "/Store")))
        try expectMdbStatReads(dir.path + "/" + grown + "/Store")

        // kvtool load also reads mdb_dump's print format (printable bytes as they are, others as \hh).
        let print = try run("/usr/bin/mdb_dump", ["-a", "-p", storePath()])
        #expect(print.status == 0 && print.stdout.contains("format=print\n"))
        let copy = dir.path + "/from-print"
        let r = try tool("load", root: copy, stdin: print.stdout)
        #expect(r.status == 0 && r.stdout == "loaded 12 entries into 9 databases\n", "\(r.stderr)")
        #expect(try mdbDump(storePath(copy)) == ours.stdout)
        try expectMdbStatReads(storePath(copy))
    }

    // MARK: - Round trips

    @Test(.blockingWork) func dumpLoadDumpIntoAnEmptyContainerGivesTheSameDump() throws {
        try fixture()
        for format in ["jsonl", "json", "mdb"] {
            let first = try tool("dump", "--format", format)
            let root = dir.path + "/copy-" + format
            let loaded = try tool("load", root: root, stdin: first.stdout)
            #expect(loaded.status == 0 && loaded.stderr.isEmpty, "\(format): \(loaded.stderr)")
            #expect(loaded.stdout == "loaded 12 entries into 9 databases\n", "\(format)")
            let second = try tool("dump", "--format", format, root: root)
            // Only the header's sourceTransactionID differs: the copy was written by other transactions.
            #expect(Self.withoutTransactionID(second.stdout) == Self.withoutTransactionID(first.stdout), "\(format)")
            #expect(try mdbDump(storePath(root)) == (try mdbDump(storePath())), "\(format)")
            try expectMdbStatReads(storePath(root))
        }
    }

    @Test(.blockingWork) func replaceRestoresTheHistoryExactly() throws {
        try fixture()
        #expect(try tool("history", "enable", "scores").status == 0)
        #expect(try tool("put", "scores", "carol", "19", "--author", "app").status == 0)
        #expect(try tool("delete", "scores", "bob").status == 0)
        let first = try tool("dump")
        #expect(first.stdout.contains(#"{"db":"c/_history","key":2,"#) && first.stdout.contains(#"{"db":"_requirements","key":"c/scores","value":"history""#))

        // --replace: the copy is the source, history included (the load records nothing on top).
        let copy = dir.path + "/copy"
        var r = try tool("load", "--replace", root: copy, stdin: first.stdout)
        #expect(r.status == 0 && r.stderr.isEmpty, "\(r.stderr)")
        #expect(r.stdout == "loaded 15 entries into 12 databases\n")   // _history.state is empty: the entries carry the last token and the clock
        #expect(Self.withoutTransactionID(try tool("dump", root: copy).stdout) == Self.withoutTransactionID(first.stdout))
        #expect(try tool("history", root: copy).stdout == (try tool("history").stdout))

        // A merge skips the history, says so, and the copy's history records the load instead.
        let merged = dir.path + "/merged"
        r = try tool("load", "--author", "restore", root: merged, stdin: first.stdout)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr == "kvtool: note: skipped 2 entries of internal collections (c/_history): a merge does not load history or sync state; --replace restores a container whole, and --force merges sync state\n")
        #expect(r.stdout == "loaded 13 entries into 9 databases\n")
        let history = try tool("history", root: merged).stdout.split(separator: "\n").map { $0.split(separator: "  ").map(String.init) }
        #expect(history.map { [$0[0], $0[3], $0[4], $0[5], $0[6]] } == [
            ["1", "restore", "put", "scores", "alice"],
            ["2", "restore", "put", "scores", "carol"],
        ])
        try expectMdbStatReads(storePath(copy))
        try expectMdbStatReads(storePath(merged))
    }

    // MARK: - load semantics

    @Test(.blockingWork) func mergePutsEveryEntryAndReplaceEmptiesFirst() throws {
        try fixture()
        let dump = try tool("dump", "--collection", "scores").stdout
        #expect(try tool("put", "scores", "alice", "1").status == 0)
        #expect(try tool("put", "scores", "zed", "99").status == 0)

        // --dry-run validates and counts, and writes nothing.
        let before = try mdbDump(storePath())
        var r = try tool("load", "--dry-run", "--json", stdin: dump)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == #"{"announced":2,"databases":1,"dryRun":true,"entries":2,"format":"JSON Lines","missing":0,"replace":false,"skipped":0}"# + "\n")
        r = try tool("load", "--dry-run", stdin: dump)
        #expect(r.stdout == "would load 2 entries into 1 database (dry run: nothing written)\n")
        #expect(try mdbDump(storePath()) == before)

        r = try tool("load", stdin: dump)
        #expect(r.status == 0 && r.stdout == "loaded 2 entries into 1 database\n", "\(r.stderr)")
        #expect(try tool("scan", "scores").stdout == "alice\t42\nbob\t7\nzed\t99\n")
        let file = try write(dump, to: "scores.jsonl")
        r = try tool("load", file, "--replace", "--json")
        #expect(r.stdout == #"{"announced":2,"databases":1,"dryRun":false,"entries":2,"format":"JSON Lines","missing":0,"replace":true,"skipped":0}"# + "\n")
        #expect(try tool("scan", "scores").stdout == "alice\t42\nbob\t7\n")
        // Nothing else was touched.
        #expect(try tool("scan", "days").stdout == "2026-11-20\t{\"n\":1}\n2026-11-21\t{\"m\":3,\"n\":2}\n")
        try expectMdbStatReads(storePath())
    }

    @Test(.blockingWork) func aLoadAddsTheCatalogEntriesOfNewCollections() throws {
        try fixture()
        let dump = try tool("dump", "--collection", "events").stdout
        let other = "group.com.example.other"
        let r = try kvtool(["load", "--root", dir.path, "--group", other], stdin: dump)
        #expect(r.status == 0 && r.stdout == "loaded 4 entries into 2 databases\n", "\(r.stderr)")
        let scan = try kvtool(["scan", "events", "--root", dir.path, "--group", other])
        #expect(scan.stdout == "1\t{\"tag\":\"b\",\"n\":1}\n2\t{\"tag\":\"a\",\"n\":2}\n")
        let collections = try kvtool(["collections", "--root", dir.path, "--group", other]).stdout
        #expect(collections.contains("index byTag(string)"))
        // The app opens it as declared, index included.
        let container = try SharedContainer(groupIdentifier: other, root: dir.path)
        let events = try container.store.collection("events", key: Int.self, value: Event.self,
                                                    indexes: [SecondaryIndex<Event, String>("byTag") { $0.tag }])
        #expect(try events.get(2)?.tag == "a")
        try expectMdbStatReads(dir.path + "/" + other + "/Store")
    }

    @Test(.blockingWork) func whatTheCatalogDoesNotDescribeIsDumpedRawAndRefusedByLoad() throws {
        let container = try fixture()
        // A value that is not CBOR in a cbor collection, and a database KVStore knows nothing of.
        let scores = try #require(try container.store.rawDatabase(named: "c/scores"))
        let foreign = try #require(try container.store.rawDatabase(named: "foreign", create: true))
        try container.store.write { tx in
            try tx.rawPut(scores, Array("bob".utf8), [0x62, 0x61])
            try tx.rawPut(foreign, [0x01], [0x02])
        }
        let r = try tool("dump")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr == "kvtool: note: line 10: the value at key bob in 'c/scores' is not valid CBOR (truncated input at byte 0: text string needs 2 bytes, 1 remain); dumped raw only\n")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines[9] == #"{"db":"c/scores","key":"bob","value":null,"k":"626f62","v":"YmE="}"#)
        #expect(lines[11] == #"{"db":"foreign","key":null,"value":null,"k":"01","v":"Ag=="}"#)
        // mdb_dump agrees on the bytes.
        #expect(try tool("dump", "--format", "mdb").stdout == (try mdbDump(storePath())))

        let copy = dir.path + "/copy"
        var load = try tool("load", root: copy, stdin: r.stdout)
        #expect(load.status == 65 && load.stderr == "kvtool: error: line 1: unknown database \"foreign\": the dump's catalog does not describe it\n")
        // Without the foreign database, the corrupt value is what stops it.
        load = try tool("load", root: copy, stdin: (try tool("dump", "--collection", "scores")).stdout)
        #expect(load.status == 65 && load.stderr == "kvtool: error: line 3: the value at key bob in 'c/scores' is not valid CBOR: truncated input at byte 0: text string needs 2 bytes, 1 remain\n")
        #expect(!FileManager.default.fileExists(atPath: storePath(copy)), "a refused load into a new container creates nothing")
        try expectMdbStatReads(storePath())
    }

    @Test(.blockingWork) func aMergeNeverChangesEntriesWhoseIndexesOnlyTheAppMaintains() throws {
        let container = try fixture()
        let dump = try tool("dump", "--collection", "events").stdout
        let events = try container.store.collection("events", key: Int.self, value: Event.self,
                                                    indexes: [SecondaryIndex<Event, String>("byTag") { $0.tag }])
        try events.put(Event(tag: "c", n: 5), forKey: 1)
        let before = try mdbDump(storePath())
        var r = try tool("load", stdin: dump)
        #expect(r.status == 65 && r.stdout.isEmpty)
        #expect(r.stderr == "kvtool: error: line 2: merging would change the existing entry at key 1 in 'c/events', whose index or derived entries only the app maintains; use --replace\n")
        #expect(try mdbDump(storePath()) == before)
        // Unchanged entries merge fine; --replace puts values and index back in step.
        r = try tool("load", "--replace", stdin: dump)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(Self.withoutTransactionID(try tool("dump", "--collection", "events").stdout) == Self.withoutTransactionID(dump))
        r = try tool("load", stdin: dump)
        #expect(r.status == 0, "\(r.stderr)")
        try expectMdbStatReads(storePath())
    }

    @Test(.blockingWork) func handWrittenLinesAreConvertedWithTheCatalog() throws {
        try fixture()
        let header = try #require(try tool("dump", "--collection", "scores", "--suite", group).stdout.split(separator: "\n").first)
        let text = String(header) + "\n" + #"""
            {"db":"c/scores","key":"dave","value":{"ratio":0.5,"level":3,"tags":["a","b"]}}
            {"db":"c/scores","key":"erin","value":-5}
            {"db":"d/\#(group)","key":"volume","value":0.75}

            """#
        var r = try tool("load", stdin: text)
        #expect(r.status == 0 && r.stdout == "loaded 3 entries into 2 databases\n", "\(r.stderr)")
        #expect(try tool("get", "scores", "dave").stdout == "{\"level\":3,\"ratio\":0.5,\"tags\":[\"a\",\"b\"]}\n")
        #expect(try tool("get", "scores", "erin").stdout == "-5\n")
        #expect(try tool("defaults", "read", "volume").stdout == "0.75\n")
        // What kvtool put stores for the same JSON is byte for byte what load stored.
        #expect(try tool("put", "scores", "dave2", #"{"ratio":0.5,"level":3,"tags":["a","b"]}"#).status == 0)
        r = try tool("dump", "--collection", "scores")
        let values = r.stdout.split(separator: "\n").dropFirst().compactMap { line -> String? in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return (object["key"] as? String).flatMap { $0.hasPrefix("dave") ? object["v"] as? String : nil }
        }
        #expect(values.count == 2 && values[0] == values[1])
        try expectMdbStatReads(storePath())
    }

    @Test(.blockingWork) func loadReadsAFileOrStandardInputAndSaysWhenTheFileIsMissing() throws {
        try fixture()
        var r = try tool("load", dir.path + "/missing.jsonl")
        #expect(r.status == 1 && r.stderr == "kvtool: error: no such file: \(dir.path)/missing.jsonl\n")
        r = try tool("load", "--max-line-bytes", "0", stdin: "")
        #expect(r.status == 64 && r.stderr.contains("--max-line-bytes must be 1 to 67108864"))
        r = try tool("load", "--max-input-bytes", "2000000000", stdin: "")
        #expect(r.status == 64 && r.stderr.contains("--max-input-bytes must be 1 to 1073741824"))
    }

    // MARK: - Bad dumps

    /// Every file of Fixtures/bad-dumps/, the options it is loaded with, and the one line it must fail
    /// with (after `kvtool: error: `), exit code 65.
    static let badDumps: [(file: String, options: [String], message: String)] = [
        ("binary-garbage.bin", [], "line 1: not a kvtool dump: binary data, not text"),
        ("catalog-as-database.jsonl", [], "line 1: '_catalog' cannot be loaded as a database: the catalog goes in the header"),
        ("catalog-bucketed-not-bool.jsonl", [], #"line 1: "bucketed" of catalog entry 5 must be true or false, not a string"#),
        ("catalog-bucketed-without-source.jsonl", [], #"line 1: bad catalog entry for collection 'days': "bucketed" is only ever true, on a collection derived from another"#),
        ("catalog-mismatch.jsonl", [], "line 1: catalog mismatch for collection 'scores': keys are int64 in the dump, string in the target; use --replace to load over it"),
        ("catalog-unknown-key-encoding.jsonl", [], #"line 1: bad catalog entry for collection 'days': unknown key encoding "weekday""#),
        ("contradicting-catalog.jsonl", [], "line 1: contradicting catalog entries for collection 'scores'"),
        ("duplicate-catalog.jsonl", [], "line 1: duplicate catalog entry for collection 'scores'"),
        ("duplicate-key.jsonl", [], "line 9: duplicate key alice in 'c/scores' (first on line 8)"),
        ("duplicate-key-with-control-characters.jsonl", [], #"line 9: duplicate key a\u{1b}[31mred\u{d} in 'c/scores' (first on line 8)"#),
        ("empty.jsonl", [], "line 1: the input is empty; expected a kvtool dump"),
        ("fixed-wrong-length.jsonl", [], "line 3: the value at key 2026-11-21 in 'c/dailySummaries' is 3 bytes; fixed(56) values are 56"),
        ("invalid-json.jsonl", [], "line 8: invalid JSON at column 24: unexpected 'a'; expected a value"),
        ("k-not-hex.jsonl", [], #"line 8: "k" is not an even number of hex digits"#),
        ("key-does-not-decode.jsonl", [], "line 4: key 0x8000 in 'c/days' does not decode as day: key is truncated: needs 4 bytes at offset 0, 2 remain"),
        ("key-does-not-parse.jsonl", [], #"line 4: key "yesterday" does not parse as day for collection 'days': "yesterday" is not a day (YYYY-MM-DD)"#),
        ("key-too-long.jsonl", [], "line 8: a key in 'c/scores' is 512 bytes; keys must be 1 to 511 bytes"),
        ("mdb-catalog-not-cbor.mdb", [], "line 9: the catalog entry at key 0x632f5f686973746f7279 does not decode: truncated input at byte 0: map declares 8 entries, but only 5 bytes remain"),
        ("mdb-dupsort.mdb", [], "line 119: the database has the LMDB flag dupsort, which KVStore never sets and kvtool does not load"),
        ("mdb-missing-data-end.mdb", [], "line 124: missing DATA=END before the next section"),
        ("mdb-missing-header-end.mdb", [], "line 119: missing HEADER=END: a data line comes before the header ends"),
        ("mdb-odd-hex.mdb", [], "line 120: odd number of hex digits"),
        ("mdb-print-bad-escape.mdb", [], "line 120: a backslash must be followed by a backslash or two hex digits in print format"),
        ("mdb-truncated.mdb", [], "line 124: the input ends before DATA=END (truncated?)"),
        ("mdb-wrong-version.mdb", [], #"line 1: unsupported mdb_dump version "2"; this kvtool reads VERSION=3"#),
        ("more-entries-than-announced.jsonl", [], "line 10: more entries for 'c/scores' than the 2 the header announces"),
        ("nesting-too-deep.jsonl", [], "line 8: invalid JSON at column 120: arrays and objects nest deeper than 80 levels"),
        ("oversized-line.jsonl", ["--max-line-bytes", "4096"], "line 8: the line is over the 4096-byte limit"),
        ("rendered-entry-for-indexed-collection.jsonl", [], #"line 6: collection 'events' can be loaded only from raw bytes ("k" and "v"), not from a rendered key or value"#),
        ("scores.csv", [], "line 1: this looks like a CSV dump, which load does not read: use a JSON Lines, JSON or mdb dump"),
        ("truncated-at-line-end.jsonl", [], "line 11: the dump ends early: the header announces 2 entries for 'i/events/byTag', found 0 (truncated? --partial loads a dump with lines removed by hand)"),
        ("truncated-mid-line.jsonl", [], "line 8: invalid JSON at column 41: the text ends inside an object"),
        ("truncated.json", [], "line 8: invalid JSON at column 42: the text ends inside an object"),
        ("undescribed-database.jsonl", [], #"line 1: unknown database "c/ghost": the dump's catalog does not describe it"#),
        ("unknown-database.jsonl", [], #"line 8: unknown database "c/ghost": the header does not list it"#),
        ("v-not-base64.jsonl", [], #"line 8: "v" is not base64"#),
        ("value-not-cbor.jsonl", [], "line 8: the value at key alice in 'c/scores' is not valid CBOR: truncated input at byte 0: text string needs 2 bytes, 1 remain"),
        ("wrong-header.jsonl", [], #"line 1: not a kvtool dump: the first line must be the header, {"format":"kvtool-dump","version":1,…}"#),
        ("wrong-version.jsonl", [], "line 1: unsupported dump version 2; this kvtool reads version 1"),
    ]

    @Test(.blockingWork) func everyBadDumpFailsWithOneLineAndChangesNothing() throws {
        try fixture()
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.fixtures).sorted()
        #expect(files == Self.badDumps.map(\.file).sorted(), "every bad dump has an expected message")
        let before = try mdbDump(storePath())
        for (file, options, message) in Self.badDumps {
            for mode in [[], ["--replace"]] where !(mode == ["--replace"] && file.hasPrefix("catalog-mismatch")) {
                let r = try tool(arguments: ["load", Self.fixtures + "/" + file] + options + mode)
                #expect(r.status == 65, "\(file) \(mode): \(r.stderr)")
                #expect(r.stdout.isEmpty, "\(file): \(r.stdout)")
                #expect(r.stderr == "kvtool: error: \(message)\n", "\(file) \(mode)")
            }
            // The same bytes on standard input fail the same way.
            let data = try Data(contentsOf: URL(fileURLWithPath: Self.fixtures + "/" + file))
            if let text = String(data: data, encoding: .utf8) {
                let r = try tool(arguments: ["load"] + options, stdin: text)
                #expect(r.stderr == "kvtool: error: \(message)\n", "\(file) on stdin")
            }
        }
        #expect(try mdbDump(storePath()) == before)
        try expectMdbStatReads(storePath())
        // With --replace the catalog may differ from the target's, so that dump loads.
        #expect(try tool("load", "--replace", Self.fixtures + "/catalog-mismatch.jsonl").status == 0)
    }

    @Test(.blockingWork) func inputCapsAndTheDatabaseLimitAreEnforced() throws {
        try fixture()
        let before = try mdbDump(storePath())
        let header = try #require(try tool("dump", "--collection", "scores").stdout.split(separator: "\n").first)
        // A line one byte over the default 64 MiB cap, made here rather than kept as a fixture.
        var big = Data((String(header) + "\n").utf8)
        big.append(Data(repeating: UInt8(ascii: "x"), count: 64 << 20 + 1))
        big.append(Data("\n".utf8))
        let path = dir.path + "/big.jsonl"
        try big.write(to: URL(fileURLWithPath: path))
        var r = try tool("load", path)
        #expect(r.status == 65 && r.stderr == "kvtool: error: line 2: the line is over the 67108864-byte limit\n", "\(r.stderr)")
        r = try tool("load", "--max-input-bytes", "1000", path)
        #expect(r.status == 65 && r.stderr == "kvtool: error: the input is over the 1000-byte limit of a dump\n", "\(r.stderr)")
        r = try tool("load", "--max-input-bytes", "1000", stdin: Self.expectedJSONLines)
        #expect(r.status == 65 && r.stderr == "kvtool: error: the input is over the 1000-byte limit of a dump\n", "\(r.stderr)")

        // More databases than a store can open (LMDB's maxdbs, 512): refused before any is created.
        let suites = (0..<510).map { "s\($0)" }
        let catalog = suites.map { #"{"database":"d/\#($0)","derived":[],"indexes":[],"keyEncoding":"string","kind":"defaults","name":"\#($0)","schemaVersion":1,"valueEncoding":"cbor"}"# }
        let many = #"{"catalog":["# + catalog.joined(separator: ",") + #"],"databases":["#
            + suites.map { #"{"entries":0,"name":"d/\#($0)"}"# }.joined(separator: ",") + #"],"format":"kvtool-dump","version":1}"# + "\n"
        r = try tool("load", stdin: many)
        #expect(r.status == 65 && r.stderr == "kvtool: error: line 1: the dump holds 510 databases; with the container's own that is 516, over the 512 named databases a store can open\n", "\(r.stderr)")
        #expect(try mdbDump(storePath()) == before)
        try expectMdbStatReads(storePath())
    }

    @Test(.blockingWork) func aLoadWhoseWriteFailsLeavesNoNewDatabaseBehind() throws {
        // A source with a collection the target lacks.
        let source = dir.path + "/source"
        try FileManager.default.createDirectory(atPath: source, withIntermediateDirectories: true)
        let sourceContainer = try fixture(root: source)
        try sourceContainer.store.collection("fresh", key: String.self, value: Int.self).put(1, forKey: "x")
        let dump = try tool("dump", "--collection", "fresh", "--collection", "scores", root: source)
        #expect(dump.status == 0, "\(dump.stderr)")

        // The target requires an observer kind no process has for 'scores', so the final write fails
        // after validation passed, inside the transaction that creates 'c/fresh'.
        let target = try fixture()
        try target.store.write { tx in try target.store.requireObserver(kind: "audit", for: .collection("scores"), in: tx) }
        let before = try mdbDump(storePath())
        let r = try tool("load", stdin: dump.stdout)
        #expect(r.status == 74 && r.stderr.hasPrefix("kvtool: error: ") && r.stderr.contains("audit"), "\(r.stderr)")
        #expect(try mdbDump(storePath()) == before, "the failed load left something behind")
        #expect(try !target.store.databaseNames().contains("c/fresh"))
    }

    // MARK: - Progress

    @Test(.blockingWork) func progressIsDrawnOnlyOnATerminal() throws {
        try fixture()
        let plain = try tool("dump")
        #expect(plain.status == 0 && plain.stderr.isEmpty)
        let quiet = try tool("load", "--replace", stdin: plain.stdout)
        #expect(quiet.status == 0 && quiet.stderr.isEmpty)
        // script(1) runs the command on a pseudo-terminal and copies what it shows to its stdout.
        let kvtool = productsDirectory() + "/kvtool"
        let command = "'\(kvtool)' dump --root '\(dir.path)' --group \(group) --output '\(dir.path)/tty.jsonl'"
        let shown = try run("/usr/bin/script", ["-qec", command, "/dev/null"])
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stdout.hasPrefix("\rdumping [") && shown.stdout.contains("] 100% 12/12"), "\(shown.stdout.debugDescription)")
        let load = "'\(kvtool)' load '\(dir.path)/tty.jsonl' --replace --root '\(dir.path)' --group \(group)"
        let loading = try run("/usr/bin/script", ["-qec", load, "/dev/null"])
        #expect(loading.stdout.contains("validating [") && loading.stdout.contains("] 100% 12/12") && loading.stdout.contains("loading [") && loading.stdout.contains("loaded 12 entries into 12 databases"), "\(loading.stdout.debugDescription)")
        try expectMdbStatReads(storePath())
    }
}
