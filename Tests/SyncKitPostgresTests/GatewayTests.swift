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

    @Test func devicesOfOneGroupConvergeThroughAGatewayWithTheirOwnTokens() async throws {
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

extension GatewayTests {
    /// Follows `/v1/live` as a device of `group` with `token` in a task of its own; counts the wake-ups.
    final class LiveFollower: @unchecked Sendable {
        let wakeups = Locked(0)
        var task: Task<(any Error)?, Never>!

        init(_ url: String, token: String, group: String) throws {
            let connection = try GatewayConnection(url: SyncGatewayURL(url), token: token, group: group, maxValueBytes: 1 << 20,
                                                   operationTimeout: .seconds(30), connectTimeout: .seconds(10))
            task = Task { [wakeups] in
                do {
                    try await connection.live { wakeups.withLock { $0 += 1 } }
                    return nil
                } catch {
                    return error
                }
            }
        }

        var count: Int { wakeups.withLock { $0 } }
    }

    /// Two gateways on one database: a device live on one sees the commits a device of its group makes
    /// through the other, and not those of another group.
    @Test func twoGatewaysOnOneDatabaseFanOutCommitsToTheirGroupsLiveDevices() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("live"), other = Self.group("live-other")
        let (first, firstURL) = try await Self.startGateway(cluster)
        defer { first.kill(SIGKILL) }
        let (second, secondURL) = try await Self.startGateway(cluster)
        defer { second.kill(SIGKILL) }
        let token = try await Self.issue(cluster, ["--group", group])
        let otherToken = try await Self.issue(cluster, ["--group", other])
        let follower = try LiveFollower(firstURL, token: token, group: group)
        // The stream opened (its hello wakes the device once).
        #expect(await eventuallyAsync(30) { follower.count == 1 })
        let writer = try Device(group: other)
        try writer.put("another group's", "k")
        #expect(try await writer.kvtoolOffPool(["sync", "run", "--once", "--server", secondURL, "--token", otherToken]).status == 0)
        try await Task.sleep(for: .milliseconds(500))
        #expect(follower.count == 1, "another group's commit woke this group's device")
        let mine = try Device(group: group)
        try mine.put("through the second gateway", "k")
        let started = ContinuousClock.now
        #expect(try await mine.kvtoolOffPool(["sync", "run", "--once", "--server", secondURL, "--token", token]).status == 0)
        #expect(await eventuallyAsync(30) { follower.count == 2 })
        print("[gateway] a commit through the second gateway reached the first one's live device \(ContinuousClock.now - started) after the pushing process started")

        // A replicator that stays live through a gateway is woken by the stream, not by its poll.
        let reader = try Device(group: group)
        var options = Replicator.Options()
        options.pollInterval = .seconds(600)
        let replicator = try Replicator(container: reader.container, gateway: SyncGatewayURL(firstURL),
                                        token: try await Self.issue(cluster, ["--group", group]), targets: reader.targets, options: options)
        let live = Task { try await replicator.run(until: ContinuousClock.now + .seconds(60)) }
        #expect(await eventuallyAsync(30) { (try? reader.notes.get("k")) == "through the second gateway" })
        try mine.put("later", "k")
        #expect(try await mine.kvtoolOffPool(["sync", "run", "--once", "--server", secondURL, "--token", token]).status == 0)
        #expect(await eventuallyAsync(30) { (try? reader.notes.get("k")) == "later" })
        live.cancel()
        _ = try? await live.value
        follower.task.cancel()
    }

    @Test func aRevokedCredentialsLiveStreamClosesWithinFiveSeconds() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("revoke-live")
        let (gateway, url) = try await Self.startGateway(cluster)
        defer { gateway.kill(SIGKILL) }
        let token = try await Self.issue(cluster, ["--group", group, "--device", "stolen"])
        let follower = try LiveFollower(url, token: token, group: group)
        #expect(await eventuallyAsync(30) { follower.count == 1 })
        let revoked = ContinuousClock.now
        #expect(try await SyncTokens.revoke(on: cluster.tcpURL, device: "stolen", group: group) == 1)
        let ended = try #require(await outcome(of: follower.task, within: BuildScale.seconds(30)), "the revoked credential's stream stayed open")
        let took = ContinuousClock.now - revoked
        // Within 5 s (scaled under a sanitizer, whose build is several times slower).
        #expect(took < .seconds(BuildScale.seconds(5)), "\(took)")
        #expect(ended as? ReplicationError == .credentialRefused("the credential was revoked"), "\(String(describing: ended))")
        print("[gateway] a revoked credential's live stream closed \(took) after the revocation")
        // And it cannot open another.
        let again = try LiveFollower(url, token: token, group: group)
        let refused = try #require(await outcome(of: again.task, within: BuildScale.seconds(30)), "a revoked credential opened a stream")
        #expect(refused as? ReplicationError == .credentialRefused("the credential was revoked"), "\(String(describing: refused))")
    }

    @Test func sigtermClosesLiveStreamsCleanlyAndTheGatewayExits() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("drain-live")
        let (gateway, url) = try await Self.startGateway(cluster)
        let token = try await Self.issue(cluster, ["--group", group])
        let followers = try (0..<3).map { _ in try LiveFollower(url, token: token, group: group) }
        #expect(await eventuallyAsync(30) { followers.allSatisfy { $0.count == 1 } })
        gateway.kill(SIGTERM)
        for follower in followers {
            let ended = try #require(await outcome(of: follower.task, within: BuildScale.seconds(30)), "a stream outlived the drain")
            #expect(ended == nil, "a stream ended with \(String(describing: ended)) instead of closing cleanly")
        }
        let exited = try await offPool { gateway.wait(timeout: 30) }
        #expect(!gateway.timedOut && exited.status == 0, "\(exited.stderr)")
    }
}

