#if PostgreSQL
import Crypto
import Foundation
import KVStore
import Logging
import SyncGateway
import SyncKit
@testable import SyncKitPostgres
import SyncWire
@testable import PostgresTesting
import TestSupport
import SyncTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Devices that sync through a sync gateway with credentials of their own group: a real PostgreSQL
/// cluster, real `kvtool sync gateway` processes and real `kvtool sync run` devices.
@Suite(.serialized) struct GatewayTests {
    static func group(_ name: String) -> String { "group.com.example.gateway.\(name)" }

    /// `kvtool sync gateway` as the cluster's gateway login; the process and its URL.
    static func startGateway(_ cluster: LocalPostgresCluster, port: Int = 0, extra: [String] = []) async throws -> (BackgroundProcess, String) {
        try await SyncTestSupport.startGateway(cluster, port: port, extra: extra)
    }

    /// `kvtool sync token issue … ARGS`: the token it printed (its whole output).
    static func issue(_ cluster: LocalPostgresCluster, _ arguments: [String]) async throws -> String {
        try await issueToken(cluster, arguments)
    }

    @Test(.blockingWork) func devicesOfOneGroupConvergeThroughAGatewayWithTheirOwnTokens() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("converge")
        let (gateway, url) = try await Self.startGateway(cluster)
        defer { gateway.kill(SIGKILL) }
        #expect(url.hasPrefix("http://127.0.0.1:"))
        let tokenA = try await Self.issue(cluster, ["--group", group, "--device", "a"])
        let tokenB = try await Self.issue(cluster, ["--group", group, "--device", "b"])
        // Only the token: kvs1_ and 43 characters of base64url, 256 bits.
        #expect(SyncTokens.isWellFormed(tokenA) && tokenA != tokenB, "\(tokenA)")
        // The database keeps the SHA-256 only.
        #expect(try cluster.count("SELECT count(*) FROM kvsync_tokens WHERE hash = sha256(convert_to('\(tokenA)', 'UTF8'))") == 1)
        #expect(try cluster.psql("SELECT string_agg(encode(hash, 'hex'), ',') FROM kvsync_tokens").contains(tokenA) == false)

        let a = try Device(group: group), b = try Device(group: group)
        try a.put("from a", "shared")
        try a.put("only a", "a1")
        try b.put("only b", "b1")
        try a.settings.set("dark", forKey: "theme")
        for (device, token) in [(a, tokenA), (b, tokenB), (a, tokenA)] {
            let result = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token", token])
            #expect(result.status == 0, "\(result.stderr)")
        }
        #expect(try a.noteLines() == ["a1=only a", "b1=only b", "shared=from a"])
        #expect(try b.noteLines() == a.noteLines())
        #expect(try b.settings.string(forKey: "theme") == "dark")
        #expect(try a.storedNotes() == cluster.storedNotes(group: group))

        // A conflict settles as on the direct path: both edit `shared`, the later clock wins everywhere.
        try a.put("a's edit", "shared")
        usleep(5_000)   // a later millisecond: the same one would be settled by the device ids
        try b.put("b's later edit", "shared")
        var environment = ProcessInfo.processInfo.environment
        environment["KVSTORE_SYNC_TOKEN"] = tokenA
        let viaEnvironment = try run(productsDirectory() + "/kvtool",
                                     ["sync", "run", "--once", "--server", url, "--root", a.directory.path, "--group", group],
                                     environment: environment)
        #expect(viaEnvironment.status == 0, "\(viaEnvironment.stderr)")
        for (device, token) in [(b, tokenB), (a, tokenA)] {
            let result = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token", token])
            #expect(result.status == 0, "\(result.stderr)")
        }
        #expect(try a.notes.get("shared") == "b's later edit")
        #expect(try b.notes.get("shared") == "b's later edit")
        #expect(try a.status().pendingChanges == 0 && b.status().pendingChanges == 0)

