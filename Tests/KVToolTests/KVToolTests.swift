import Foundation
import Testing
import TestSupport
import KVStore
import Workloads

/// End-to-end tests of the built `kvtool` binary: exact output on small fixtures, and exit codes.
@Suite struct KVToolTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.cli"

    func kvtool(_ arguments: [String], stdin: String? = nil, environment: [String: String]? = nil) throws -> ProcessResult {
        try run(productsDirectory() + "/kvtool", arguments, environment: environment, stdin: stdin)
    }

    /// `kvtool ARGS --root DIR --group G`.
    func tool(_ arguments: String..., stdin: String? = nil) throws -> ProcessResult {
        try kvtool(arguments + ["--root", dir.path, "--group", group], stdin: stdin)
    }

    func fixture() throws -> SharedContainer {
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        let scores = try container.store.collection("scores", key: String.self, value: Int.self)
        try container.store.write { tx in
            try scores.put(42, forKey: "alice", in: tx)
            try scores.put(7, forKey: "bob", in: tx)
            try scores.put(19, forKey: "carol", in: tx)
        }
        let days = try container.store.collection("days", key: LogicalDay.self, value: [String: Int].self)
        for i in 0..<3 { try days.put(["n": i], forKey: LogicalDay(year: 2026, month: 11, day: 19 + i)!) }
        try container.defaults().set("ABC", forKey: "selectedTrainerId")
        try container.defaults().set(3, forKey: "count")
        _ = try ChecklistStore(store: container.store)
        return container
    }

    @Test(.blockingWork) func getPutDeleteScan() throws {
        _ = try fixture()
        var r = try tool("get", "scores", "alice")
        #expect(r.status == 0 && r.stdout == "42\n", "\(r.stderr)")
        r = try tool("get", "scores", "alice", "--json")
        #expect(r.stdout == "{\"key\":\"alice\",\"value\":42}\n")

        r = try tool("put", "scores", "dave", "{\"level\": 3, \"tags\": [\"a\", \"b\"], \"ratio\": 0.5}")
        #expect(r.status == 0, "\(r.stderr)")
        r = try tool("get", "scores", "dave")
        #expect(r.stdout == "{\"level\":3,\"ratio\":0.5,\"tags\":[\"a\",\"b\"]}\n")
        r = try tool("put", "scores", "erin", "-", stdin: "5")
        #expect(r.status == 0, "\(r.stderr)")

        r = try tool("scan", "scores")
        #expect(r.stdout == "alice\t42\nbob\t7\ncarol\t19\ndave\t{\"level\":3,\"ratio\":0.5,\"tags\":[\"a\",\"b\"]}\nerin\t5\n")
        r = try tool("scan", "scores", "--from", "bob", "--through", "carol")
        #expect(r.stdout == "bob\t7\ncarol\t19\n")
        r = try tool("scan", "scores", "--reverse", "--limit", "2")
        #expect(r.stdout == "erin\t5\ndave\t{\"level\":3,\"ratio\":0.5,\"tags\":[\"a\",\"b\"]}\n")
        r = try tool("scan", "scores", "--prefix", "ca", "--json")
        #expect(r.stdout == "[{\"key\":\"carol\",\"value\":19}]\n")
        r = try tool("scan", "days", "--from", "2026-11-20")
        #expect(r.stdout == "2026-11-20\t{\"n\":1}\n2026-11-21\t{\"n\":2}\n")

        r = try tool("delete", "scores", "dave")
        #expect(r.status == 0)
        r = try tool("delete", "scores", "dave")
        #expect(r.status == 1)
        #expect(r.stderr == "kvtool: error: no value at key dave in 'scores'\n")
    }

    @Test(.blockingWork) func infoAndCollections() throws {
        _ = try fixture()
        var r = try tool("collections")
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("KIND") == true)
        #expect(lines.contains { $0.hasPrefix("collection  scores") && $0.contains("  3  ") && $0.contains("string") && $0.contains("cbor") })
        #expect(lines.contains { $0.contains("dailySummaries") && $0.contains("fixed(56)") && $0.contains("derived from dailyRecords")
                    && $0.contains("derives checklistMonths") })
        #expect(lines.contains { $0.contains("checklistMonths") && $0.contains("fixed(128)") && $0.contains("aggregates dailySummaries by bucket") })
        #expect(lines.contains { $0.hasPrefix("defaults") && $0.contains(group) })

        r = try tool("collections", "--json")
        let json = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]]
        let scores = try #require(json?.first { $0["name"] as? String == "scores" })
        #expect(scores["count"] as? Int == 3)
        #expect(scores["keyEncoding"] as? String == "string")
        #expect(scores["database"] as? String == "c/scores")

        r = try tool("info")
        #expect(r.status == 0)
        #expect(r.stdout.hasPrefix("container  \(dir.path)/\(group)\n"))
        #expect(r.stdout.contains("map size"))
        r = try tool("info", "--json")
        let info = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        #expect((info["environment"] as? [String: Any])?["pageSize"] as? Int == 4096)
        #expect(info["group"] as? String == group)
    }

    @Test(.blockingWork) func defaultsReadWriteDeleteDomains() throws {
        _ = try fixture()
        var r = try tool("defaults", "read", "selectedTrainerId")
        #expect(r.stdout == "ABC\n")
        r = try tool("defaults", "write", "volume", "0.75", "--type", "float")
        #expect(r.status == 0, "\(r.stderr)")
        r = try tool("defaults", "write", "profile", "{\"name\": \"愛\", \"level\": 2}", "--type", "json")
        #expect(r.status == 0, "\(r.stderr)")
        r = try tool("defaults", "read", "--json")
        #expect(r.stdout == "{\"count\":3,\"profile\":{\"level\":2,\"name\":\"愛\"},\"selectedTrainerId\":\"ABC\",\"volume\":0.75}\n")
        // The library reads what the CLI wrote, and the other way round.
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        #expect(try container.defaults().double(forKey: "volume") == 0.75)
        r = try tool("defaults", "delete", "volume")
        #expect(r.status == 0)
        r = try tool("defaults", "read", "volume")
        #expect(r.status == 1)
        r = try tool("defaults", "write", "other", "x", "--suite", "com.example.widgets")
        #expect(r.status == 0)
        r = try tool("defaults", "domains")
        #expect(r.stdout == "com.example.widgets\n\(group)\n")
    }

    /// The macOS habit: the suite as the first word, as `defaults` takes its domain.
    @Test(.blockingWork) func defaultsTakeTheSuiteAsMacOSTakesTheDomain() throws {
        _ = try fixture()
        let widgets = "com.example.widgets"
        // The domain word writes into a suite that exists (a typo must not make one); --suite creates it.
        var r = try tool("defaults", "write", widgets, "theme", "dark")
        #expect(r.status == 1 && r.stderr.contains("no defaults suite named '\(widgets)'"), "\(r.stderr)")
        r = try tool("defaults", "write", "--suite", widgets, "theme", "dark")
        #expect(r.status == 0, "\(r.stderr)")
        r = try tool("defaults", "write", widgets, "size", "3", "--type", "int")
        #expect(r.status == 0, "\(r.stderr)")
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        #expect(try container.defaults(suite: widgets).string(forKey: "theme") == "dark")
        #expect(try container.defaults(suite: widgets).integer(forKey: "size") == 3)
        #expect(try container.defaults().string(forKey: "theme") == nil)
        #expect(try tool("defaults", "read", widgets, "theme").stdout == "dark\n")
        #expect(try tool("defaults", "read", "--suite", widgets, "theme").stdout == "dark\n")
        // `read DOMAIN`: the whole suite, when the word names a suite and no key of the group's suite.
        #expect(try tool("defaults", "read", widgets, "--json").stdout == "{\"size\":3,\"theme\":\"dark\"}\n")
        // A key of the group's suite is still a key.
        #expect(try tool("defaults", "read", "selectedTrainerId").stdout == "ABC\n")
        r = try tool("defaults", "delete", widgets, "theme")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try container.defaults(suite: widgets).string(forKey: "theme") == nil)
        // Ambiguous or doubled forms are refused with one line, and change nothing.
        try container.defaults().set("x", forKey: widgets)
        r = try tool("defaults", "read", widgets)
        #expect(r.status == 64 && r.stderr.contains("'\(widgets)' is both a suite and a key"), "\(r.stderr)")
        r = try tool("defaults", "write", widgets, "theme", "light", "--suite", widgets)
        #expect(r.status == 64 && r.stderr.contains("give the suite once"), "\(r.stderr)")
        r = try tool("defaults", "write", "a", "b", "c", "d")
        #expect(r.status == 64 && r.stderr.contains("expected [DOMAIN] KEY VALUE"), "\(r.stderr)")
        #expect(try container.defaults(suite: widgets).string(forKey: "theme") == nil)
    }

    @Test(.blockingWork) func globalOptionsBeforeOrAfterAndFromTheEnvironment() throws {
        _ = try fixture()
        let before = try kvtool(["--root", dir.path, "--group", group, "get", "scores", "bob"])
        #expect(before.stdout == "7\n", "\(before.stderr)")
        let mixed = try kvtool(["--json", "defaults", "read", "count", "--root", dir.path, "--group", group])
        #expect(mixed.stdout == "3\n", "\(mixed.stderr)")
        var environment = ProcessInfo.processInfo.environment
        environment["KVSTORE_ROOT"] = dir.path
        environment["KVSTORE_GROUP"] = group
        let env = try kvtool(["get", "scores", "carol"], environment: environment)
        #expect(env.stdout == "19\n", "\(env.stderr)")
    }

    @Test(.blockingWork) func errorsAreOneLineWithTheirExitCode() throws {
        _ = try fixture()
        func check(_ arguments: [String], _ status: Int32, _ fragment: String, stdin: String? = nil) throws {
            expectOneLineError(try kvtool(arguments, stdin: stdin), arguments, status: status, mentioning: fragment)
        }
        let base = ["--root", dir.path, "--group", group]
        try check(["get", "scores", "nobody"] + base, 1, "no value at key nobody")
        try check(["get", "nothing", "k"] + base, 1, "no collection named 'nothing'")
        try check(["get", "scores", "k", "--root", dir.path, "--group", "group.com.example.absent"], 1, "no container")
        try check(["get", "scores", "k", "--root", dir.path, "--group", "../etc"], 65, "invalid group identifier")
        try check(["get", "scores", "k", "--root", dir.path, "--group", "group.a/b"], 65, "invalid group identifier")
        try check(["get", "days", "yesterday"] + base, 65, "not a day")
        try check(["get", "days", "2026-02-30"] + base, 65, "not a day")
        try check(["put", "scores", "x", "{not json"] + base, 65, "invalid JSON")
        try check(["put", "scores", "x", "-"] + base, 65, "invalid JSON", stdin: "[1,")
        try check(["put", "scores", String(repeating: "k", count: 600), "1"] + base, 65, "511")
        try check(["put", "dailyRecords", "2026-01-01", "{}"] + base, 65, "only the app can maintain")
        try check(["put", "dailySummaries", "2026-01-01", "{}"] + base, 65, "fixed(56)")
        try check(["defaults", "write", "n", "abc", "--type", "int"] + base, 65, "not an integer")
        try check(["defaults", "write", "big", "-"] + base, 65, "SharedFiles", stdin: String(repeating: "x", count: 1_100_000))
        try check(["scan", "scores", "--limit", "-1"] + base, 64, "--limit")
        try check(["get", "scores"] + base, 64, "Missing expected argument")
        try check(["frobnicate"], 64, "no command named 'frobnicate'")
        try check(["get", "scores", "k", "--root", dir.path], 64, "no App Group")
        // Nothing was half-written by the failures above.
        let r = try kvtool(["scan", "scores"] + base)
        #expect(r.stdout == "alice\t42\nbob\t7\ncarol\t19\n")
    }

    @Test(.blockingWork) func demoShowsTheAppTheWidgetAndTheExtensionSharingOneContainer() throws {
        let r = try kvtool(["demo", "--root", dir.path])
        #expect(r.status == 0, "\(r.stderr)")
        // Issue 46: after the demo's syncs (kvtool sync run --once, the agent, the live app), no process
        // of either machine may take the store for truncated (LMDB commits with its last page past the
        // end of the file), and the container opens and checks whole afterwards.
        #expect(!(r.stdout + r.stderr).contains("truncated"), "\(r.stderr)")
        let after = try kvtool(["check", "--root", dir.path, "--group", "group.com.yourcompany.VirtualTrainer"])
        #expect(after.status == 0 && !(after.stdout + after.stderr).contains("truncated"), "\(after.stdout) \(after.stderr)")
        let all = r.stdout.split(separator: "\n").map(String.init)
        #if Serve
        // It ends with the command that explores what it did in a browser.
        #expect(all.last == "            \(productsDirectory())/kvtool serve --group group.com.yourcompany.VirtualTrainer --root \(dir.path)", "\(all.suffix(3))")
        #endif
        #expect(r.stdout.contains("container: \(dir.path)/group.com.yourcompany.VirtualTrainer"))
        // Steps 1 to 11 on this machine; the second machine's step after.
        let second = all.firstIndex { $0.hasPrefix("12. a second machine") } ?? all.endIndex
        let lines = Array(all[..<second]), machines = Array(all[second...])
        let out = lines.joined(separator: "\n")

        // The widget ran in its own process, was woken by the app's save, and read the new feed.
        let widget = lines.filter { $0.contains("widget (pid") }
        #expect(widget.count == 2)
        #expect(widget.first?.contains("showing feed generation 1; waiting") == true)
        #expect(widget.last?.contains("feed generation 2") == true && widget.last?.contains("today 2026-11-21") == true)
        #expect(widget.last?.contains("streak 2 (longest 16)") == true)
        #expect(lines.contains("   history: token 343, put dailyRecords 2026-11-21 by app"))
        // The year dashboard from the month aggregates, checked against the day-by-day scan.
        #expect(lines.contains { $0.hasPrefix("   year dashboard: 342 records, ") && $0.hasSuffix(", from 13 month aggregates (checklistMonths, kept in each write)") })
        // The widget executable also showed the year, with today's record, from the store read-only.
        #expect(lines.contains { $0.hasPrefix("     year dashboard: 343 records, perceive ") }, "\(out)")
        #expect(lines.contains("   the same, to the bit, as the day-by-day scan of 342 summaries"))

        let senders = lines.filter { $0.contains("extension (pid") && !$0.contains("push extension") }
        try #require(senders.count == 5)  // so that a failed demo fails the test instead of trapping below
        #expect(senders[0].contains("sender 星野 ミライ") && senders[0].contains("image loaded (\(TrainerNotificationFlow.samplePNG.count) bytes)"))
        #expect(senders[1].contains("sender 星野 ミライ") && senders[1].contains("no image") && senders[1].contains("not a PNG"))
        #expect(senders[2].contains("sender 推乃 愛") && senders[2].contains("fell back"))
        #expect(senders[3].contains("sender 推乃 愛") && senders[3].contains("App Group is not available"))
        #expect(senders[4].contains("image loaded"))
        #expect(lines.contains { $0.hasPrefix("   the app reads the selected trainer 10,000 times more: 10000 the same, ") })
        // The widget and the extensions ran in other processes.
        let pids = Set((widget + senders).compactMap { $0.split(separator: "pid ").last?.split(whereSeparator: { $0 == "," || $0 == ")" }).first })
        #expect(pids.count == 6)

        // The push SDK: the app registered, two extension processes handled a valid and an invalid
        // payload, and the app read both back through history.
        let push = lines.filter { $0.contains("push extension (pid") }
        #expect(push.count == 2)
        #expect(push.first?.contains("shows \"New Mission Available!\"") == true && push.first?.contains("確認 [CONFIRM, foreground]") == true)
        #expect(push.last?.contains("rejected: レスポンスのデコードに失敗しました: aps.alert.title: title must be 1 to 100 characters, got 0") == true)
        #expect(lines.contains { $0.hasSuffix("reads what the extension recorded, through history: 2 notifications") })
        #expect(lines.contains("   - shown: \"New Mission Available!\""))

        // The exports and the snapshot were written into the same container.
        #expect(lines.contains("8. main app saves 6 subscriptions with 17 billing events and exports them from one read transaction:"))
        let exports = try FileManager.default.contentsOfDirectory(atPath: dir.path + "/group.com.yourcompany.VirtualTrainer/Files/Exports")
        #expect(exports.filter { $0.hasPrefix("subscriptions_export_") && $0.hasSuffix(".json") }.count == 1)
        #expect(exports.filter { $0.hasPrefix("subscriptions_events_") && $0.hasSuffix(".csv") }.count == 1)
        #expect(lines.contains { $0.hasPrefix("9. main app publishes a snapshot: Snapshots/snapshot-000001.mdb, generation 1") })
        // kvtool check ran in its own process and found the container whole, the widget feed included.
        #expect(lines.contains { $0.hasPrefix("   ok: ") && $0.contains(" databases at txn ") && $0.contains(", history, 1 snapshot, 1 feed;") }, "\(out)")
        let verify = try kvtool(["snapshot", "verify", "--root", dir.path, "--group", "group.com.yourcompany.VirtualTrainer"])
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)")
        #if PostgreSQL
        try expectSecondMachine(machines)
        #else
        #expect(machines.isEmpty, "built without the PostgreSQL trait, the demo has no second machine")
        #endif
    }

    /// Step 12: machine B converged with this one through the demo's own PostgreSQL cluster, this
    /// machine directly and B through a sync gateway with a token it was issued.
    private func expectSecondMachine(_ lines: [String]) throws {
        try #require(lines.first == "12. a second machine, through a sync gateway in front of PostgreSQL", "\(lines.prefix(3))")
        #expect(lines.contains { $0.hasPrefix("   gateway listening on http://127.0.0.1:") }, "\(lines)")
        // The token is shown only by its prefix.
        let issued = try #require(lines.first { $0.hasPrefix("   issued kvs1_") })
        #expect(issued.contains("… (48 characters, shown once;"), "\(issued)")
        // B's first sync pulled the year and woke B's widget, which showed the same dashboard as A's.
        let pushed = try #require(lines.first { $0.hasPrefix("   pushed ") && $0.contains(", pulled 0,") })
        let count = try #require(pushed.split(separator: " ").dropFirst().first.flatMap { Int($0.dropLast()) })
        #expect(count > 340, "\(pushed)")
        // The cursor also counts the catalog entries both machines publish (sync enable), which are not counted as changes.
        #expect(lines.contains { $0.hasPrefix("   pushed 0, pulled \(count), conflicts 0; cursor ") }, "\(lines)")
        let widgets = lines.filter { $0.contains("widget (pid") && !$0.contains("push widget") && $0.contains("woken") }
        try #require(widgets.count == 2, "\(lines)")
        #expect(widgets[0].contains("feed generation 1") && widgets[0].contains("today 2026-11-21") && widgets[0].contains("streak 2 (longest 16)"))
        // Concurrent edits: the record merged, the trainer by last writer, reported as conflicts.
        #expect(lines.contains { $0.contains("conflict: collection 'dailyRecords'") && $0.contains(": merged (push") })
        #expect(lines.contains { $0.contains("conflict: defaults suite") && $0.contains(": keptLocal (push") })
        let start = try #require(lines.firstIndex { $0.contains("the record merged") })
        let merged = lines[(start + 1)...].prefix(2)
        try #require(merged.count == 2)
        for (line, label) in zip(merged, ["A", "B"]) {
            #expect(line.hasPrefix("   machine \(label) app (pid "), "\(line)")
            #expect(line.contains("30 items, think.6 = 4") && line.contains("perceive \"A: slept well\"")
                    && line.contains("sustain \"B: long walk\"") && line.hasSuffix("trainer 星野 ミライ"), "\(line)")
        }
        #expect(merged.first?.split(separator: ":").dropFirst().joined() == merged.last?.split(separator: ":").dropFirst().joined())
        // Live: B's widget showed A's new average, through B's replicator and feed.
        let edit = try #require(lines.last { $0.hasPrefix("   machine A app") && $0.contains("perceive.4 = 5") })
        let average = try #require(edit.components(separatedBy: "average ").last?.prefix(4))
        #expect(widgets[1].contains("total \(average)"), "\(widgets[1]) vs \(edit)")
        #expect(lines.contains { $0.hasPrefix("   from the start of A's push process to B's widget showing the record: ") })
        // Issue 49: the trainers' images replicate (TrainerImages/, eager): B's extension shows the image
        // after B's first sync, and a new 200 KiB image A writes while B syncs live, once B has its bytes.
        let images = lines.filter { $0.contains("extension (pid") && !$0.contains("push extension") }
        try #require(images.count == 2, "\(lines)")
        #expect(images[0].contains("image loaded (\(TrainerNotificationFlow.samplePNG.count) bytes)"), "\(images[0])")
        #expect(images[1].contains("image loaded (\(200 << 10) bytes)"), "\(images[1])")
        #expect(lines.contains { $0.hasPrefix("   from the start of A's write process to B having the image's \(200 << 10) bytes") }, "\(lines)")
        // Issue 38: A's push extension wrote a notification, requested sync within 2 s and exited; A's
        // agent (no process of A synced), then A's live app, pushed it; B's widget showed it each time.
        #expect(lines.contains { $0.hasPrefix("   the push SDK's notification records replicate too") }, "\(lines)")
        let extensions = lines.filter { $0.contains("push extension (pid") && $0.contains("; sync: ") }
        try #require(extensions.count == 2, "\(lines)")
        #expect(extensions[0].contains("shows \"Mission 2 unlocked\""), "\(extensions[0])")
        // With a live owner, the request is answered within its deadline.
        #expect(extensions[1].contains("shows \"Mission 3 unlocked\"; sync: acknowledged through token "), "\(extensions[1])")
        let pushWidgets = lines.filter { $0.contains("push widget (pid") && $0.contains(" shows ") }
        try #require(pushWidgets.count == 2, "\(lines)")
        #expect(pushWidgets[0].contains("shows \"Mission 2 unlocked\", ") && pushWidgets[1].contains("shows \"Mission 3 unlocked\", "))
        let delivered = lines.filter { $0.hasPrefix("   from the extension's write on A (") }
        try #require(delivered.count == 2, "\(lines)")
        #expect(delivered[0].contains("(A's agent syncing) to B's widget showing it: ") && delivered[1].contains("(A's live app syncing) to B's widget showing it: "))
        for line in delivered {
            let milliseconds = line.components(separatedBy: "showing it: ").last?.split(separator: " ").first.flatMap { Int($0) }
            #expect(milliseconds != nil, "\(line)")
            // The extension's peak RSS, measured in the demo: under the seed's 24 MB; issue 38's budget
            // is 12 MiB, met in release since issue 39 (11.2 – 11.6 MiB; 13.6 – 14.6 before), not in
            // debug (13.1 – 13.3 MiB; 14.5 – 14.7 before): a known issue.
            let rss = try #require(line.components(separatedBy: "peak RSS ").last?.split(separator: " ").first.flatMap { Double($0) }, "\(line)")
            #expect(rss > 1, "\(line)")
            // A sanitizer's shadow memory is counted too (40 MiB under ThreadSanitizer).
            if BuildScale.sanitizer == nil {
                #expect(rss < 24, "\(line)")
                withKnownIssue("issue 38: the push extension's peak RSS is not within 12 MiB in a debug build", isIntermittent: true) {
                    #expect(rss <= 12, "\(line)")
                }
            }
        }
        // Issue 50: the push service read the registration the app made in step 10 from SQL, as a
        // kvsync_backend login; the validator refused B's subscription, and B shows the server's value
        // and its rejected write with the reason.
        #expect(lines.contains { $0.hasPrefix("     → \(TrainerNotificationFlow.defaultGroup): token a1b2c3d4…, platform iOS, device record ") }, "\(lines)")
        #expect(lines.contains { $0.contains("rejected: write 1 of collection 'subscriptions'") && $0.hasSuffix("refused by the server: amount -1490 is outside 0...1000000 (kvtool sync rejected)") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("   machine B app (pid ") && $0.hasSuffix("): Netflix is 1490 JPY") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("   1\tcollection 'subscriptions'\t") && $0.hasSuffix("\twrite\tamount -1490 is outside 0...1000000") }, "\(lines)")
        #expect(lines.contains("   gateway drained and stopped"), "\(lines.suffix(4))")
        #expect(lines.contains("   the gateway drained (SIGINT) and the cluster is stopped; machine B's root is removed"))
    }
}
