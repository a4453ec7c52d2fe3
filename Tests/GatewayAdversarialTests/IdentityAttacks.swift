#if PostgreSQL
import Foundation
import KVStore
import Logging
import SyncKit
@testable import SyncKitPostgres
import SyncTestSupport
import SyncWire
import PostgresTesting
import TestSupport
import Testing

/// Who pushes, and how far ahead its clock may be, are the credential's and the server's to say.
@Suite(.serialized) struct IdentityAttacks {
    /// A member of the group reads alice's device id and her last token from a page of the log, then
    /// pushes junk under her id with her next tokens. Refused; the junk it may push is its own; and
    /// alice's next real write is applied, not answered "duplicate", and reaches the others.
    @Test func aDeviceCannotPushInAnotherDevicesNameNorMakeItsWritesVanish() async throws {
        let arena = try await Arena("impersonation")
        let alice = try Device(group: arena.group), bob = try Device(group: arena.group)
        let aliceToken = try await arena.token(["--device", "alice"])
        let bobToken = try await arena.token(["--device", "bob"])
        let mallory = try await arena.token(["--device", "mallory"])
        try alice.put("alice 1", "k1")
        #expect(try await arena.sync(alice, aliceToken).status == 0)
        #expect(try await arena.sync(bob, bobToken).status == 0)
        #expect(try bob.notes.get("k1") == "alice 1")
        // Her container's id: her credential's name and its install (issue 46).
        let aliceID = try #require(try alice.status().device)
        #expect(aliceID.hasPrefix("alice#") && InstallID.endsWithPublicID(aliceID), "\(aliceID)")

        // What any member can read: the device and token of every change.
        let page = try ChangesPage(decoding: try await arena.get("/v1/changes?after=0", mallory).body, maxValueBytes: 1 << 20)
        let last = try #require(page.changes.last { $0.device == aliceID })
        let junk = try (1...5).map { try note("junk\($0)", "junk", token: last.token + UInt64($0)) }
        let before = try await arena.log()
        for named in [aliceID, "alice"] {
            let impersonated = try await arena.push(mallory, device: named, changes: junk)
            #expect(impersonated.status == 403 && impersonated.text.contains("this credential's device is mallory"), "\(impersonated.status) \(impersonated.text)")
        }
        #expect(try await arena.log() == before, "the impersonating push reached the log")
        // Naming nobody, the same tokens are mallory's own: the log credits mallory, not alice.
        let own = try await arena.push(mallory, changes: junk)
        #expect(own.status == 200, "\(own.text)")
        let rows = try await arena.log()
        #expect(rows.filter { $0.contains("|\(aliceID)|") }.count == 1, "\(rows)")
        #expect(rows.filter { $0.contains("|mallory|") }.count == 5, "\(rows)")

        // Alice's next write is hers, applied, and reaches bob.
        try alice.put("alice 2", "k2")
        let second = try await arena.sync(alice, aliceToken)
        #expect(second.status == 0 && second.stdout.contains("pushed 1,"), "\(second.stdout)\(second.stderr)")
        #expect(try alice.status().pendingChanges == 0)
        #expect(try await arena.sync(bob, bobToken).status == 0)
        #expect(try bob.notes.get("k2") == "alice 2")
        // A device that names itself is taken at its word only when that is its credential's device
        // (with no install id, as a release before issue 46 sends: the name alone).
        let named = try await arena.push(aliceToken, device: "alice", changes: [try note("k3", "named", token: 1 << 40)])
        #expect(named.status == 200, "\(named.text)")
        let credited = try await arena.log()
        #expect(credited.filter { $0.contains("|\(aliceID)|") }.count == 2 && credited.filter { $0.contains("|alice|") }.count == 1, "\(credited)")
    }