        // The replicator API takes the gateway and a credential too.
        let c = try Device(group: group)
        let replicator = try Replicator(container: c.container, gateway: SyncGatewayURL(url),
                                        token: try await Self.issue(cluster, ["--group", group]), targets: c.targets)
        let ran = try await replicator.sync()
        #expect(ran.pulled >= 3)
        #expect(try c.noteLines() == a.noteLines())
        // Pruning is the database owner's, never a device's.
        await #expect(throws: ReplicationError.self) { try await replicator.pruneServer(olderThan: .zero) }
        await replicator.close()
    }

    @Test func everyRefusedCredentialGetsExit77AndOneLineWithoutTheToken() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("refused")
        let other = Self.group("other")
        let (gateway, url) = try await Self.startGateway(cluster)
        defer { gateway.kill(SIGKILL) }
        let device = try Device(group: group)
        try device.put("v", "k")
        func sync(_ token: String?) async throws -> ProcessResult {
            try await device.kvtoolOffPool(["sync", "run", "--once", "--server", url] + (token.map { ["--token", $0] } ?? []))
        }
        func expectRefused(_ token: String, _ reason: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let result = try await sync(token)
            #expect(result.status == 77, "\(result.stderr)", sourceLocation: sourceLocation)
            #expect(result.stderr.split(separator: "\n").count == 1 && result.stderr.contains(reason), "\(result.stderr)",
                    sourceLocation: sourceLocation)
            #expect(!result.stderr.contains(token) && !result.stdout.contains(token), sourceLocation: sourceLocation)
        }
        // Missing: a usage error before anything is sent; not a token at all: refused locally.
        #expect(try await sync(nil).status == 64)
        let garbage = try await sync("not-a-token")
        #expect(garbage.status == 65 && garbage.stderr.contains("not one `kvtool sync token issue` prints"), "\(garbage.stderr)")
        // The form of a token, but none the database issued.
        try await expectRefused(SyncTokens.prefix + String(repeating: "A", count: 43), "not known here")
        // Another group's.
        try await expectRefused(try await Self.issue(cluster, ["--group", other]), "for another group than \(group)")
        // Revoked, by id and by device.
        let revokedByID = try await Self.issue(cluster, ["--group", group, "--device", "lost-phone"])
        #expect(try await sync(revokedByID).status == 0)
        let id = try cluster.psql("SELECT id FROM kvsync_tokens WHERE device = 'lost-phone'").trimmingCharacters(in: .whitespacesAndNewlines)
        let revoke = try await kvtoolRun(["sync", "token", "revoke", "--database", cluster.tcpURL.description, "--id", id])
        #expect(revoke.status == 0 && revoke.stdout.contains("revoked 1 credential"), "\(revoke.stdout)\(revoke.stderr)")
        try await expectRefused(revokedByID, "was revoked")
        let again = try await kvtoolRun(["sync", "token", "revoke", "--database", cluster.tcpURL.description, "--id", id])
        #expect(again.status == 1, "\(again.stderr)")
        let byDevice = try await Self.issue(cluster, ["--group", group, "--device", "old-tablet"])
        let revokeDevice = try await kvtoolRun(["sync", "token", "revoke", "--database", cluster.tcpURL.description,
                                                                     "--device", "old-tablet", "--group", group])
        #expect(revokeDevice.status == 0, "\(revokeDevice.stderr)")
        try await expectRefused(byDevice, "was revoked")
        // Expired.
        let shortLived = try await Self.issue(cluster, ["--group", group, "--expires-in", "1"])
        try await Task.sleep(for: .milliseconds(1_500))
        try await expectRefused(shortLived, "has expired")
        // The list shows them all, and never a token.
        let list = try await kvtoolRun(["sync", "token", "list", "--database", cluster.tcpURL.description,
                                                             "--group", group, "--json"])
        #expect(list.status == 0 && list.stdout.contains("\"device\":\"lost-phone\"") && list.stdout.contains("\"revokedAt\":\"20"), "\(list.stdout)")
        #expect(!list.stdout.contains(SyncTokens.prefix))
        // Nothing of the refused attempts reached the server.
        #expect(try cluster.count("SELECT count(*) FROM kvsync_changes") == 1)
    }

    @Test func aReadOnlyCredentialPullsAndNeverPushes() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("read-only")
        let (gateway, url) = try await Self.startGateway(cluster)
        defer { gateway.kill(SIGKILL) }
        let writer = try Device(group: group), reader = try Device(group: group)
        try writer.put("published", "k")
        #expect(try await writer.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token", try await Self.issue(cluster, ["--group", group])]).status == 0)
        let readOnly = try await Self.issue(cluster, ["--group", group, "--device", "widget", "--read-only"])
        try reader.put("local only", "mine")
        let result = try await reader.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token", readOnly])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("pushed 0, pulled 1"), "\(result.stdout)")
        #expect(try reader.notes.get("k") == "published")
        // Its own write waits, unsent.
        #expect(try reader.status().pendingChanges == 1)
        #expect(try cluster.count("SELECT count(*) FROM kvsync_changes WHERE key = '\\x6d696e65'::bytea") == 0)
        // And a push asked for outright is refused by the gateway.
        let replicator = try Replicator(container: reader.container, gateway: SyncGatewayURL(url), token: readOnly, targets: reader.targets)
        await #expect(throws: ReplicationError.credentialRefused("it is read-only: it pulls and never pushes")) {
            try await replicator.push()
        }
        await replicator.close()
        // Even a hand-made push request: the gateway answers 403, and kvsync_push would refuse too.
        let body = GatewayPushRequest(device: "widget", maxClockSkewMilliseconds: 60_000, changes: [
            OutgoingChange(kind: "collection", name: "notes", key: Array("x".utf8), value: [0x61], clock: 1 << 16, base: 0, token: 1),
        ]).encoded()
        let answer = try RawHTTP.request(url, "POST /v1/push", headers: ["Authorization: Bearer \(readOnly)", "KVSync-Group: \(group)"], body: body)
        #expect(answer.status == 403 && answer.text.contains("read-only"), "\(answer.text)")
    }

    /// The isolation is PostgreSQL's: the gateway's role, scoped to one group, can neither see nor
    /// change another's rows, even through statements no gateway sends.
    @Test func theGatewaysRoleScopedToOneGroupCannotReachAnotherEvenWithRawSQL() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let mine = Self.group("mine"), theirs = Self.group("theirs")
        let (gateway, url) = try await Self.startGateway(cluster)
        defer { gateway.kill(SIGKILL) }
        for group in [mine, theirs] {
            let device = try Device(group: group)
            try device.put("secret of \(group)", "k")
            #expect(try await device.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token", try await Self.issue(cluster, ["--group", group])]).status == 0)
        }
        // The role: no superuser, no BYPASSRLS, owns nothing; every kvsync table has RLS.
        #expect(try cluster.psql("SELECT rolsuper::text || rolbypassrls::text || rolcanlogin::text FROM pg_roles WHERE rolname = 'kvsync_gateway'")
            .trimmingCharacters(in: .whitespacesAndNewlines) == "falsefalsefalse")
        #expect(try cluster.count("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'kvsync%' AND tableowner = 'kvsync_gateway'") == 0)
        #expect(try cluster.count("SELECT count(*) FROM pg_class WHERE relname IN ('kvsync_groups','kvsync_changes','kvsync_state','kvsync_tokens','kvsync_schema') AND relrowsecurity") == 5)
        let scoped = "BEGIN; SET LOCAL ROLE kvsync_gateway; SET LOCAL kvsync.\"group\" = '\(mine)';\n"
        func asGateway(_ sql: String) throws -> String {
            try cluster.psql(scoped + sql + "\nCOMMIT;")
        }
        // Its own group it sees; the other's, not at all.
        #expect(try asGateway("SELECT count(*) FROM kvsync_state;").contains("1"))
        #expect(try asGateway("SELECT count(*) FROM kvsync_state WHERE group_id = '\(theirs)';").trimmingCharacters(in: .whitespacesAndNewlines) == "0")
        #expect(try asGateway("SELECT count(*) FROM kvsync_changes WHERE group_id <> '\(mine)';").trimmingCharacters(in: .whitespacesAndNewlines) == "0")
        // Updates of the other's rows change nothing; inserts into it fail the policy.
        _ = try asGateway("UPDATE kvsync_state SET value = 'owned'::bytea WHERE group_id = '\(theirs)';")
        #expect(try cluster.count("SELECT count(*) FROM kvsync_state WHERE value = 'owned'::bytea") == 0)
        func refused(_ sql: String, _ reason: String, sourceLocation: SourceLocation = #_sourceLocation) {
            do {
                _ = try asGateway(sql)
                Issue.record("accepted: \(sql)", sourceLocation: sourceLocation)
            } catch {
                #expect("\(error)".contains(reason), "\(error)", sourceLocation: sourceLocation)
            }
        }
        refused("""
            INSERT INTO kvsync_changes (group_id, device, token, kind, name, key, value, hlc, base)
            VALUES ('\(theirs)', 'x', 99, 'collection', 'notes', 'k'::bytea, 'owned'::bytea, 1, 0);
            """, "row-level security")
        refused("DELETE FROM kvsync_changes;", "permission denied")
        refused("SELECT count(*) FROM kvsync_tokens;", "permission denied")
        refused("SELECT * FROM kvsync_push('\(theirs)', 'x', ARRAY[7]::bigint[], ARRAY['collection'], ARRAY['notes'], ARRAY['k'::bytea], ARRAY['owned'::bytea], ARRAY[false], ARRAY[65536]::bigint[], ARRAY[0]::bigint[], 60000);",
                "scoped to another group")
        refused("UPDATE kvsync_schema SET version = 99;", "permission denied")
        // Scoped to a device too (as a gateway's transaction is, from the credential), it pushes as that
        // device only: a second line behind the gateway's own check of a push's device.
        do {
            _ = try cluster.psql(scoped + """
                SET LOCAL kvsync.device = 'alice';
                SELECT * FROM kvsync_push('\(mine)', 'mallory', ARRAY[7]::bigint[], ARRAY['collection'], ARRAY['notes'], ARRAY['k2'::bytea],
                    ARRAY['owned'::bytea], ARRAY[false], ARRAY[65536]::bigint[], ARRAY[0]::bigint[], 60000);
                COMMIT;
                """)
            Issue.record("a push as another device than the scope's was accepted")
        } catch {
            #expect("\(error)".contains("scoped to another device"), "\(error)")
        }
        // Unscoped, it sees nothing at all.
        #expect(try cluster.psql("BEGIN; SET LOCAL ROLE kvsync_gateway; SELECT count(*) FROM kvsync_state; COMMIT;")
            .trimmingCharacters(in: .whitespacesAndNewlines) == "0")
        #expect(try cluster.count("SELECT count(*) FROM kvsync_state WHERE value = 'owned'::bytea") == 0)
        #expect(try cluster.count("SELECT count(*) FROM kvsync_changes") == 2)
    }

    @Test func theProtocolRefusesOtherVersionsAndMalformedRequestsInOneLine() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("protocol")
        let (gateway, url) = try await Self.startGateway(cluster)
        defer { gateway.kill(SIGKILL) }
        let token = try await Self.issue(cluster, ["--group", group])
        let auth = ["Authorization: Bearer \(token)", "KVSync-Group: \(group)"]
        let v2 = try RawHTTP.request(url, "GET /v2/hello", headers: auth)
        #expect(v2.status == 400 && v2.text == "unsupported sync protocol version 2: this gateway speaks version 1\n", "\(v2.text)")
        let hello = try RawHTTP.request(url, "GET /v1/hello", headers: auth)
        #expect(hello.status == 200)
        let decoded = try GatewayHello(decoding: hello.body)
        #expect(decoded.group == group && !decoded.readOnly)
        #expect(try RawHTTP.request(url, "GET /v1/hello", headers: []).status == 401)
        #expect(try RawHTTP.request(url, "GET /v1/hello", headers: ["Authorization: Basic a2V5OnZhbHVl", "KVSync-Group: \(group)"]).status == 401)
        #expect(try RawHTTP.request(url, "GET /v1/hello", headers: ["Authorization: Bearer \(token)"]).status == 400)
        #expect(try RawHTTP.request(url, "GET /v1/changes?after=-1", headers: auth).status == 400)
        #expect(try RawHTTP.request(url, "GET /v1/changes?after=0&limit=100000", headers: auth).status == 400)
        #expect(try RawHTTP.request(url, "GET /v1/nothing", headers: auth).status == 404)
        // A push body cut short, with trailing bytes, or with a count larger than the body.
        for body: [UInt8] in [[0x05, 0x61], [0x01, 0x61, 0x00, 0x00, 0xFF], [0x01, 0x61, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]] {
            let answer = try RawHTTP.request(url, "POST /v1/push", headers: auth, body: body)
            #expect(answer.status == 400 && answer.text.hasPrefix("the push is malformed: ") && answer.text.split(separator: "\n").count == 1,
                    "\(answer.text)")
        }
        // An empty batch is answered with no outcomes (not a database error).
        let empty = try RawHTTP.request(url, "POST /v1/push", headers: auth,
                                        body: GatewayPushRequest(device: "", maxClockSkewMilliseconds: 60_000, changes: []).encoded())
        #expect(empty.status == 200, "\(empty.text)")
        guard case .outcomes(let none) = try GatewayPushResponse(decoding: empty.body, maxValueBytes: 1 << 20) else {
            Issue.record("an empty push was not answered with outcomes")
            return
        }
        #expect(none.isEmpty)
        #expect(try await offPool { try cluster.count("SELECT count(*) FROM kvsync_changes") } == 0)
    }

    @Test func aClientThatTricklesItsRequestHeadIsCutOffAtTheDeadline() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        var options = SyncGateway.Options()
        options.limits.requestTimeout = .seconds(1)
        let gateway = try SyncGateway(database: try await cluster.prepareForGateways(), options: options)
        let url = Locked<String?>(nil)
        let running = Task { try await gateway.run(host: "127.0.0.1", port: 0) { bound in url.withLock { $0 = bound } } }
        #expect(await eventuallyAsync(30) { url.withLock { $0 } != nil })
        let address = try #require(url.withLock { $0 })
        let started = ContinuousClock.now
        // One header byte every 200 ms: without a deadline on the head, this would hold the slot for good.
        let closedAfter = try await offPool {
            try RawHTTP.trickle(address, bytes: Array("GET /v1/hello HTTP/1.1\r\nHost: x\r\nX-Slow: ".utf8) + Array(repeating: 0x61, count: 200),
                                every: .milliseconds(200))
        }
        // Without the deadline the trickle lasts 40 s; with it, 1 s plus what a loaded two-core
        // machine adds (5.6 s once in CI beside the other suites).
        #expect(closedAfter < .seconds(BuildScale.seconds(10)), "\(closedAfter)")
        #expect(ContinuousClock.now - started < .seconds(BuildScale.seconds(20)))
        gateway.shutdown()
        try await running.value
    }

    /// A device's requests share kept-alive connections (over TLS, one handshake for many requests); one
    /// the gateway closed while it was idle is noticed, and the request goes on a new one.
    @Test(arguments: [false, true])
    func requestsReuseKeptAliveConnectionsAndOutliveTheGatewayClosingThem(tls: Bool) async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("keep-alive-\(tls)")
        let pki = try await offPool { try TestPKI() }
        var options = SyncGateway.Options()
        // Connections idle for three seconds are closed by the gateway (two were once too short for a new
        // connection's TLS handshake and request head under the thread sanitizer on a loaded machine; the
        // device tries such a request on up to three new connections).
        options.limits.requestTimeout = .seconds(3)
        if tls {
            options.tlsCertificate = pki.serverCertificate
            options.tlsKey = pki.serverKey
        }
        let gateway = try SyncGateway(database: try await cluster.prepareForGateways(), options: options)
        let bound = Locked<String?>(nil)
        let running = Task { try await gateway.run(host: "127.0.0.1", port: 0) { url in bound.withLock { $0 = url } } }
        #expect(await eventuallyAsync(30) { bound.withLock { $0 } != nil })
        let url = try #require(bound.withLock { $0 })
        #expect(url.hasPrefix(tls ? "https://" : "http://"))
        let token = try await Self.issue(cluster, ["--group", group])
        let connection = try GatewayConnection(url: SyncGatewayURL(url, caFile: tls ? pki.caCertificate : nil), token: token, group: group,
                                               maxValueBytes: 1 << 20, operationTimeout: .seconds(30), connectTimeout: .seconds(10),
                                               idleLifetime: .seconds(120))
        for _ in 0..<20 {
            #expect(try await connection.hello().group == group)
        }
        // Reused, not one each. (How many exactly depends on timing: on a loaded machine the gateway's
        // 2 s deadline can pass between two requests, and the next goes on a new connection.)
        let afterHellos = connection.connectionsOpened
        #expect((1..<10).contains(afterHellos), "\(afterHellos)")
        // Pushes and pages, two at once: at most two connections more.
        let changes = (0..<50).map { OutgoingChange(kind: "kv", name: "main", key: Array("k\($0)".utf8), value: [1, 2, 3],
                                                    clock: 1 << 16, base: 0, token: UInt64($0 + 1)) }
        async let first = connection.push(group: group, device: "d", changes: Array(changes[..<25]), maxClockSkew: .seconds(60))
        async let second = connection.push(group: group, device: "d", changes: Array(changes[25...]), maxClockSkew: .seconds(60))
        let outcomes = try await first + second
        #expect(outcomes.count == 50)
        #expect(try await connection.changes(group: group, after: 0, limit: 1_000).changes.count == 50)
        #expect(connection.connectionsOpened - afterHellos < 10, "\(connection.connectionsOpened)")
        let before = connection.connectionsOpened
        // The gateway closes the idle connections (this end keeps them for 120 s); the next request finds
        // them closed and opens one (up to three if the gateway's deadline passed on the new ones too, on
        // a loaded machine: never more).
        #expect(connection.idleConnections >= 1)
        #expect(await eventuallyAsync(60) { connection.idleConnectionsStillOpen == 0 })
        #expect(try await connection.hello().group == group)
        #expect((before + 1...before + GatewayConnection.newConnectionAttempts).contains(connection.connectionsOpened),
                "\(before) then \(connection.connectionsOpened)")
        await connection.close()
        // A device between syncs lets its idle connections go after 5 s, whatever the gateway's limit.
        let between = try GatewayConnection(url: SyncGatewayURL(url, caFile: tls ? pki.caCertificate : nil), token: token, group: group,
                                            maxValueBytes: 1 << 20, operationTimeout: .seconds(30), connectTimeout: .seconds(10))
        #expect(try await between.hello().group == group)
        #expect(between.idleConnections == 1)
        #expect(await eventuallyAsync(30) { between.idleConnections == 0 })
        await between.close()
        await #expect(throws: ReplicationError.self) { try await connection.hello() }
        gateway.shutdown()
        try await running.value
    }

    /// A socket listening on a free port of 127.0.0.1, for a fake gateway: its descriptor and port.
    static func listeningSocket() throws -> (fd: Int32, port: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard fd >= 0, bound, listen(fd, 16) == 0 else {
            if fd >= 0 { close(fd) }
            throw POSIXError(.EADDRNOTAVAIL)
        }
        return (fd, UInt16(bigEndian: address.sin_port))
    }

    /// A gateway that answers once on a kept-alive connection, then never again (a network that starts
    /// dropping packets silently): the next request fails at its deadline, and it is not sent again on
    /// a new connection behind the caller's back.
    @Test func aRequestNoGatewayAnswersFailsAtItsDeadlineAndIsNotSentAgain() async throws {
        let (fd, port) = try Self.listeningSocket()
        defer { close(fd) }
        // One connection accepted; its first request answered (kept alive), nothing after. Any other
        // connection waits in the backlog, unanswered.
        let server = Thread {
            let client = accept(fd, nil, nil)
            guard client >= 0 else { return }
            defer { close(client) }
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            var answered = false
            while true {
                let count = recv(client, &buffer, buffer.count, 0)
                guard count > 0 else { return }
                received += buffer[..<count]
                if !answered, received.count >= 4, String(decoding: received, as: UTF8.self).contains("\r\n\r\n") {
                    let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)
                    _ = answer.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    answered = true
                }
            }
        }
        server.start()
        let url = try SyncGatewayURL("http://127.0.0.1:\(port)")
        let connection = try GatewayConnection(url: url, token: SyncTokens.prefix + String(repeating: "A", count: 43), group: Self.group("silent"),
                                               maxValueBytes: 1 << 20, operationTimeout: .seconds(1), connectTimeout: .seconds(5))
        #expect(try await connection.request(.hello) == Array("ok".utf8))
        #expect(connection.idleConnections == 1)
        let started = ContinuousClock.now
        await #expect {
            _ = try await connection.request(.hello)
        } throws: { error in
            "\(error)".contains("no answer from the sync gateway within")
        }
        #expect(ContinuousClock.now - started < .seconds(BuildScale.seconds(10)))
        // Long enough for a request sent again to have connected.
        try await Task.sleep(for: .seconds(2))
        #expect(connection.connectionsOpened == 1)
        #expect(connection.idleConnections == 0)
    }

    /// A gateway that closes a new connection before answering (its deadline for a request head
    /// passed while the device's machine was busy, or it restarted): the request goes again on another
    /// connection, on three at most.
    @Test(arguments: [1, 2, 3])
    func aNewConnectionClosedBeforeItsAnswerIsReplacedTwiceAtMost(closedFirst: Int) async throws {
        let (fd, port) = try Self.listeningSocket()
        defer { close(fd) }
        // The first `closedFirst` connections are closed once the request head has come; the next one
        // is answered.
        let accepted = Locked(0)
        let server = Thread {
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            while true {
                let client = accept(fd, nil, nil)
                guard client >= 0 else { return }
                let number = accepted.withLock { $0 += 1; return $0 }
                setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                var received: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 4096)
                while !String(decoding: received, as: UTF8.self).contains("\r\n\r\n") {
                    let count = recv(client, &buffer, buffer.count, 0)
                    guard count > 0 else { break }
                    received += buffer[..<count]
                }
                if number > closedFirst {
                    let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)
                    _ = answer.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    Thread.sleep(forTimeInterval: 0.5)
                }
                close(client)
                if number > closedFirst { return }
            }
        }
        server.start()
        let url = try SyncGatewayURL("http://127.0.0.1:\(port)")
        let connection = try GatewayConnection(url: url, token: SyncTokens.prefix + String(repeating: "A", count: 43), group: Self.group("closing"),
                                               maxValueBytes: 1 << 20, operationTimeout: .seconds(10), connectTimeout: .seconds(5))
        if closedFirst < GatewayConnection.newConnectionAttempts {
            #expect(try await connection.request(.hello) == Array("ok".utf8))
            #expect(connection.connectionsOpened == closedFirst + 1)
        } else {
            // Three in a row: the request fails, after three connections, not four.
            await #expect(throws: ReplicationError.self) { try await connection.request(.hello) }
            #expect(connection.connectionsOpened == 3)
        }
        await connection.close()
        shutdown(fd, Int32(SHUT_RDWR))
    }

    @Test func kill9OfTheGatewayMidPushThenExactlyOnceAfterTheRestart() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("kill")
        let port = try LocalPostgresCluster.freePort()
        var (gateway, url) = try await Self.startGateway(cluster, port: port)
        let token = try await Self.issue(cluster, ["--group", group])
        let tokenB = try await Self.issue(cluster, ["--group", group])
        let a = try Device(group: group), b = try Device(group: group)
        let count = 6_000
        try a.write { tx in
            for index in 0..<count { try a.notes.put(String(repeating: "v", count: 500) + "\(index)", forKey: String(format: "k%05d", index), in: tx) }
        }
        let push = try a.kvtoolInBackground(["sync", "run", "--once", "--server", url, "--token", token, "--batch-size", "200"])
        // Kill the gateway once some, not all, of the batches are in.
        #expect(await eventuallyAsync(60) { ((try? cluster.count("SELECT count(*) FROM kvsync_changes")) ?? 0) > 0 })
        gateway.kill(SIGKILL)
        _ = try await offPool { [gateway] in gateway.wait(timeout: 10) }
        let interrupted = try await offPool { push.wait(timeout: 120) }
        let before = try cluster.count("SELECT count(*) FROM kvsync_changes")
        print("[gateway] kill -9 mid-push: \(before) of \(count) changes in, the device exited \(interrupted.status)")
        (gateway, url) = try await Self.startGateway(cluster, port: port)
        defer { gateway.kill(SIGKILL) }
        for (device, credential) in [(a, token), (b, tokenB), (a, token), (b, tokenB)] {
            let result = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token", credential])
            #expect(result.status == 0, "\(result.stderr)")
        }
        // Each change once in the log, each key once in B.
        #expect(try cluster.count("SELECT count(*) FROM kvsync_changes") == count)
        #expect(try cluster.count("SELECT count(*) FROM (SELECT key FROM kvsync_changes GROUP BY key HAVING count(*) > 1) d") == 0)
        #expect(try b.notes.count() == count)
        #expect(try b.storedNotes() == a.storedNotes())
        #expect(try a.status().pendingChanges == 0)
        let pulled = try b.history.changes(since: .zero, matching: HistoryFilter(targets: [.collection("notes")]))
        #expect(pulled.transactions?.flatMap(\.entries).count == count)
    }

    @Test func sigtermDrainsTheGatewayAndItExitsCleanly() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("drain")
        let (gateway, url) = try await Self.startGateway(cluster)
        let token = try await Self.issue(cluster, ["--group", group])
        let a = try Device(group: group)
        try a.put("v", "k")
        #expect(try await a.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token", token]).status == 0)
        gateway.kill(SIGTERM)
        let ended = try await offPool { gateway.wait(timeout: 30) }
        #expect(!gateway.timedOut)
        #expect(ended.status == 0, "\(ended.stderr)")
        #expect(ended.lines.last == "gateway drained and stopped", "\(ended.lines)")
        // Gone: a device's next round fails in one line, and its change is not lost.
        try a.put("w", "k2")
        let after = try await a.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token", token])
        #expect(after.status == 74 && after.stderr.contains("cannot connect to the sync gateway"), "\(after.stderr)")
        #expect(try a.status().pendingChanges == 1)
    }

    @Test func tlsWithAPrivateCAAndAnUntrustedCertificateRefused() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("tls")
        let pki = try await offPool { try TestPKI() }
        let (gateway, url) = try await Self.startGateway(cluster, extra: ["--tls-certificate", pki.serverCertificate, "--tls-key", pki.serverKey])
        defer { gateway.kill(SIGKILL) }
        #expect(url.hasPrefix("https://127.0.0.1:"), "\(url)")
        let token = try await Self.issue(cluster, ["--group", group])
        let a = try Device(group: group)
        try a.put("over tls", "k")
        // Trusted through --ca-file.
        let trusted = try await a.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token", token, "--ca-file", pki.caCertificate])
        #expect(trusted.status == 0, "\(trusted.stderr)")
        #expect(try cluster.storedNotes(group: group).count == 1)
        // Not by the system's roots, nor by another CA: refused, and nothing sent in the clear.
        try a.put("again", "k2")
        let system = try await a.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token", token])
        #expect(system.status == 74 && system.stderr.lowercased().contains("certificate"), "\(system.stderr)")
        let wrongCA = try await a.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token", token, "--ca-file", pki.otherCACertificate])
        #expect(wrongCA.status == 74 && wrongCA.stderr.lowercased().contains("certificate"), "\(wrongCA.stderr)")
        // No plaintext fallback: http:// to the TLS port gets no answer it can use.
        let plain = try await a.kvtoolOffPool(["sync", "run", "--once", "--server", url.replacingOccurrences(of: "https://", with: "http://"), "--token", token])
        #expect(plain.status == 74, "\(plain.stderr)")
        #expect(try cluster.storedNotes(group: group).count == 1)
        #expect(try a.status().pendingChanges == 1)
    }
}