extension GatewayTests {
    /// The direct path for trusted machines, over TLS: `sslmode=verify-full` with the server's CA, or
    /// `require`; the server here accepts TCP connections over TLS only (`hostssl`).
    @Test func directURLsWithSslmodeUseTLSAndVerifyFullChecksTheCertificate() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let pki = try await offPool { try TestPKI() }
        try cluster.stop()
        let data = cluster.dataDirectory
        for (from, to) in [(pki.serverCertificate, "server.crt"), (pki.serverKey, "server.key")] {
            try? FileManager.default.removeItem(atPath: data + "/" + to)
            try FileManager.default.copyItem(atPath: from, toPath: data + "/" + to)
            chmod(data + "/" + to, 0o600)
            if geteuid() == 0, let user = getpwnam("postgres") { chown(data + "/" + to, user.pointee.pw_uid, user.pointee.pw_gid) }
        }
        let hba = try String(contentsOfFile: data + "/pg_hba.conf", encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix("host ") ? "hostssl " + $0.dropFirst(5) : String($0) }.joined(separator: "\n")
        try hba.write(toFile: data + "/pg_hba.conf", atomically: false, encoding: .utf8)
        cluster.serverOptions = ["-c ssl=on"]
        try cluster.start()
        let group = Self.group("direct-tls")
        let device = try Device(group: group)
        try device.put("over tls", "k")
        let base = "postgres://kv@127.0.0.1:\(cluster.port)/kv"
        let verified = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", base + "?sslmode=verify-full&sslrootcert=\(pki.caCertificate)"])
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(try cluster.storedNotes(group: group).count == 1)
        try device.put("again", "k2")
        let required = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", base + "?sslmode=require"])
        #expect(required.status == 0, "\(required.stderr)")
        // In the clear, the server refuses (hostssl only); against another CA or the system's roots, the
        // device refuses the server.
        try device.put("not sent", "k3")
        let plain = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", base])
        #expect(plain.status == 74 && plain.stderr.contains("no encryption"), "\(plain.stderr)")
        let wrongCA = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", base + "?sslmode=verify-full&sslrootcert=\(pki.otherCACertificate)"])
        #expect(wrongCA.status == 74 && wrongCA.stderr.lowercased().contains("certificate"), "\(wrongCA.stderr)")
        let system = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", base + "?sslmode=verify-full"])
        #expect(system.status == 74 && system.stderr.lowercased().contains("certificate"), "\(system.stderr)")
        #expect(try cluster.storedNotes(group: group).count == 2)
        // The gateway reaches its database over TLS the same way, as its own login.
        try await SyncServerSetup.prepare(on: try ServerURL(base + "?sslmode=require"), gatewayLogin: LocalPostgresCluster.gatewayLogin)
        let gatewayLogin = "postgres://\(LocalPostgresCluster.gatewayLogin)@127.0.0.1:\(cluster.port)/kv"
        let gateway = try BackgroundProcess(productsDirectory() + "/kvtool", [
            "sync", "gateway", "--database", gatewayLogin + "?sslmode=verify-full&sslrootcert=\(pki.caCertificate)", "--listen", "127.0.0.1:0",
            "--metrics-listen", "127.0.0.1:0"])
        defer { gateway.kill(SIGKILL) }
        let line = try #require(try await offPool { gateway.waitForLine(timeout: 60) { GatewayReadyLine($0) != nil } }.flatMap(GatewayReadyLine.init))
        let token = try await kvtoolRun(["sync", "token", "issue", "--database", base + "?sslmode=require", "--group", group])
        #expect(token.status == 0, "\(token.stderr)")
        let through = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", line.url,
                                         "--token", token.stdout.trimmingCharacters(in: .newlines)])
        #expect(through.status == 0, "\(through.stderr)")
        #expect(try cluster.storedNotes(group: group).count == 3)
    }
}