    /// The clock bound is the gateway's (within the server's): a push that asks for `Int64.max` and is
    /// stamped ten years ahead is refused whole, and so is any stamp of 2^63 or more; on the direct
    /// path the owner's server bound caps what a device asks for.
    @Test func theClockBoundIsTheGatewaysAndTheServersNeverTheDevices() async throws {
        let arena = try await Arena("clock")
        let mallory = try await arena.token(["--device", "mallory"])
        let tenYears = HybridTimestamp(date: Date().addingTimeInterval(10 * 365 * 86_400)).rawValue
        let lifted = try await arena.push(mallory, skew: .max, changes: [try note("k", "from 2036", clock: tenYears, token: 1)])
        #expect(lifted.status == 200, "\(lifted.text)")
        guard case .clockAhead(let ahead, let limit) = try GatewayPushResponse(decoding: lifted.body, maxValueBytes: 1 << 20) else {
            Issue.record("a push stamped ten years ahead was not refused for its clock")
            return
        }
        #expect(ahead > 300 * 86_400_000)
        // The bound that refused it: the gateway's 60 s, not the Int64.max the push asked for.
        #expect(limit == 60_000)
        for clock: UInt64 in [1 << 63, .max] {
            let answer = try await arena.push(mallory, skew: .max, changes: [try note("k", "top bit", clock: clock, token: 2)])
            #expect(answer.status == 400 && answer.text.contains("clock is 2^63 or more"), "\(clock): \(answer.status) \(answer.text)")
        }
        #expect(try await arena.log().isEmpty)

        // Behind the gateway, kvsync_push itself: a stamp with its top bit set is refused whatever the
        // caller's bound, and the caller's bound never exceeds the server's.
        let refusedTopBit = try await offPool { [cluster = arena.cluster, group = arena.group] in
            try cluster.psql("""
                SELECT outcome FROM kvsync_push('\(group)', 'owner', ARRAY[9]::bigint[], ARRAY['collection'], ARRAY['notes'],
                    ARRAY['k'::bytea], ARRAY['v'::bytea], ARRAY[false], ARRAY[-5]::bigint[], ARRAY[0]::bigint[], 9223372036854775807)
                """)
        }
        #expect(refusedTopBit.trimmingCharacters(in: .whitespacesAndNewlines) == "clock_ahead")
        // Even with both bounds at their widest (an owner who set the server's by hand), a stamp with its
        // top bit set is refused.
        let widest = try await offPool { [cluster = arena.cluster, group = arena.group] in
            try cluster.psql("""
                UPDATE kvsync_schema SET max_clock_skew_ms = 9223372036854775807;
                SELECT outcome FROM kvsync_push('\(group)', 'owner', ARRAY[10]::bigint[], ARRAY['collection'], ARRAY['notes'],
                    ARRAY['k'::bytea], ARRAY['v'::bytea], ARRAY[false], ARRAY[-5]::bigint[], ARRAY[0]::bigint[], 9223372036854775807);
                UPDATE kvsync_schema SET max_clock_skew_ms = 60000;
                """)
        }
        #expect(widest.trimmingCharacters(in: .whitespacesAndNewlines) == "clock_ahead", "\(widest)")
        // The gateway's bound holds where the server's is wider: with the server's at a year, a push
        // stamped a day ahead (asking for Int64.max) is still refused by the gateway's 60 s.
        let year = try await kvtoolRun(["sync", "setup", "--database", arena.cluster.tcpURL.description, "--max-clock-skew", "31536000"])
        #expect(year.status == 0, "\(year.stderr)")
        let tomorrow = HybridTimestamp(date: Date().addingTimeInterval(86_400)).rawValue
        let dayAhead = try await arena.push(mallory, skew: .max, changes: [try note("k", "from tomorrow", clock: tomorrow, token: 3)])
        guard case .clockAhead? = try? GatewayPushResponse(decoding: dayAhead.body, maxValueBytes: 1 << 20) else {
            Issue.record("a push stamped a day ahead went through a gateway whose bound is 60 s: \(dayAhead.status) \(dayAhead.text)")
            return
        }
        #expect(try await arena.log().isEmpty)
        let setup = try await kvtoolRun(["sync", "setup", "--database", arena.cluster.tcpURL.description, "--max-clock-skew", "5"])
        #expect(setup.status == 0 && setup.stdout.contains("clock bound 5.0 s"), "\(setup.stdout)\(setup.stderr)")
        let direct = try Device(group: arena.group)
        try ReplicationSkewTestsClock.move(direct, ahead: 60)
        try direct.put("a minute ahead", "k")
        let asked = try await direct.kvtoolOffPool(["sync", "run", "--once", "--server", arena.cluster.tcpURL.description, "--max-clock-skew", "3600"])
        #expect(asked.status == 75 && asked.stderr.contains("ahead of the server's"), "\(asked.stderr)")
        #expect(try await arena.log().isEmpty)
        // A device within the server's bound pushes as before.
        let honest = try Device(group: arena.group)
        try honest.put("on time", "k")
        #expect(try await honest.kvtoolOffPool(["sync", "run", "--once", "--server", arena.cluster.tcpURL.description]).status == 0)
        #expect(try await arena.log().count == 1)
    }