extension GatewayTests {
    /// A JWT of `header` and `claims` (JSON text), signed by `sign` over its first two parts.
    static func jwt(_ header: String, _ claims: String, sign: ([UInt8]) throws -> [UInt8]) rethrows -> String {
        let input = base64URL(Array(header.utf8)) + "." + base64URL(Array(claims.utf8))
        return input + "." + base64URL(try sign(Array(input.utf8)))
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    @Test func jwtsSignedByTheAppsBackendAreAcceptedAndForgedOnesRefused() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("jwt")
        let keys = TemporaryDirectory()
        let secret = Array("a shared secret of at least thirty-two bytes".utf8)
        try writeSecretFile(keys.path + "/secret", secret)
        let signing = P256.Signing.PrivateKey()
        try signing.publicKey.pemRepresentation.write(toFile: keys.path + "/public.pem", atomically: true, encoding: .utf8)
        let (gateway, url) = try await Self.startGateway(cluster, extra: ["--jwt-hs256-secret-file", keys.path + "/secret",
                                                                    "--jwt-es256-public-key", keys.path + "/public.pem"])
        defer { gateway.kill(SIGKILL) }
        let hour = Int(Date().timeIntervalSince1970) + 3600
        func hs256(_ claims: String, key: [UInt8] = secret, alg: String = "HS256") -> String {
            Self.jwt("{\"alg\":\"\(alg)\",\"typ\":\"JWT\"}", claims) { Array(HMAC<Crypto.SHA256>.authenticationCode(for: $0, using: SymmetricKey(data: key))) }
        }
        func es256(_ claims: String) throws -> String {
            try Self.jwt("{\"alg\":\"ES256\",\"typ\":\"JWT\"}", claims) { Array(try signing.signature(for: $0).rawRepresentation) }
        }
        let a = try Device(group: group), b = try Device(group: group)
        try a.put("signed by the backend", "k")
        // HS256 from one device, ES256 from another: both sync.
        let viaHS = try await a.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token",
                                  hs256("{\"group\":\"\(group)\",\"sub\":\"user-1\",\"exp\":\(hour)}")])
        #expect(viaHS.status == 0, "\(viaHS.stderr)")
        let viaES = try await b.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token",
                                  try es256("{\"group\":\"\(group)\",\"device\":\"tablet\",\"exp\":\(hour)}")])
        #expect(viaES.status == 0, "\(viaES.stderr)")
        #expect(try b.notes.get("k") == "signed by the backend")

        func expectRefused(_ token: String, _ reason: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
            try a.put("attempt", "refused-\(reason.count)")
            let result = try await a.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token", token])
            #expect(result.status == 77 && result.stderr.contains(reason), "\(result.stderr)", sourceLocation: sourceLocation)
            #expect(result.stderr.split(separator: "\n").count == 1 && !result.stderr.contains(token), sourceLocation: sourceLocation)
        }
        let claims = "{\"group\":\"\(group)\",\"exp\":\(hour)}"
        // A bad signature: another secret, or the claims changed after signing.
        try await expectRefused(hs256(claims, key: Array("another secret, also thirty-two bytes long".utf8)), "bad signature")
        let genuine = try es256(claims).split(separator: ".")
        try await expectRefused([genuine[0], Substring(Self.base64URL(Array("{\"group\":\"\(Self.group("other"))\",\"exp\":\(hour)}".utf8))), genuine[2]]
            .joined(separator: "."), "bad signature")
        // alg none, with an empty signature.
        try await expectRefused(Self.base64URL(Array("{\"alg\":\"none\"}".utf8)) + "." + Self.base64URL(Array(claims.utf8)) + ".",
                          "signed with none")
        // Expired, and not valid yet.
        try await expectRefused(hs256("{\"group\":\"\(group)\",\"exp\":\(hour - 7200)}"), "has expired")
        try await expectRefused(hs256("{\"group\":\"\(group)\",\"exp\":\(hour),\"nbf\":\(hour - 60)}"), "not valid yet")
        // No exp, no group, another group.
        try await expectRefused(hs256("{\"group\":\"\(group)\"}"), "no exp claim")
        try await expectRefused(hs256("{\"exp\":\(hour)}"), "no group claim")
        try await expectRefused(hs256("{\"group\":\"\(Self.group("other"))\",\"exp\":\(hour)}"), "for another group")
        // A read-only claim pulls only.
        try a.put("not sent", "read-only-write")
        let readOnly = try await a.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token",
                                     hs256("{\"group\":\"\(group)\",\"exp\":\(hour),\"read_only\":true}")])
        #expect(readOnly.status == 0 && readOnly.stdout.contains("pushed 0"), "\(readOnly.stdout)\(readOnly.stderr)")
        #expect(try cluster.count("SELECT count(*) FROM kvsync_changes") == 1)
    }

    /// A gateway given only an ES256 public key refuses an HS256 token whose HMAC secret is that public
    /// key: the algorithm confusion of libraries that let the token choose.
    @Test func hs256SignedWithTheES256PublicKeyIsRefused() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("confusion")
        let keys = TemporaryDirectory()
        let signing = P256.Signing.PrivateKey()
        let pem = signing.publicKey.pemRepresentation
        try pem.write(toFile: keys.path + "/public.pem", atomically: true, encoding: .utf8)
        let (gateway, url) = try await Self.startGateway(cluster, extra: ["--jwt-es256-public-key", keys.path + "/public.pem"])
        defer { gateway.kill(SIGKILL) }
        let hour = Int(Date().timeIntervalSince1970) + 3600
        let forged = Self.jwt("{\"alg\":\"HS256\"}", "{\"group\":\"\(group)\",\"exp\":\(hour)}") {
            Array(HMAC<Crypto.SHA256>.authenticationCode(for: $0, using: SymmetricKey(data: Array(pem.utf8))))
        }
        let device = try Device(group: group)
        try device.put("forged", "k")
        let result = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token", forged])
        #expect(result.status == 77 && result.stderr.contains("signed with HS256, which this gateway does not accept"), "\(result.stderr)")
        #expect(try cluster.count("SELECT count(*) FROM kvsync_changes") == 0)
        // And a gateway without JWT keys takes none at all.
        let (plain, plainURL) = try await Self.startGateway(cluster)
        defer { plain.kill(SIGKILL) }
        let none = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", plainURL, "--token", forged])
        #expect(none.status == 77 && none.stderr.contains("not a sync token"), "\(none.stderr)")
    }
}
#endif