extension GatewayTests {
    /// What one client can make the gateway hold is bounded: connections, bodies (each, and all
    /// together), and live streams per credential.
    @Test func connectionsBodiesAndStreamsPerCredentialAreCapped() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("caps")
        let token = try await SyncTokens.issue(on: cluster.tcpURL, group: group).token
        var options = SyncGateway.Options()
        options.limits.maxConnections = 3
        options.limits.maxBodyBytes = 4_096
        options.limits.maxBufferedBytes = 2_048
        options.limits.maxStreamsPerCredential = 2
        let gateway = try SyncGateway(database: try await cluster.prepareForGateways(), options: options)
        let bound = Locked<String?>(nil)
        let running = Task { try await gateway.run(host: "127.0.0.1", port: 0) { url in bound.withLock { $0 = url } } }
        #expect(await eventuallyAsync(30) { bound.withLock { $0 } != nil })
        let url = try #require(bound.withLock { $0 })
        let auth = ["Authorization: Bearer \(token)", "KVSync-Group: \(group)"]
        // A body over the per-request limit, and one under it but over what all bodies may hold.
        let huge = try RawHTTP.request(url, "POST /v1/push", headers: auth, body: [UInt8](repeating: 0, count: 5_000))
        #expect(huge.status == 413 && huge.text.contains("over 4096 bytes"), "\(huge.text)")
        let busy = try RawHTTP.request(url, "POST /v1/push", headers: auth, body: [UInt8](repeating: 0, count: 3_000))
        #expect(busy.status == 503 && busy.text.contains("busy"), "\(busy.text)")
        // Two live streams for the credential; a third is refused (429), and the two still work.
        let followers = try (0..<2).map { _ in try LiveFollower(url, token: token, group: group) }
        #expect(await eventuallyAsync(30) { followers.allSatisfy { $0.count == 1 } })
        let third = try LiveFollower(url, token: token, group: group)
        let refused = try #require(await outcome(of: third.task, within: BuildScale.seconds(30)), "a third stream was accepted")
        // 429 with Retry-After 15, read through the one mapping of a gateway's status (as a request's is).
        #expect({ if case .rateLimited(.seconds(15), let budget?)? = refused as? ReplicationError { budget.hasPrefix("too many live streams for this credential") } else { false } }(),
                    "\(String(describing: refused))")
        // Three connections open (the two streams and one idle): a fourth is refused before its body.
        // An idle connection the gateway accepted while the refused follower's was still open (its close
        // reaches the gateway a little later, and on a loaded machine later still) was itself refused
        // for good, and the count drops to two once that close arrives: so while a request is still
        // admitted, the idle connection is opened anew.
        let idle = Locked<Int32>(try RawHTTP.connect(url))
        defer { close(idle.withLock { $0 }) }
        let over = Locked<RawHTTP.Answer?>(nil)
        #expect(await eventuallyAsync(30) {
            let answer = try? RawHTTP.request(url, "GET /v1/hello", headers: auth)
            over.withLock { $0 = answer }
            if answer?.status == 503 { return true }
            if let fresh = try? RawHTTP.connect(url) { idle.withLock { close($0); $0 = fresh } }
            try? await Task.sleep(for: .milliseconds(100))   // (under the credential's rate limit)
            return false
        })
        let refusal = over.withLock { $0 }
        #expect(refusal?.status == 503 && refusal?.text.contains("too many connections (3)") == true, "\(refusal?.text ?? "no answer")")
        gateway.shutdown()
        for follower in followers { _ = await follower.task.value }
        try await running.value
    }
}