    /// Two containers given one credential are two installs (issue 46: before, the second was refused
    /// for good, and so was an app installed again): each syncs under its own id, the credential's name
    /// and its install. A (device, token) that comes again with another change is still refused, never
    /// answered "duplicate" (which would tell the sender its writes reached the server): from one
    /// install (its secret sent again), from a device that sends no install id (a release before), and
    /// on the direct path.
    @Test func aReusedDeviceTokenWithAnotherChangeIsRefusedNeverAnsweredDuplicate() async throws {
        let arena = try await Arena("reuse")
        let shared = try await arena.token(["--device", "phone"])
        let first = try Device(group: arena.group), copy = try Device(group: arena.group)
        for index in 0..<3 { try first.put("first \(index)", "k\(index)") }
        #expect(try await arena.sync(first, shared).status == 0)
        for index in 0..<3 { try copy.put("copy \(index)", "c\(index)") }
        let second = try await arena.sync(copy, shared)
        #expect(second.status == 0 && second.stdout.contains("pushed 3,"), "\(second.status) \(second.stdout)\(second.stderr)")
        let ids = (try first.status().device ?? "", try copy.status().device ?? "")
        #expect(ids.0.hasPrefix("phone#") && ids.1.hasPrefix("phone#") && ids.0 != ids.1, "\(ids)")
        #expect(try await arena.log().filter { $0.contains("|\(ids.1)|") }.count == 3)

        // One install sends a token again with another change: refused, whole, with 409.
        let install = InstallID.make()
        let sent = try await arena.push(shared, install: install, changes: [try note("r", "v1", token: 7)])
        #expect(sent.status == 200, "\(sent.text)")
        let resent = try await arena.push(shared, install: install, changes: [try note("r", "v1", token: 7)])
        #expect(resent.status == 200 && resent.body == sent.body, "a batch sent again is answered as the first time")
        let before = try await arena.log()
        for changes in [[try note("r", "v2", token: 7)], [try note("r2", "v1", token: 7)], [try note("r", nil, token: 7)]] {
            let refused = try await arena.push(shared, install: install, changes: changes)
            #expect(refused.status == 409 && refused.text.contains("in use by another container"), "\(refused.status) \(refused.text)")
        }
        #expect(try await arena.log() == before)
        // A device that sends no install id pushes under the name alone, and is held to it the same way.
        let legacy = try await arena.push(shared, changes: [try note("l", "legacy", token: 7)])
        #expect(legacy.status == 200, "\(legacy.text)")
        let legacyAgain = try await arena.push(shared, changes: [try note("l", "legacy, changed", token: 7)])
        #expect(legacyAgain.status == 409 && legacyAgain.text.contains("in use by another container"), "\(legacyAgain.status) \(legacyAgain.text)")
        let rows = try await arena.log()
        #expect(rows.filter { $0.contains("|phone|7|") }.count == 1
                && rows.filter { $0.contains("|phone#\(InstallID.publicID(of: install))|7|") }.count == 1, "\(rows)")

