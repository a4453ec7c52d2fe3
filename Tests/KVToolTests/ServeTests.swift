#if Serve
import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport
import Workloads

/// `kvtool serve` as a real process on loopback, spoken to over real sockets: every endpoint, the
/// token, traversal attempts, huge values, writes, the live event stream fed by other processes, and
/// 100 concurrent clients. The browser's view is `Tests/Browser/serve_browser.py`, run by the last test.
@Suite(.serialized) struct ServeTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.serve"

    /// The fixture (kvtest-helper serve-fixture) and a server on a free port.
    final class Server: @unchecked Sendable {
        let process: BackgroundProcess
        let port: Int
        let token: String
        let url: String

        init(root: String, group: String, extra: [String] = []) throws {
            process = try BackgroundProcess(productsDirectory() + "/kvtool",
                                            ["serve", "--root", root, "--group", group, "--port", "0"] + extra)
            guard let line = process.waitForLine(timeout: BuildScale.seconds(30), where: { $0.hasPrefix("serving ") }),
                  let start = line.range(of: "http://"), let end = line.range(of: " (", options: .backwards) else {
                process.kill()
                throw HTTPTestClient.Failure(description: "kvtool serve printed no URL: \(process.output)")
            }
            url = String(line[start.lowerBound..<end.lowerBound])
            let afterHost = url.dropFirst("http://127.0.0.1:".count)
            port = Int(afterHost.prefix { $0.isNumber }) ?? 0
            token = String(url.split(separator: "token=").last ?? "")
        }

        var client: HTTPTestClient { HTTPTestClient(port: port, timeout: BuildScale.seconds(10)) }

        /// GET with the token as a header.
        func get(_ target: String) throws -> HTTPTestClient.Response {
            try client.request("GET", target, headers: ["X-KVTool-Token": token])
        }

        deinit { process.kill(SIGTERM) }
    }

    func fixture() throws {
        let made = try helper(["serve-fixture", dir.path, group], timeout: BuildScale.seconds(60))
        #expect(made.stdout == "ok\n", "\(made.stderr)")
    }

    func tool(_ arguments: [String]) throws -> ProcessResult {
        try run(productsDirectory() + "/kvtool", ["--root", dir.path, "--group", group] + arguments)
    }

    /// A port another server holds is named, with what to do (kvtool recognizes SwiftNIO's bind error
    /// by its errno, not by its text: issue 48).
    @Test(.blockingWork) func aPortInUseIsNamed() throws {
        try fixture()
        let server = try Server(root: dir.path, group: group)
        let second = try run(productsDirectory() + "/kvtool", ["serve", "--root", dir.path, "--group", group, "--port", "\(server.port)"],
                             timeout: BuildScale.seconds(60))
        #expect(second.status == 74)
        #expect(second.stderr == "kvtool: error: port \(server.port) on 127.0.0.1 is in use: pass --port N, or --port 0 for any free port\n",
                "\(second.stderr)")
    }

    @Test(.blockingWork) func everyEndpointAnswersFromTheStore() throws {
        try fixture()
        let server = try Server(root: dir.path, group: group)

        let overview = try server.get("/api/overview")
        #expect(overview.status == 200 && overview.headers["content-type"] == "application/json; charset=utf-8")
        #expect(overview.json["group"] as? String == group && overview.json["writesAllowed"] as? Bool == false)
        #expect(overview.json["history"] as? [String] == ["collection:dailyRecords", "collection:notes"])
        // The page's tabs: the route table's views, in its order, each with the route it shows.
        let views = overview.json["views"] as? [[String: String]] ?? []
        #expect(views.map { $0["tab"] ?? "" } == ["catalog", "collection", "defaults", "files", "timeline", "consumers", "sync", "snapshots", "readers", "dashboard"])
        #expect(views.allSatisfy { view in view["api"] == "/api/\(view["tab"] ?? "")" && view["label"]?.isEmpty == false }, "\(views)")

        let catalog = try server.get("/api/catalog").json["entries"] as? [[String: Any]] ?? []
        let counts = Dictionary(catalog.map { ($0["name"] as? String ?? "", $0["count"] as? Int ?? -1) }, uniquingKeysWith: { a, _ in a })
        let records = ChecklistDataset.records().count
        #expect(counts["dailyRecords"] == records && counts["blobs"] == 3 && counts["notes"] == 0)

        // Key order, pages joined by their cursor, as `kvtool scan` (another process) lists them.
        let scanned = try tool(["--json", "scan", "dailyRecords"]).stdout
        let scannedKeys = ((try JSONSerialization.jsonObject(with: Data(scanned.utf8))) as? [[String: Any]] ?? []).compactMap { $0["key"] as? String }
        #expect(scannedKeys.count == records)
        var keys: [String] = []
        var after = ""
        for _ in 0..<10 {
            let page = try server.get("/api/collection?name=dailyRecords&limit=100&after=\(after)").json
            keys += (page["entries"] as? [[String: Any]] ?? []).compactMap { $0["key"] as? String }
            guard let next = page["next"] as? String else { break }
            after = next
        }
        #expect(keys == scannedKeys)
        let first = (try server.get("/api/collection?name=dailyRecords&limit=1").json["entries"] as? [[String: Any]])?.first
        #expect(first?["key"] as? String == "2025-11-22")
        #expect((first?["value"] as? String)?.hasPrefix("{\n  \"day\": \"2025-11-22\",\n") == true)
        let reversed = try server.get("/api/collection?name=dailyRecords&limit=3&reverse=1").json["entries"] as? [[String: Any]]
        #expect(reversed?.compactMap { $0["key"] as? String } == Array(scannedKeys.suffix(3).reversed()))
        let range = try server.get("/api/collection?name=dailyRecords&from=2026-11-01&through=2026-11-21&limit=500").json
        #expect((range["entries"] as? [[String: Any]])?.compactMap { $0["key"] as? String } == scannedKeys.filter { $0 >= "2026-11-01" })
        #expect(range["next"] is NSNull)
        let prefixed = try server.get("/api/collection?name=blobs&prefix=sh").json["entries"] as? [[String: Any]]
        #expect(prefixed?.compactMap { $0["key"] as? String } == ["short"])

        let suites = try server.get("/api/defaults").json["suites"] as? [[String: Any]] ?? []
        let settings = suites.first { $0["suite"] as? String == "settings" }?["entries"] as? [[String: Any]] ?? []
        #expect(settings.map { "\($0["key"]!)=\($0["type"]!):\($0["value"]!)" } == ["onboarded=bool:true", "reminderHour=int:3", "theme=string:\"dark\""])

        let top = try server.get("/api/files").json["entries"] as? [[String: Any]] ?? []
        #expect(top.compactMap { $0["name"] as? String } == ["Shared", "TrainerImages", "notes.txt"])
        // The replicated files of Files/Shared/ and where each stands here, as `kvtool files status` says.
        let shared = try server.get("/api/files?dir=Shared").json
        let replicated = (shared["replicated"] as? [[String: Any]] ?? []).map { "\($0["path"]!) \($0["state"]!) \($0["problem"] as? String ?? "-")" }
        #expect(replicated == ["Shared/a-old.txt missing -", "Shared/b-new.txt present -",
                               "Shared/c-waiting.txt waiting_to_upload too_large: the file has 600 bytes, the server's limit is 512"])
        #expect((shared["entries"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["b-new.txt", "c-waiting.txt"])
        #expect((try server.get("/api/files?dir=TrainerImages").json["replicated"] as? [Any])?.isEmpty == true)
        let images = try server.get("/api/files?dir=TrainerImages").json["entries"] as? [[String: Any]] ?? []
        #expect(images.first?["image"] as? Bool == true && images.first?["path"] as? String == "TrainerImages/sample.png")
        let png = try server.get("/api/file?path=TrainerImages/sample.png")
        #expect(png.status == 200 && png.headers["content-type"] == "image/png" && png.body == Array(TrainerNotificationFlow.samplePNG))
        let text = try server.get("/api/file?path=notes.txt")
        #expect(text.status == 200 && text.headers["content-type"] == "text/plain; charset=utf-8" && text.text == "plain text\n")

        let consumers = try server.get("/api/consumers").json
        #expect(consumers["current"] as? Int == records && (consumers["consumers"] as? [Any])?.isEmpty == true)
        // A consumer that read the checklist's transaction, and not the note written after it.
        #expect(try tool(["put", "notes", "later", "{}"]).status == 0)
        #expect(try tool(["history", "--consumer", "reporter", "--limit", "1"]).status == 0)
        let lagging = (try server.get("/api/consumers").json["consumers"] as? [[String: Any]])?.first
        #expect(lagging?["name"] as? String == "reporter" && lagging?["token"] as? Int == records && lagging?["behind"] as? Int == 1)

        #if PostgreSQL
        // The sync service's status: nobody owns sync and no agent is registered, so a request that
        // may not start one runs out of time (69), and every local change is pending.
        #expect(try tool(["sync", "request", "--no-agent", "--wait", "0"]).status == 69)
        let sync = try server.get("/api/sync").json
        let service = sync["status"] as? [String: Any]
        #expect(sync["available"] as? Bool == true && (service?["owner"] == nil || service?["owner"] is NSNull) && service?["agentRegistered"] as? Bool == false
                && service?["pending"] as? Int == records + 1 && service?["acknowledged"] as? Int == 0, "\(sync)")
        #endif

        let snapshots = try server.get("/api/snapshots").json
        #expect((snapshots["snapshots"] as? [[String: Any]])?.map { $0["status"] as? String } == ["ok"])
        // A snapshot damaged on disk shows its problem.
        let file = dir.path + "/\(group)/Snapshots/snapshot-000001.mdb"
        let handle = try #require(FileHandle(forUpdatingAtPath: file))
        try handle.seek(toOffset: 8192)
        handle.write(Data([0xFF, 0xFE, 0xFD]))
        try handle.close()
        let damaged = try server.get("/api/snapshots").json
        let status = (damaged["snapshots"] as? [[String: Any]])?.first?["status"] as? String ?? ""
        #expect(status != "ok" && (damaged["problems"] as? [String])?.count == 1, "\(damaged)")

        // A reader held by another process, and one whose process is gone.
        let holder = try BackgroundProcess.helper(["hold-read", dir.path, group])
        #expect(holder.waitForLine(timeout: BuildScale.seconds(20)) { $0 == "reading" } != nil)
        let readers = try server.get("/api/readers").json["readers"] as? [[String: Any]] ?? []
        #expect(readers.contains { $0["pid"] as? Int == Int(holder.pid) && $0["alive"] as? Bool == true && $0["transactionID"] is Int })
        holder.kill()
        _ = holder.wait(timeout: BuildScale.seconds(10))
        let afterKill = try server.get("/api/readers").json["readers"] as? [[String: Any]] ?? []
        #expect(afterKill.contains { $0["pid"] as? Int == Int(holder.pid) && $0["alive"] as? Bool == false })

        // The dashboard is the widget's own computation: compare with the store, read here. (Decoded
        // with JSONDecoder: JSONSerialization on Linux rounds the last bits of some doubles.)
        let dashboardResponse = try server.get("/api/dashboard")
        let dashboard = dashboardResponse.json
        let decoded = try JSONDecoder().decode(DashboardJSON.self, from: Data(dashboardResponse.body))
        #expect(dashboard["available"] as? Bool == true && dashboard["today"] as? String == "2026-11-21")
        let expected = try Self.expectedDashboard(root: dir.path, group: group)
        #expect(decoded.periods.count == expected.count && expected.count == DashboardPeriod.allCases.count)
        for (got, want) in zip(decoded.periods, expected) {
            #expect(got.period == want["period"] as? String && got.records == want["records"] as? Int)
            let wantCategories = want["categories"] as? [[String: Any]] ?? []
            #expect(got.categories.count == wantCategories.count)
            for (g, w) in zip(got.categories, wantCategories) {
                #expect(g.category == w["category"] as? String && g.trend == w["trend"] as? String)
                #expect(g.average == w["average"] as? Double, "\(got.period) \(g.category)")
            }
        }
        let widget = try run(productsDirectory() + "/checklist-widget", ["--root", dir.path, "--group", group])
        #expect(widget.stdout.contains(dashboard["yearLine"] as? String ?? "missing"), "\(widget.stdout)")

        let timeline = try server.get("/api/timeline?limit=5").json
        let entries = (timeline["events"] as? [[String: Any]] ?? []).flatMap { $0["entries"] as? [[String: Any]] ?? [] }
        #expect(entries.compactMap { $0["key"] as? String }.suffix(2) == ["2026-11-21", "later"] && entries.count == 5)

        for asset in ["/", "/app.css", "/app.js"] {
            let response = try server.get(asset)
            #expect(response.status == 200 && !response.body.isEmpty, "\(asset)")
            #expect(response.headers["content-security-policy"]?.contains("script-src 'self'") == true)
            #expect(response.headers["referrer-policy"] == "no-referrer")
        }
        #expect(try server.get("/api/nothing").status == 404)
        #expect(try server.client.request("DELETE", "/api/catalog", headers: ["X-KVTool-Token": server.token]).status == 405)
        #expect(try server.client.request("POST", "/api/events", headers: ["X-KVTool-Token": server.token]).status == 405)
    }

    /// The dashboard as `/api/dashboard` lists it, computed here from a read-only open of the store.
    static func expectedDashboard(root: String, group: String) throws -> [[String: Any]] {
        var options = SharedContainer.Options()
        options.readOnly = true
        let container = try SharedContainer(groupIdentifier: group, root: root, options: options)
        let checklist = try ChecklistStore(store: container.store)
        let dashboard = try container.store.read { tx in try checklist.dashboard(today: ChecklistDataset.today, in: tx) }
        return dashboard.periods.map { period in
            ["period": period.period.rawValue, "records": period.records,
             "categories": ChecklistCategory.allCases.map { category -> [String: Any] in
                 ["category": category.rawValue, "average": period.categoryAverages[category] ?? NSNull(),
                  "trend": (period.trends[category] ?? .flat).rawValue]
             }]
        }
    }

    @Test(.blockingWork) func everyRequestNeedsTheTokenAndThisServersHost() throws {
        try fixture()
        let server = try Server(root: dir.path, group: group)
        let client = server.client
        let wrong = String(server.token.reversed())
        for path in ServeRoutes.all {
            let missing = try client.request("GET", path)
            #expect(missing.status == 403, "\(path)")
            if path == "/" || path == "/index.html" {
                // The page itself is refused as a page, and shows nothing of the container.
                #expect(missing.headers["content-type"] == "text/html; charset=utf-8" && missing.text.contains("403: access denied")
                        && missing.text.contains("no access token") && !missing.text.contains("app.js"), "\(missing.text)")
            } else {
                #expect(missing.json["error"] as? String == "no access token: open the URL kvtool serve printed, with its ?token=", "\(path)")
            }
            #expect(try client.request("GET", path + (path.contains("?") ? "&" : "?") + "token=\(wrong)").status == 403, "\(path)")
            #expect(try client.request("GET", path, headers: ["X-KVTool-Token": String(server.token.dropLast())]).status == 403)
            #expect(try client.request("GET", path, headers: ["Cookie": "kvtool_token_\(server.port)=\(wrong)"]).status == 403)
            #expect(try client.request("POST", path, headers: ["Content-Type": "application/json"], body: Array("{}".utf8)).status == 403)
        }
        // The page's URL sets the cookie the page's own requests then carry.
        let page = try client.request("GET", "/?token=\(server.token)")
        #expect(page.status == 200 && page.headers["content-type"] == "text/html; charset=utf-8")
        let cookie = page.headers["set-cookie"] ?? ""
        #expect(cookie == "kvtool_token_\(server.port)=\(server.token); Path=/; HttpOnly; SameSite=Strict")
        #expect(try client.request("GET", "/api/catalog", headers: ["Cookie": "theme=x; kvtool_token_\(server.port)=\(server.token)"]).status == 200)
        // The cookie is named for the port: another server's (or one under the old name) is not this one's.
        #expect(try client.request("GET", "/api/catalog", headers: ["Cookie": "kvtool_token=\(server.token)"]).status == 403)
        #expect(try client.request("GET", "/api/catalog", headers: ["Cookie": "kvtool_token_\(server.port + 1)=\(server.token)"]).status == 403)
        // Another site's page whose name resolves to 127.0.0.1 (DNS rebinding) sends its own Host.
        let rebound = try client.request("GET", "/api/catalog?token=\(server.token)", headers: ["Host": "evil.example:\(server.port)"])
        #expect(rebound.status == 403 && (rebound.json["error"] as? String)?.contains("Host header") == true)
        #expect(try client.request("GET", "/api/catalog?token=\(server.token)", headers: ["Host": "localhost:\(server.port)"]).status == 200)
    }

    /// A page of another origin (another port of 127.0.0.1 is one: same site, so the browser sends it
    /// the cookie) gets nothing, token or not: neither a write, nor the event stream, nor a read. The
    /// server's own page, and clients that are not browsers, go on.
    @Test(.blockingWork) func requestsFromPagesOfAnotherOriginAreRefused() throws {
        try fixture()
        let server = try Server(root: dir.path, group: group, extra: ["--allow-writes"])
        let client = server.client
        let cookie = "kvtool_token_\(server.port)=\(server.token)"
        let put = Array(#"{"collection": "notes", "key": "from-elsewhere", "value": {"text": "x"}}"#.utf8)
        let foreign = ["http://127.0.0.1:\(server.port + 1)", "http://localhost:8888", "null", "http://127.0.0.1:\(server.port).evil.example"]
        for origin in foreign {
            let write = try client.request("POST", "/api/put", headers: ["Cookie": cookie, "Origin": origin, "Content-Type": "application/json"], body: put)
            #expect(write.status == 403 && (write.json["error"] as? String)?.contains("another origin") == true, "\(origin): \(write.text)")
            let events = try client.request("GET", "/api/events", headers: ["Cookie": cookie, "Origin": origin])
            #expect(events.status == 403 && events.headers["content-type"] == "application/json; charset=utf-8", "\(origin)")
            #expect(try client.request("GET", "/api/catalog", headers: ["X-KVTool-Token": server.token, "Origin": origin]).status == 403)
        }
        // What a browser says of a request from another port's page, an image or a script included.
        for site in ["same-site", "cross-site"] {
            for path in ["/api/catalog", "/api/file?path=TrainerImages/a.png", "/app.js", "/?token=\(server.token)"] {
                let response = try client.request("GET", path, headers: ["Cookie": cookie, "Sec-Fetch-Site": site])
                #expect(response.status == 403 && !response.text.contains("dailyRecords"), "\(site) \(path)")
            }
        }
        #expect(try tool(["get", "notes", "from-elsewhere"]).status == 1, "a refused write landed")
        // The page's own requests: same origin (or the URL typed in: none).
        let own = try client.request("POST", "/api/put", headers: ["Cookie": cookie, "Origin": "http://127.0.0.1:\(server.port)",
                                                                    "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"], body: put)
        #expect(own.status == 200, "\(own.text)")
        #expect(try client.request("GET", "/?token=\(server.token)", headers: ["Sec-Fetch-Site": "none"]).status == 200)
        #expect(try client.request("GET", "/api/catalog", headers: ["Cookie": cookie, "Origin": "http://localhost:\(server.port)"]).status == 200)
    }

    /// Every answer, a refusal or a miss included, carries the headers that keep a page from being
    /// framed, sniffed into another type, cached, or made to run anything but its own script.
    @Test(.blockingWork) func everyResponseCarriesTheSecurityHeaders() throws {
        try fixture()
        let server = try Server(root: dir.path, group: group)
        let client = server.client
        // (The event stream's head is checked by its reader, EventStreamReader.)
        var responses = try ServeRoutes.all.filter { $0 != "/api/events" }.map { try server.get($0) }
        responses.append(try client.request("GET", "/api/catalog"))                          // 403: no token
        responses.append(try client.request("GET", "/api/events"))                           // 403: no token
        responses.append(try server.get("/no-such-route"))                                   // 404
        responses.append(try client.request("GET", "/?token=\(server.token)"))               // the page
        responses.append(try server.get("/api/file?path=TrainerImages/../x"))                 // 400
        for response in responses {
            let headers = response.headers
            #expect(headers["content-security-policy"] == "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
                    "\(response.status)")
            #expect(headers["x-content-type-options"] == "nosniff" && headers["x-frame-options"] == "DENY"
                    && headers["cache-control"] == "no-store" && headers["referrer-policy"] == "no-referrer", "\(response.status): \(headers)")
        }
    }

    /// Tried as a new user would: clients that trickle their request head a byte at a time, more of
    /// them than the server has slots. Each is cut off at the request deadline (`--request-timeout`),
    /// so a real request gets through again within it, and not a byte of theirs is answered.
    @Test(.blockingWork) func clientsThatTrickleTheirRequestHeadAreCutOff() throws {
        try fixture()
        let server = try Server(root: dir.path, group: group, extra: ["--request-timeout", "2"])
        var tricklers: [Int32] = []
        defer { for fd in tricklers { close(fd) } }
        for _ in 0..<300 {
            let fd = try HTTPTestClient.connectLoopback(port: server.port)
            _ = "GET /api/catalog HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\n".withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
            tricklers.append(fd)
        }
        // A byte a second each, for 4 s: past the 2 s deadline.
        let started = Date()
        var closedAt: [Double] = []
        var open = Set(tricklers)
        while Date().timeIntervalSince(started) < BuildScale.seconds(4) {
            for fd in open {
                if "X".withCString({ send(fd, $0, 1, Int32(MSG_NOSIGNAL)) }) < 0 || Self.peerClosed(fd) {
                    open.remove(fd)
                    closedAt.append(Date().timeIntervalSince(started))
                }
            }
            usleep(1_000_000)
        }
        for fd in open where Self.peerClosed(fd) {
            open.remove(fd)
            closedAt.append(Date().timeIntervalSince(started))
        }
        #expect(open.count == 0, "\(open.count) of 300 trickling connections still open after \(BuildScale.seconds(4)) s")
        let real = try server.get("/api/catalog")
        #expect(real.status == 200, "\(real.status) \(real.text.prefix(200))")
        print("[serve] 300 clients trickling their request head: all cut off within \(String(format: "%.1f", closedAt.max() ?? 0)) s (deadline 2 s); a real request then got \(real.status)")
    }

    /// Whether the server closed `fd` (a read without blocking sees the end, or an error).
    static func peerClosed(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        let read = recv(fd, &byte, 1, Int32(MSG_DONTWAIT))
        if read == 0 { return true }
        if read < 0 { return errno != EAGAIN && errno != EWOULDBLOCK }
        return false
    }

    @Test(.blockingWork) func pathsAndKeysFromRequestsAreChecked() throws {
        try fixture()
        // A co-tenant planted a link out of Files/.
        try FileManager.default.createSymbolicLink(atPath: dir.path + "/\(group)/Files/escape", withDestinationPath: "/etc")
        try FileManager.default.createSymbolicLink(atPath: dir.path + "/\(group)/Files/passwd", withDestinationPath: "/etc/passwd")
        let server = try Server(root: dir.path, group: group)
        for path in ["../store/data.mdb", "%2E%2E/store/data.mdb", "/etc/passwd", "escape/passwd", "passwd",
                     "TrainerImages/../../store/data.mdb", "a%00b", "TrainerImages%5C..%5C..%5Cstore", ""] {
            let response = try server.get("/api/file?path=\(path)")
            #expect([400, 404].contains(response.status), "\(path): \(response.status) \(response.text.prefix(200))")
            #expect(!response.text.contains("root:") && response.json["error"] is String, "\(path)")
        }
        for dir in ["..", "escape", "/etc", "%2e%2e"] {
            let response = try server.get("/api/files?dir=\(dir)")
            #expect([400, 404].contains(response.status), "\(dir): \(response.status)")
        }
        // A request path is a route or nothing: no file is ever looked up from it.
        for target in ["/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/app.js/../../store/data.mdb", "//etc/passwd"] {
            let response = try server.get(target)
            #expect(response.status == 404 && !response.text.contains("root:"), "\(target)")
        }
        let badKey = try server.get("/api/collection?name=dailyRecords&from=not-a-day")
        #expect(badKey.status == 400 && (badKey.json["error"] as? String)?.contains("not-a-day") == true, "\(badKey.text)")
        #expect(try server.get("/api/collection?name=nothing").status == 404)
        #expect(try server.get("/api/collection?name=dailyRecords&after=zz").status == 400)
        #expect(try server.get("/api/collection?name=dailyRecords&prefix=2026&from=2026-01-01").status == 400)
        let escaped = try server.get("/api/collection?name=%3Cscript%3E")
        #expect(escaped.status == 404 && escaped.headers["content-type"] == "application/json; charset=utf-8")
    }

    @Test(.blockingWork) func largeValuesAreCutAndPagesBounded() throws {
        try fixture()
        let server = try Server(root: dir.path, group: group)
        let blobs = try server.get("/api/collection?name=blobs").json["entries"] as? [[String: Any]] ?? []
        let byKey = Dictionary(blobs.map { ($0["key"] as? String ?? "", $0) }, uniquingKeysWith: { a, _ in a })
        #expect(byKey["huge"]?["truncated"] as? Bool == true && byKey["huge"]?["size"] as? Int == (2 << 20) + 5)
        #expect((byKey["huge"]?["value"] as? String)?.hasPrefix("(2097157 bytes: not decoded") == true)
        #expect(byKey["long"]?["truncated"] as? Bool == true && (byKey["long"]?["value"] as? String)?.count == 4_096)
        #expect(byKey["short"]?["truncated"] as? Bool == false && byKey["short"]?["value"] as? String == "\"short\"")
        for limit in ["0", "501", "-1", "abc", "99999999999999999999"] {
            let response = try server.get("/api/collection?name=dailyRecords&limit=\(limit)")
            #expect(response.status == 400 && (response.json["error"] as? String)?.hasPrefix("limit must be a whole number from 1 to 500") == true, "\(limit)")
        }
        #expect(((try server.get("/api/collection?name=dailyRecords&limit=500").json["entries"]) as? [Any])?.count == ChecklistDataset.records().count)
        // A header section over NIO's limit, and a huge request line, end with an error, not a crash.
        let hugeHeader = try? server.client.request("GET", "/api/catalog", headers: ["X-KVTool-Token": server.token, "X-Big": String(repeating: "a", count: 200_000)])
        #expect(hugeHeader.map { $0.status >= 400 } ?? true)
        #expect(try server.get("/api/overview").status == 200)
    }

    @Test(.blockingWork) func writesNeedAllowWritesAndJSON() throws {
        try fixture()
        let body = Array(#"{"collection": "notes", "key": "from-browser", "value": {"text": "hello"}}"#.utf8)
        do {
            let readOnly = try Server(root: dir.path, group: group)
            let refused = try readOnly.client.request("POST", "/api/put", headers: ["X-KVTool-Token": readOnly.token, "Content-Type": "application/json"], body: body)
            #expect(refused.status == 403 && (refused.json["error"] as? String)?.contains("--allow-writes") == true)
        }
        let server = try Server(root: dir.path, group: group, extra: ["--allow-writes", "--author", "web"])
        let headers = ["X-KVTool-Token": server.token, "Content-Type": "application/json"]
        #expect(try server.client.request("POST", "/api/put", headers: ["X-KVTool-Token": server.token, "Content-Type": "text/plain"], body: body).status == 415)
        #expect(try server.client.request("POST", "/api/put", headers: headers, body: Array("[1".utf8)).status == 400)
        #expect(try server.client.request("POST", "/api/put", headers: headers, body: Array(#"{"collection": "dailyRecords", "key": "2026-11-21", "value": 1}"#.utf8)).status == 400)
        let tooLarge = try server.client.request("POST", "/api/put", headers: headers, body: [UInt8](repeating: 0x20, count: 2 << 20))
        #expect(tooLarge.status == 413)
        let stored = try server.client.request("POST", "/api/put", headers: headers, body: body)
        #expect(stored.status == 200 && stored.json["transaction"] is Int, "\(stored.text)")
        #expect(try tool(["get", "notes", "from-browser"]).stdout == "{\"text\":\"hello\"}\n")
        // Read by kvtool put's reader: numbers as typed, a repeated member refused.
        let typed = Array(#"{"collection": "notes", "key": "typed", "value": {"f": 1.0, "big": 18446744073709551615, "n": -3}}"#.utf8)
        #expect(try server.client.request("POST", "/api/put", headers: headers, body: typed).status == 200)
        #expect(try tool(["get", "notes", "typed"]).stdout == "{\"big\":18446744073709551615,\"f\":1.0,\"n\":-3}\n")
        let repeated = Array(#"{"collection": "notes", "key": "twice", "key": "again", "value": 1}"#.utf8)
        #expect(try server.client.request("POST", "/api/put", headers: headers, body: repeated).status == 400)
        let history = try tool(["history", "--collection", "notes"]).stdout
        #expect(history.contains("  web  put  notes  from-browser"), "\(history)")
        let deleted = try server.client.request("POST", "/api/delete", headers: headers, body: Array(#"{"collection": "notes", "key": "from-browser"}"#.utf8))
        #expect(deleted.json["deleted"] as? Bool == true)
        #expect(try tool(["get", "notes", "from-browser"]).status == 1)
    }

    /// The live timeline: a commit by another process reaches an open event stream, with its history;
    /// one by a process that records none arrives as a bare commit.
    @Test(.blockingWork) func commitsOfOtherProcessesReachTheEventStream() throws {
        try fixture()
        let server = try Server(root: dir.path, group: group)
        let stream = try EventStreamReader(port: server.port, token: server.token)
        let hello = try stream.next(timeout: BuildScale.seconds(10))
        #expect(hello?.hasPrefix("event: hello\ndata: {\"transaction\":") == true, "\(hello ?? "nil")")
        var latencies: [Double] = []
        for i in 0..<5 {
            #expect(try tool(["--author", "cli", "put", "notes", "k\(i)", "{\"n\": \(i)}"]).status == 0)
            let event = try stream.next(timeout: BuildScale.seconds(10)) ?? ""
            #expect(event.hasPrefix("event: commit\ndata: {\"transaction\":"), "\(event)")
            #expect(event.contains("\"history\":true") && event.contains("\"author\":\"cli\"") && event.contains("\"name\":\"notes\"")
                    && event.contains("\"key\":\"k\(i)\"") && event.contains("\"operation\":\"put\""), "\(event)")
            // From the commit (the time the writer recorded in its transaction) to the server seeing it.
            let dataLine = String(event.split(separator: "\n").last ?? "")
            let data = Data(dataLine.dropFirst("data: ".count).utf8)
            let commit = try JSONDecoder().decode(CommitEventJSON.self, from: data)
            if let seen = commit.seenDate, let committed = commit.entries.first?.timestampDate {
                latencies.append(seen.timeIntervalSince(committed) * 1000)
            }
        }
        #expect(try helper(["write-suite", dir.path, group, "settings", "theme", "light"]).status == 0)
        let bare = try stream.next(timeout: BuildScale.seconds(10)) ?? ""
        #expect(bare.contains("\"history\":false,\"entries\":[]"), "\(bare)")
        let sorted = latencies.sorted()
        try #require(sorted.count == 5)
        print("[serve] event stream: commit to the server seeing it, 5 commits of another process: min \(Int(sorted[0].rounded())) ms, median \(Int(sorted[2].rounded())) ms, max \(Int(sorted[4].rounded())) ms (timestamps in ms) (\(BuildScale.name))")
        #expect(sorted[4] < BuildScale.seconds(1) * 1000)
    }

    /// 100 clients on loopback for 10 s against the four heaviest pages: no error, and the server's
    /// memory stays bounded.
    @Test(.blockingWork) func hundredConcurrentClientsForTenSeconds() throws {
        try fixture()
        let server = try Server(root: dir.path, group: group)
        let targets = ["/api/catalog", "/api/collection?name=dailyRecords&limit=100", "/api/dashboard", "/api/overview",
                       "/api/collection?name=blobs", "/api/readers"]
        for target in targets { _ = try server.get(target) }
        let before = Self.residentMiB(server.process.pid)
        let counts = Locked((requests: 0, errors: [String](), perClient: [Int](repeating: 0, count: 100)))
        let duration = 10.0
        let deadline = Date().addingTimeInterval(duration)
        let started = Date()
        let threads = (0..<100).map { index in
            Thread {
                var i = index
                // Every client gets at least one answer, however slow the build (sanitizers).
                repeat {
                    let target = targets[i % targets.count]
                    i += 1
                    do {
                        let response = try server.get(target)
                        counts.withLock { state in
                            state.requests += 1
                            state.perClient[index] += 1
                            if response.status != 200 { state.errors.append("\(target): \(response.status)") }
                        }
                    } catch {
                        counts.withLock { $0.errors.append("\(target): \(error)") }
                    }
                } while Date() < deadline
            }
        }
        threads.forEach { $0.start() }
        while threads.contains(where: { !$0.isFinished }) { usleep(50_000) }
        let elapsed = Date().timeIntervalSince(started)
        let after = Self.residentMiB(server.process.pid)
        let (requests, errors, perClient) = counts.withLock { ($0.requests, $0.errors, $0.perClient) }
        print("[serve] 100 clients for \(Int(elapsed)) s: \(requests) requests (\(Int(Double(requests) / elapsed))/s), \(errors.count) errors, fewest answers to one client \(perClient.min() ?? 0); server RSS \(Int(before)) → \(Int(after)) MiB, peak \(Int(Self.residentMiB(server.process.pid, field: "VmHWM"))) MiB (\(BuildScale.name))")
        #expect(errors.isEmpty, "\(errors.prefix(5))")
        #expect(perClient.allSatisfy { $0 >= 1 })
        #expect(after - before < 64 * BuildScale.factor, "RSS grew from \(before) to \(after) MiB")
        #expect(try server.get("/api/overview").status == 200)
    }

    static func residentMiB(_ pid: Int32, field: String = "VmRSS") -> Double {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix(field + ":") } ?? ""
        return (Double(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) / 1024
    }

    /// The page in Debian's chromium, driven by Selenium: browsing, the live timeline fed by another
    /// process, the dashboard chart's values, and the 403 without the token. Screenshots go to
    /// `.build/artifacts/serve`.
    @Test(.blockingWork) func theBrowserShowsTheContainer() throws {
        try fixture()
        // Writes allowed: the page of another port must be refused by its origin, not by a read-only store.
        let server = try Server(root: dir.path, group: group, extra: ["--allow-writes"])
        let expected = try Self.expectedDashboard(root: dir.path, group: group)
        let expectedFile = dir.path + "/expected-dashboard.json"
        try JSONSerialization.data(withJSONObject: expected).write(to: URL(fileURLWithPath: expectedFile))
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        let screenshots = repository + "/.build/artifacts/serve" + (BuildScale.sanitizer.map { "-" + $0 } ?? "")
        let result = try run("/usr/bin/env", ["python3", repository + "/Tests/Browser/serve_browser.py",
                                              "--url", server.url, "--kvtool", productsDirectory() + "/kvtool",
                                              "--root", dir.path, "--group", group, "--expected-dashboard", expectedFile,
                                              "--screenshots", screenshots, "--collection", "dailyRecords",
                                              "--timeline-collection", "notes"],
                             timeout: 150)
        for line in result.stdout.split(separator: "\n") where line.hasPrefix("[serve-browser]") { print(line) }
        #expect(result.status == 0, "\(result.stdout.suffix(3000))\n\(result.stderr.suffix(3000))")
    }
}

/// One `event: commit` of `/api/events`.
struct CommitEventJSON: Decodable {
    struct Entry: Decodable {
        var timestamp: String
        var timestampDate: Date? { try? Date(timestamp, strategy: .iso8601.year().month().day().time(includingFractionalSeconds: true)) }
    }
    var transaction: Int
    var seen: String
    var history: Bool
    var entries: [Entry]
    var seenDate: Date? { try? Date(seen, strategy: .iso8601.year().month().day().time(includingFractionalSeconds: true)) }
}

/// `/api/dashboard`, decoded exactly.
struct DashboardJSON: Decodable {
    struct Period: Decodable {
        struct Category: Decodable {
            var category: String
            var average: Double?
            var trend: String
        }
        var period: String
        var records: Int
        var categories: [Category]
    }
    var periods: [Period]
}

/// The routes the token test walks.
enum ServeRoutes {
    static let all = ["/", "/index.html", "/app.js", "/app.css", "/api/overview", "/api/catalog", "/api/collection?name=dailyRecords",
                      "/api/defaults", "/api/files", "/api/file?path=notes.txt", "/api/consumers", "/api/sync", "/api/snapshots",
                      "/api/readers", "/api/dashboard", "/api/timeline", "/api/events", "/api/put", "/api/nothing", "/../etc/passwd"]
}

/// Reads server-sent events, one at a time, from an open `/api/events` stream (its body comes in
/// HTTP/1.1 chunks, which are undone here).
final class EventStreamReader {
    private let fd: Int32
    private var raw: [UInt8] = []
    private var body: [UInt8] = []

    init(port: Int, token: String) throws {
        fd = try HTTPTestClient.connectLoopback(port: port)
        let request = "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nX-KVTool-Token: \(token)\r\n\r\n"
        _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        let deadline = Date().addingTimeInterval(BuildScale.seconds(10))
        while raw.firstRange(of: Array("\r\n\r\n".utf8)) == nil {
            guard try receive(until: deadline) else { throw HTTPTestClient.Failure(description: "no response head") }
        }
        let end = raw.firstRange(of: Array("\r\n\r\n".utf8))!
        let head = String(decoding: raw[..<end.lowerBound], as: UTF8.self).lowercased()
        raw.removeSubrange(..<end.upperBound)
        guard head.hasPrefix("http/1.1 200"), head.contains("content-type: text/event-stream"), head.contains("transfer-encoding: chunked"),
              head.contains("x-content-type-options: nosniff"), head.contains("cache-control: no-store"), head.contains("x-frame-options: deny"),
              head.contains("content-security-policy: default-src 'self'") else {
            throw HTTPTestClient.Failure(description: "not a chunked event stream: \(head)")
        }
    }

    deinit { close(fd) }

    /// The next event (comments and the retry field skipped), without its blank line; `nil` on timeout.
    func next(timeout: TimeInterval) throws -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            dechunk()
            if let range = body.firstRange(of: Array("\n\n".utf8)) {
                let event = String(decoding: body[..<range.lowerBound], as: UTF8.self)
                body.removeSubrange(..<range.upperBound)
                let lines = event.split(separator: "\n").filter { !$0.hasPrefix(":") && !$0.hasPrefix("retry:") }
                if !lines.isEmpty { return lines.joined(separator: "\n") }
                continue
            }
            guard try receive(until: deadline) else { return nil }
        }
    }

    /// Moves every complete chunk of `raw` into `body`.
    private func dechunk() {
        while let line = raw.firstRange(of: Array("\r\n".utf8)),
              let size = Int(String(decoding: raw[..<line.lowerBound], as: UTF8.self), radix: 16),
              raw.count >= line.upperBound + size + 2 {
            body += raw[line.upperBound..<(line.upperBound + size)]
            raw.removeSubrange(..<(line.upperBound + size + 2))
        }
    }

    /// Reads what has arrived; `false` on timeout.
    private func receive(until deadline: Date) throws -> Bool {
        let left = deadline.timeIntervalSinceNow
        guard left > 0 else { return false }
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(left * 1000) + 1) > 0 else { return false }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = recv(fd, &buffer, buffer.count, 0)
        guard n > 0 else { throw HTTPTestClient.Failure(description: "the event stream closed") }
        raw += buffer[0..<n]
        return true
    }
}
#endif