extension GatewayTests {
    /// Past the gateway's cap on live streams (``SyncGateway/Limits/maxStreams``, `--max-streams`),
    /// another device's stream is refused with 503 and one line, before it is subscribed; the stream
    /// open goes on carrying its group's commits, and ends with the drain.
    @Test func liveStreamsPastTheGatewaysCapAreRefusedAndTheOpenOnesGoOn() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("stream-cap")
        let token = try await SyncTokens.issue(on: cluster.tcpURL, group: group, device: "first").token
        let other = try await SyncTokens.issue(on: cluster.tcpURL, group: group, device: "second").token
        var options = SyncGateway.Options()
        options.limits.maxStreams = 1
        let gateway = try SyncGateway(database: try await cluster.prepareForGateways(), options: options)
        let bound = Locked<String?>(nil)
        let running = Task { try await gateway.run(host: "127.0.0.1", port: 0) { url in bound.withLock { $0 = url } } }
        #expect(await eventuallyAsync(30) { bound.withLock { $0 } != nil })
        let url = try #require(bound.withLock { $0 })
        let follower = try LiveFollower(url, token: token, group: group)
        #expect(await eventuallyAsync(30) { follower.count == 1 })
        let refused = try await offPool {
            try RawHTTP.request(url, "GET /v1/live", headers: ["Authorization: Bearer \(other)", "KVSync-Group: \(group)"])
        }
        #expect(refused.status == 503 && refused.text.contains("too many live streams (1)"), "\(refused.text)")
        // A commit's notification still reaches the open stream.
        _ = try await offPool { try cluster.psql("NOTIFY kvsync, '\(group)'") }
        #expect(await eventuallyAsync(30) { follower.count >= 2 })
        gateway.shutdown()
        _ = await follower.task.value
        try await running.value
    }
}

extension GatewayTests {
    /// A push of many small batches, two in flight (through a gateway on connections of their own, so
    /// the server may apply them in either order), with conflicts spread among them: each change is in
    /// the log once, the later write of each conflicting key wins everywhere, and nothing stays pending.
    @Test(arguments: ["direct", "gateway"]) func aPipelinedPushWithConflictsAmongItsBatchesIsAppliedOnce(path: String) async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("pipelined-\(path)")
        let a = try Device(group: group), b = try Device(group: group)
        try b.write { tx in for index in 0..<10 { try b.notes.put("b early", forKey: "c\(index)", in: tx) } }
        usleep(5_000)
        // A's 1,000 keys, with the 20 contested ones spread through them (one every 50 keys).
        try a.write { tx in
            for index in 0..<1_000 {
                try a.notes.put("a\(index)", forKey: String(format: "k%04d", index), in: tx)
                if index % 50 == 25 { try a.notes.put("a", forKey: "c\(index / 50)", in: tx) }
            }
        }
        usleep(5_000)
        try b.write { tx in for index in 10..<20 { try b.notes.put("b late", forKey: "c\(index)", in: tx) } }
        var options = Replicator.Options()
        options.batchSize = 37
        let ra: Replicator, rb: Replicator
        var gateway: BackgroundProcess?
        if path == "gateway" {
            let (process, url) = try await Self.startGateway(cluster)
            gateway = process
            ra = try Replicator(container: a.container, gateway: SyncGatewayURL(url), token: try await Self.issue(cluster, ["--group", group]),
                                targets: a.targets, options: options)
            rb = try Replicator(container: b.container, gateway: SyncGatewayURL(url), token: try await Self.issue(cluster, ["--group", group]),
                                targets: b.targets)
        } else {
            ra = try a.replicator(cluster.tcpURL, options: options)
            rb = try b.replicator(cluster.tcpURL)
        }
        defer { gateway?.kill(SIGKILL) }
        try await rb.sync()
        let pushed = try await ra.push()
        #expect(pushed.conflicts == 20, "\(pushed)")
        try await ra.sync()
        try await rb.sync()
        for index in 0..<20 { #expect(try a.notes.get("c\(index)") == (index < 10 ? "a" : "b late"), "c\(index)") }
        #expect(try a.notes.count() == 1_020)
        #expect(try a.storedNotes() == b.storedNotes())
        // (psql off the cooperative pool, as every blocking step here.)
        let device = ra.device
        let (serverNotes, twice, fromA) = try await offPool {
            (try cluster.storedNotes(group: group),
             try cluster.count("""
                SELECT count(*) FROM (SELECT device, token FROM kvsync_changes WHERE group_id = '\(group)'
                                      GROUP BY device, token HAVING count(*) > 1) AS twice
                """),
             try cluster.count("SELECT count(*) FROM kvsync_changes WHERE group_id = '\(group)' AND device = '\(device)'"))
        }
        #expect(try a.storedNotes() == serverNotes)
        #expect(try a.status().pendingChanges == 0 && b.status().pendingChanges == 0)
        #expect(twice == 0)
        // A's 1,000 keys once each, its 10 winning keys once more (sent again after the conflict).
        #expect(fromA == 1_010)
        await ra.close(); await rb.close()
    }