        // The direct path, statement by statement.
        let server = try await ServerConnection.connect(arena.cluster.tcpURL, logger: Logger(label: "test"), maxValueBytes: 1 << 20)
        try await server.migrate()
        let group = arena.group + ".direct"
        func push(_ changes: [OutgoingChange]) async throws -> [PushOutcome] {
            try await server.push(group: group, device: "d", changes: changes, maxClockSkew: .seconds(60))
        }
        let applied = try await push([try note("k", "v1", token: 7)])
        #expect(try await push([try note("k", "v1", token: 7)]) == applied, "a batch sent again is answered as the first time")
        for changes in [[try note("k", "v2", token: 7)], [try note("k2", "v1", token: 7)], [try note("k", nil, token: 7)],
                        [try note("a", "1", token: 8), try note("b", "2", token: 8)]] {
            await #expect {
                _ = try await push(changes)
            } throws: { error in
                guard case .deviceInUse(let reason) = error as? ReplicationError else { return false }
                return reason.contains("in use by another container")
            }
        }
        #expect(try await arena.log().filter { $0.hasPrefix(group + "|") }.count == 1)
        await server.close()
    }

    /// What no replicator sends is refused with 400 and one line, before the database sees it: a NUL
    /// (or another control character) in a kind or name, an empty kind.
    @Test func controlCharactersInAPushAreRefusedAsMalformedNotAsADatabaseError() async throws {
        let arena = try await Arena("nul")
        let token = try await arena.token(["--device", "d"])
        for (kind, name) in [("collection\u{0}", "notes"), ("collection", "no\u{0}tes"), ("", "notes"), ("collection", "\u{7}")] {
            let change = OutgoingChange(kind: kind, name: name, key: [0x6B], value: [0x61], clock: HybridTimestamp(date: Date()).rawValue,
                                        base: 0, token: 1)
            let answer = try await arena.push(token, changes: [change])
            #expect(answer.status == 400 && answer.text.hasPrefix("the push is malformed: "), "\(answer.status) \(answer.text)")
        }
        // A NUL in the device the body names.
        let device = try await arena.push(token, device: "d\u{0}", changes: [try note("k", "v", token: 1)])
        #expect(device.status == 400 && device.text.contains("control character"), "\(device.status) \(device.text)")
        #expect(try await arena.log().isEmpty)
    }

    /// A credential that names no device (a JWT without `device` or `sub`) pulls and never pushes;
    /// a token issued without a name pushes as `credential-ID`.
    @Test func aCredentialWithoutADeviceNameGetsOneFromTheServerOrPullsOnly() async throws {
        let arena = try await Arena("unnamed")
        let unnamed = try await arena.token()
        let hello = try GatewayHello(decoding: try await arena.get("/v1/hello", unnamed).body)
        let id = try await offPool { [cluster = arena.cluster] in
            try cluster.psql("SELECT id FROM kvsync_tokens ORDER BY id DESC LIMIT 1").trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(hello.device == "credential-\(id)" && !hello.readOnly, "\(hello)")
        let device = try Device(group: arena.group)
        try device.put("v", "k")
        #expect(try await arena.sync(device, unnamed).status == 0)
        let recorded = try #require(try device.status().device)
        #expect(recorded.hasPrefix("credential-\(id)#") && InstallID.endsWithPublicID(recorded), "\(recorded)")
        #expect(try await arena.log().first?.contains("|\(recorded)|") == true)
        // The name is reserved: no token is issued with it.
        let reserved = try await kvtoolRun(["sync", "token", "issue", "--database", arena.cluster.tcpURL.description,
                                            "--group", arena.group, "--device", "credential-\(id)"])
        #expect(reserved.status == 65 && reserved.stderr.contains("cannot start with credential-"), "\(reserved.stderr)")
    }

    /// The install id (issue 46) is the device's to send, so it is believed only as far as it cannot
    /// hurt: it picks one install among those of the verified credential's name, never another name,
    /// and an install is reached only with its secret, which the log does not show. A malformed one is
    /// refused before the database, in a line that never holds it.
    @Test func anInstallIdNeverWritesAsAnotherDeviceNorAsAnInstallWhoseSecretItLacks() async throws {
        let arena = try await Arena("install")
        let aliceToken = try await arena.token(["--device", "alice"])
        let mallory = try await arena.token(["--device", "mallory"])
        let alice = try Device(group: arena.group)
        try alice.put("alice 1", "k1")
        #expect(try await arena.sync(alice, aliceToken).status == 0)
        let aliceID = try #require(try alice.status().device)
        // Her container's secret, as a thief of the container's files would read it.
        let aliceSecret = try #require(try Replication.Collections(store: alice.container.store).state.get(Replication.stateKey)?.install)
        #expect(aliceID == "alice#" + InstallID.publicID(of: aliceSecret))
        let hello = try GatewayHello(decoding: try await arena.get("/v1/hello", aliceToken, install: aliceSecret).body)
        #expect(hello.device == aliceID)
        let start = try await arena.log()

        // Malformed: 400 and one line, before the database; the line never holds the value.
        let publicID = String(aliceID.dropFirst("alice#".count))
        for bad in [String(repeating: "A", count: 42), String(repeating: "A", count: 44), String(repeating: "+", count: 43), publicID,
                    String(repeating: "A", count: 4_000)] {
            for answer in [try await arena.get("/v1/hello", aliceToken, install: bad),
                           try await arena.push(aliceToken, install: bad, changes: [try note("k9", "never", token: 1 << 41)])] {
                #expect(answer.status == 400 && answer.text == "the KVSync-Install header is not an install id (43 characters of base64url)\n",
                        "\(bad.prefix(50)): \(answer.status) \(answer.text)")
            }
        }
        let twice = try await offPool { [url = arena.url, headers = arena.headers(aliceToken, install: aliceSecret)] in
            try RawHTTP.request(url, "GET /v1/hello", headers: headers + ["\(InstallID.header): \(InstallID.make())"])
        }
        #expect(twice.status == 400 && twice.text == "more than one KVSync-Install header\n", "\(twice.status) \(twice.text)")

        // Another credential with alice's install secret (stolen with her container's files, but not her
        // token) pushes under its own name: never alice's rows.
        let stolen = try await arena.push(mallory, install: aliceSecret, changes: [try note("m1", "from mallory", token: 1)])
        #expect(stolen.status == 200, "\(stolen.text)")
        let named = try await arena.push(mallory, device: aliceID, install: aliceSecret, changes: [try note("m2", "as alice", token: 2)])
        #expect(named.status == 403 && named.text.contains("this credential's device is mallory#\(publicID)"), "\(named.status) \(named.text)")
        var rows = try await arena.log()
        #expect(rows.filter { $0.contains("|\(aliceID)|") } == start.filter { $0.contains("|\(aliceID)|") }, "\(rows)")
        #expect(rows.filter { $0.contains("|mallory#\(publicID)|1|") }.count == 1, "\(rows)")

        // Alice's credential is revoked and issued again: whoever holds the new one, without her
        // container's secret, cannot push as her install (its public id is in every page of the log).
        let revoked = try await kvtoolRun(["sync", "token", "revoke", "--database", arena.cluster.tcpURL.description, "--device", "alice",
                                           "--group", arena.group])
        #expect(revoked.status == 0, "\(revoked.stderr)")
        let reissued = try await arena.token(["--device", "alice"])
        let outsider = InstallID.make()
        let outsiderHello = try GatewayHello(decoding: try await arena.get("/v1/hello", reissued, install: outsider).body)
        #expect(outsiderHello.device == "alice#" + InstallID.publicID(of: outsider) && outsiderHello.device != aliceID)
        let page = try ChangesPage(decoding: try await arena.get("/v1/changes?after=0", reissued, install: outsider).body, maxValueBytes: 1 << 20)
        let next = (page.changes.filter { $0.device == aliceID }.map(\.token).max() ?? 0) + 1
        let asOld = try await arena.push(reissued, device: aliceID, install: outsider, changes: [try note("k1", "rewritten", token: next)])
        #expect(asOld.status == 403 && asOld.text.contains("this credential's device is \(outsiderHello.device ?? "")"), "\(asOld.status) \(asOld.text)")
        // Without an install id it is the name alone: another id than the install's too.
        let legacy = try await arena.push(reissued, changes: [try note("n1", "as the name", token: next)])
        #expect(legacy.status == 200, "\(legacy.text)")
        rows = try await arena.log()
        #expect(rows.filter { $0.contains("|\(aliceID)|") } == start.filter { $0.contains("|\(aliceID)|") }, "the old install's rows changed: \(rows)")
        #expect(rows.filter { $0.contains("|alice|") }.count == 1, "\(rows)")
        // Her own container, given the new credential, holds its secret: it goes on as her install.
        try alice.put("alice 2", "k2")
        let resumed = try await arena.sync(alice, reissued)
        #expect(resumed.status == 0 && resumed.stdout.contains("pushed 1,"), "\(resumed.stdout)\(resumed.stderr)")
        #expect(try alice.status().device == aliceID)
        #expect(try await arena.log().filter { $0.contains("|\(aliceID)|") }.count == start.filter { $0.contains("|\(aliceID)|") }.count + 1)
    }

    /// No credential's device is another's install: a name that ends like one (`#` and 24 hexadecimal
    /// digits) is not issued, and a row written into the tokens' table by hand with one is refused by
    /// the gateway (a JWT's is refused too: SyncWireTests).
    @Test func aNameThatEndsLikeAnInstallIsReserved() async throws {
        let arena = try await Arena("reserved")
        let victim = try await arena.token(["--device", "bob"])
        let install = InstallID.make()
        let bobID = try #require(try GatewayHello(decoding: try await arena.get("/v1/hello", victim, install: install).body).device)
        let issued = try await kvtoolRun(["sync", "token", "issue", "--database", arena.cluster.tcpURL.description, "--group", arena.group,
                                          "--device", bobID])
        #expect(issued.status == 65 && issued.stderr.contains("cannot end with # and 24 hexadecimal digits"), "\(issued.status) \(issued.stderr)")
        let planted = SyncTokens.prefix + String(repeating: "P", count: 43)
        try await offPool { [cluster = arena.cluster, group = arena.group] in
            _ = try cluster.psql("""
                INSERT INTO kvsync_tokens (group_id, device, hash) VALUES ('\(group)', '\(bobID)', decode('\(Hex.encode(SyncTokens.hash(planted)))', 'hex'))
                """)
        }
        for answer in [try await arena.get("/v1/hello", planted), try await arena.push(planted, changes: [try note("k", "as bob's install", token: 1)])] {
            #expect(answer.status == 403 && answer.text.contains("ends like an install's id"), "\(answer.status) \(answer.text)")
        }
        #expect(try await arena.log().isEmpty)
    }

    /// Installs share their credential's limits: the rate (and the live streams) are counted by the
    /// credential's group and name, whatever install a request names.
    @Test func installsShareTheirCredentialsRate() async throws {
        // A burst of one request, then one every 1,000 s: the second request of a credential is refused.
        let arena = try await Arena("install-rate", gatewayArguments: ["--rate", "0.001"])
        let token = try await arena.token(["--device", "phone"])
        let other = try await arena.token(["--device", "tablet"])
        #expect(try await arena.get("/v1/hello", token, install: InstallID.make()).status == 200)
        for install in [InstallID.make(), InstallID.make(), nil] {
            let answer = try await arena.get("/v1/hello", token, install: install)
            #expect(answer.status == 429 && answer.text.hasPrefix("too many requests for this credential"), "\(answer.status) \(answer.text)")
        }
        #expect(try await arena.get("/v1/hello", other, install: InstallID.make()).status == 200)
    }
}

/// Moves a device's history clock ahead (as ReplicationSkewTests does).
enum ReplicationSkewTestsClock {
    static func move(_ device: Device, ahead seconds: TimeInterval) throws {
        let future = Date().addingTimeInterval(seconds)
        _ = try device.container.store.write { tx in
            try device.history.observeClock(HybridTimestamp(date: future), now: future, in: tx)
        }
    }
}
#endif