    /// A push batch ends at `maxBatchBytes` of keys and values as well as at `batchSize` changes: large
    /// values go in several server transactions (the `xmin` of their rows), and a value
    /// larger than the cap goes alone.
    @Test func aPushBatchEndsAtItsByteCap() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("byte-cap")
        let a = try Device(group: group)
        try a.write { tx in
            for index in 0..<20 { try a.notes.put(String(repeating: "v", count: 3_000), forKey: String(format: "k%02d", index), in: tx) }
            try a.notes.put(String(repeating: "w", count: 30_000), forKey: "large", in: tx)
        }
        var options = Replicator.Options()
        options.maxBatchBytes = 10_000
        let replicator = try a.replicator(cluster.tcpURL, options: options)
        let pushed = try await replicator.push()
        #expect(pushed.pushed == 21, "\(pushed)")
        let (rows, transactions, largeAlone) = try await offPool {
            (try cluster.count("SELECT count(*) FROM kvsync_changes WHERE group_id = '\(group)'"),
             try cluster.count("SELECT count(DISTINCT xmin::text) FROM kvsync_changes WHERE group_id = '\(group)'"),
             try cluster.count("""
                SELECT count(*) FROM kvsync_changes c JOIN kvsync_changes l ON l.xmin::text = c.xmin::text
                WHERE c.group_id = '\(group)' AND l.group_id = '\(group)' AND l.key = 'large'::bytea
                """))
        }
        #expect(rows == 21)
        // Four values of about 3,000 bytes reach the cap: 20 values in 5 batches, and the large one alone.
        #expect(transactions == 6, "\(transactions)")
        #expect(largeAlone == 1)
        #expect(try a.status().pendingChanges == 0)
        await replicator.close()
    }

    /// A page of the log stops at 32 MiB of keys and values (its first change whatever its size), and
    /// the bound is applied in the statement, on both paths: a group of large values is pulled a page at
    /// a time, never read whole into the device's or the gateway's memory.
    @Test(arguments: ["direct", "gateway"]) func aPageOfLargeValuesStopsAtItsByteBound(path: String) async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("large-page-\(path)")
        let a = try Device(group: group)
        // Five values of 10 MiB (each goes in a push batch of its own: over the 8 MiB batch cap).
        try a.write { tx in
            for index in 0..<5 { try a.notes.put(String(repeating: "\(index)", count: 10 << 20), forKey: "k\(index)", in: tx) }
        }
        let ra = try a.replicator(cluster.tcpURL)
        #expect(try await ra.push().pushed == 5)
        await ra.close()
        var gateway: BackgroundProcess?
        defer { gateway?.kill(SIGKILL) }
        let server: any ReplicationServer
        if path == "gateway" {
            let (process, url) = try await Self.startGateway(cluster)
            gateway = process
            server = try GatewayConnection(url: SyncGatewayURL(url), token: try await Self.issue(cluster, ["--group", group]), group: group,
                                           maxValueBytes: 16 << 20, operationTimeout: .seconds(60), connectTimeout: .seconds(10))
        } else {
            server = try await ServerConnection.connect(cluster.tcpURL, logger: Logger(label: "test"), maxValueBytes: 16 << 20)
        }
        // Three values make 30 MiB and their keys; a fourth would pass 32 MiB.
        let first = try await server.changes(group: group, after: 0, limit: 1_000)
        #expect(first.changes.count == 3, "\(first.changes.count)")
        let second = try await server.changes(group: group, after: first.changes.last?.sequence ?? 0, limit: 1_000)
        #expect(second.changes.count == 2, "\(second.changes.count)")
        #expect(Set((first.changes + second.changes).map { String(decoding: $0.key, as: UTF8.self) }) == ["k0", "k1", "k2", "k3", "k4"])
        await server.close()
        // And a device pulls them all, a page at a time.
        let b = try Device(group: group)
        let rb = try b.replicator(cluster.tcpURL)
        try await rb.sync()
        #expect(try b.notes.count() == 5)
        #expect(try b.notes.get("k4")?.utf8.count == 10 << 20)
        await rb.close()
    }

    /// A push cancelled mid-way returns only once its collecting thread and its batches have ended
    /// (the container may be closed right after); what it sent is answered `duplicate` the next time,
    /// and every change reaches the log once.
    @Test func aCancelledPushEndsItsCollectingThreadAndLosesNothing() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("cancelled")
        var a: Device? = try Device(group: group)
        let count = 20_000
        do {
            let writer = a!
            try await offPool { try writer.write { tx in for index in 0..<count { try writer.notes.put("v\(index)", forKey: String(format: "k%05d", index), in: tx) } } }
        }
        let root = a!.directory
        var options = Replicator.Options()
        options.batchSize = 100
        do {
            let replicator = try a!.replicator(cluster.tcpURL, options: options)
            let push = Task { try await replicator.push() }
            #expect(await eventuallyAsync(60) { ((try? await offPool { try cluster.count("SELECT count(*) FROM kvsync_changes") }) ?? 0) > 0 })
            push.cancel()
            let outcome = await push.result
            let before = try await offPool { try cluster.count("SELECT count(*) FROM kvsync_changes") }
            print("[gateway] a push cancelled after \(before) of \(count) changes: \(outcome)")
            await replicator.close()
        }
        // Closed and opened again right away: nothing of the cancelled push still reads it.
        let reopened = try SharedContainer(groupIdentifier: group, root: root.path)
        a = nil
        let notes = try reopened.store.collection("notes", key: String.self, value: String.self)
        let settings = try reopened.defaults(suite: "settings")
        let again = try Replicator(container: reopened, server: cluster.tcpURL, targets: [.collection(notes), .defaults(settings)], options: options)
        try await again.sync()
        #expect(try Replication.status(of: reopened).pendingChanges == 0)
        let (total, twice) = try await offPool {
            (try cluster.count("SELECT count(*) FROM kvsync_changes WHERE group_id = '\(group)'"),
             try cluster.count("""
                SELECT count(*) FROM (SELECT device, token FROM kvsync_changes WHERE group_id = '\(group)'
                                      GROUP BY device, token HAVING count(*) > 1) AS twice
                """))
        }
        #expect(total == count)
        #expect(twice == 0)
        await again.close()
        _ = root
    }

    /// What the direct path does works the same through the gateway: deletes (tombstones), a resync
    /// after the owner pruned past a device's cursor, and the clock bound (`kvtool` exits 75).
    @Test func deletesResyncsAndTheClockBoundWorkThroughTheGateway() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("same")
        let (gateway, url) = try await Self.startGateway(cluster)
        defer { gateway.kill(SIGKILL) }
        let token = try await Self.issue(cluster, ["--group", group])
        let tokenB = try await Self.issue(cluster, ["--group", group])
        let gatewayURL = try SyncGatewayURL(url)
        let a = try Device(group: group), b = try Device(group: group)
        // (In a block: a replicator holds its container until it is gone, and kvtool needs it below.)
        do {
            let resynced = Locked(false)
            let ra = try Replicator(container: a.container, gateway: gatewayURL, token: token, targets: a.targets)
            let rb = try Replicator(container: b.container, gateway: gatewayURL, token: tokenB, targets: b.targets) { event in
                if case .resynchronized = event { resynced.withLock { $0 = true } }
            }
            // (The owner's prune runs on the direct path, from a machine of its own.)
            try await expectResyncAfterAPruneThatPassedACursor(cluster, group: group, a: a, ra, b: b, rb, resynced: resynced) {
                let machine = try Device(group: group)
                let owner = try machine.replicator(cluster.tcpURL)
                let horizon = try await owner.pruneServer(olderThan: .zero)
                await owner.close()
                return horizon
            }
            await ra.close(); await rb.close()
        }

        // A clock a day ahead: the gateway's database refuses the push, the device exits 75 and keeps it.
        try ReplicationSkewTests.moveClock(of: a, ahead: 86_400)
        try a.put("from tomorrow", "tomorrow")
        let refused = try await a.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token", token])
        #expect(refused.status == 75 && refused.stderr.contains("ahead of the server's"), "\(refused.stderr)")
        #expect(try a.status().pendingChanges == 1)
        #expect(try cluster.count("SELECT count(*) FROM kvsync_changes WHERE key = convert_to('tomorrow', 'UTF8')") == 0)
    }
}
#endif
