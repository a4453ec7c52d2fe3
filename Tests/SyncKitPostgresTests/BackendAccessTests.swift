#if PostgreSQL
import Foundation
import KVStore
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

/// An app's backend and the synced data (issue 50, part B): the role `kvsync_backend`, its grants,
/// the JSON view, and server-authored writes reaching live devices. One cluster per test (each is a
/// few seconds); every check of a test shares it.
@Suite(.serialized) struct BackendAccessTests {
    static func group(_ name: String) -> String { "group.com.example.backend.\(name)" }

    /// `psql` as `login`: its output, or the error's text.
    static func sql(_ cluster: LocalPostgresCluster, _ statement: String, as login: String? = nil) async -> Result<String, any Error> {
        do {
            return .success(try await offPool { try cluster.psql(statement, as: login).trimmingCharacters(in: .whitespacesAndNewlines) })
        } catch {
            return .failure(error)
        }
    }

    /// A backend login reads `value_json->>'…'` through the view for its granted groups only, also after
    /// setting `kvsync.group` itself, and writes only to them; the gateway's login calls none of the
    /// backend's functions; a privileged login, or a member of the other role, is refused as either login.
    @Test func aBackendLoginSeesAndWritesOnlyItsGrantedGroupsAndTheGatewayCallsNoBackendFunction() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let owner = cluster.tcpURL.description
        let (mine, other) = (Self.group("mine"), Self.group("other"))
        let setup = try await kvtoolRun(["sync", "setup", "--database", owner, "--gateway-login", "gw", "--backend-login", "be", "--json"])
        #expect(setup.status == 0 && setup.stdout.contains("\"createdBackendLogin\":true"), "\(setup.stdout)\(setup.stderr)")
        // Refused: a privileged login (here the owner, a superuser), a member of the other role, one name for both.
        for (arguments, says) in [(["--backend-login", "kv"], "is privileged"), (["--backend-login", "gw"], "member of kvsync_gateway"),
                                  (["--gateway-login", "be"], "member of kvsync_backend"),
                                  (["--gateway-login", "same", "--backend-login", "same"], "two roles"),
                                  (["--backend-login", "kvsync_gateway"], "a name of its own")] {
            let refused = try await kvtoolRun(["sync", "setup", "--database", owner] + arguments)
            #expect(refused.status == 65 && refused.stderr.contains(says) && refused.stderr.split(separator: "\n").count == 1,
                    "\(arguments): \(refused.status) \(refused.stderr)")
        }
        #expect(try await offPool { try cluster.count("SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid WHERE r.rolname IN ('kvsync_gateway', 'kvsync_backend') AND m.member IN (SELECT oid FROM pg_roles WHERE rolname IN ('kvsync_gateway', 'kvsync_backend', 'same'))") } == 0)

        // The owner writes a score in each group (JSON, encoded by the server); the backend is granted one.
        for (group, score) in [(mine, 7), (other, 9)] {
            let put = try await kvtoolRun(["sync", "server", "put", "--database", owner, "--group", group, "--collection", "scores",
                                           "--key", "alice", "--json", "{\"score\": \(score), \"name\": \"Alice\"}", "--author", "seed"])
            #expect(put.status == 0 && put.stdout.contains("applied") && put.stdout.contains("server:seed"), "\(put.stdout)\(put.stderr)")
        }
        let granted = try await kvtoolRun(["sync", "backend", "grant", "--database", owner, "--login", "be", "--group", mine])
        #expect(granted.status == 0, "\(granted.stderr)")
        let noSuchLogin = try await kvtoolRun(["sync", "backend", "grant", "--database", owner, "--login", "nobody", "--group", mine])
        #expect(noSuchLogin.status != 0 && noSuchLogin.stderr.contains("no role nobody"), "\(noSuchLogin.stderr)")

        // Reads: its group only, whatever kvsync.group it sets (the gateway's policy trusted that setting).
        for statement in ["SELECT string_agg(group_id || '=' || key_text || '=' || (value_json->>'score'), ',') FROM kvsync_state_json",
                          "SELECT set_config('kvsync.group', '\(other)', false); SELECT string_agg(group_id || '=' || key_text || '=' || (value_json->>'score'), ',') FROM kvsync_state_json",
                          "SET ROLE kvsync_backend; SELECT set_config('kvsync.group', '\(other)', false); SELECT string_agg(group_id || '=' || key_text || '=' || (value_json->>'score'), ',') FROM kvsync_state_json"] {
            let read = await Self.sql(cluster, statement, as: "be")
            #expect((try? read.get())?.split(separator: "\n").last == "\(mine)=alice=7", "\(statement): \(read)")
        }
        let direct = await Self.sql(cluster, "SELECT set_config('kvsync.group', '\(other)', false); SELECT count(*) FROM kvsync_state WHERE group_id = '\(other)'", as: "be")
        #expect((try? direct.get())?.split(separator: "\n").last == "0", "\(direct)")
        for statement in ["SELECT count(*) FROM kvsync_changes", "SELECT count(*) FROM kvsync_tokens", "INSERT INTO kvsync_backend_grants VALUES ('be', '\(other)')",
                          "UPDATE kvsync_state SET value = NULL"] {
            let refused = await Self.sql(cluster, statement, as: "be")
            #expect("\(refused)".contains("permission denied"), "\(statement): \(refused)")
        }
        // Writes: its group only.
        let backendURL = "postgres://be@127.0.0.1:\(cluster.port)/kv"
        let write = try await kvtoolRun(["sync", "server", "put", "--database", backendURL, "--group", mine, "--collection", "scores",
                                         "--key", "bob", "--json", "{\"score\": 3}", "--author", "push-service"])
        #expect(write.status == 0, "\(write.stderr)")
        let elsewhere = try await kvtoolRun(["sync", "server", "put", "--database", backendURL, "--group", other, "--collection", "scores",
                                             "--key", "bob", "--json", "{\"score\": 3}"])
        #expect(elsewhere.status != 0 && elsewhere.stderr.contains("not granted the group"), "\(elsewhere.stderr)")
        let read = try await kvtoolRun(["sync", "server", "get", "--database", backendURL, "--group", mine, "--collection", "scores", "--key", "bob", "--json"])
        #expect(read.status == 0 && read.stdout.contains("\"device\":\"server:push-service\"") && read.stdout.contains("\"value\":{\"score\": 3}"),
                "\(read.stdout)\(read.stderr)")
        let unseen = try await kvtoolRun(["sync", "server", "get", "--database", backendURL, "--group", other, "--collection", "scores", "--key", "alice"])
        #expect(unseen.status == 1, "\(unseen.stdout)\(unseen.stderr)")

        // The gateway's login (as itself, and as its role) can call none of the backend's functions, nor read the view.
        for statement in ["SELECT * FROM kvsync_server_put('\(mine)', 'collection', 'scores', 'k', '\\xa0', 'gw')",
                          "SELECT * FROM kvsync_server_put_json('\(mine)', 'collection', 'scores', 'k', '{}', 'gw')",
                          "SELECT * FROM kvsync_server_delete('\(mine)', 'collection', 'scores', 'k', 'gw')",
                          "SELECT * FROM kvsync_server_write('\(mine)', 'collection', 'scores', 'k', NULL, 'gw', NULL, 'x')",
                          "SELECT count(*) FROM kvsync_state_json"] {
            for prefix in ["", "SET ROLE kvsync_gateway; SELECT set_config('kvsync.group', '\(mine)', false); "] {
                let refused = await Self.sql(cluster, prefix + statement, as: "gw")
                #expect("\(refused)".contains("permission denied"), "\(prefix)\(statement): \(refused)")
            }
        }
        // The gateway's own scope still works (its policy now names its role).
        let scoped = await Self.sql(cluster, "SET ROLE kvsync_gateway; SELECT set_config('kvsync.group', '\(mine)', false); SELECT count(*) FROM kvsync_state", as: "gw")
        #expect((try? scoped.get())?.split(separator: "\n").last == "2", "\(scoped)")

        // Revoked: nothing seen, nothing written.
        let revoked = try await kvtoolRun(["sync", "backend", "revoke", "--database", owner, "--login", "be", "--group", mine])
        #expect(revoked.status == 0, "\(revoked.stderr)")
        let after = await Self.sql(cluster, "SELECT count(*) FROM kvsync_state_json", as: "be")
        #expect((try? after.get()) == "0", "\(after)")
        let refusedAfter = try await kvtoolRun(["sync", "server", "delete", "--database", backendURL, "--group", mine, "--collection", "scores", "--key", "bob"])
        #expect(refusedAfter.status != 0 && refusedAfter.stderr.contains("not granted"), "\(refusedAfter.stderr)")
    }

    /// Conditional writes answer like a push (applied, or the current row as a conflict); each write is
    /// a change in the log by `server:<author>` with its own tokens, a clock never behind the group's
    /// newest, and the log's end moved under the group's lock.
    @Test func serverWritesAreChangesInTheLogWithTheirOwnTokensAndClocks() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("log")
        let url = cluster.tcpURL
        // A device's row stamped a little ahead: the server's write goes past it.
        let ahead = (UInt64(Date().timeIntervalSince1970 * 1000) + 30_000) << 16
        let device = try Device(group: group)
        try device.put("from a device", "k")
        _ = try await offPool { try device.kvtool(["sync", "run", "--once", "--server", url.description]) }
        let connection = try await ServerConnection.connect(url, logger: SyncTokens.quietLogger, maxValueBytes: 1 << 20)
        let pushed = try await connection.push(group: group, device: "fast", changes: [
            OutgoingChange(kind: "collection", name: "notes", key: Array("fast".utf8), value: [0x62, 0x63, 0x78], clock: ahead, base: 0, token: 1),
        ], maxClockSkew: .seconds(60))
        await connection.close()
        #expect(pushed.count == 1)
        let first = try await SyncBackend.put(json: "\"one\"", group: group, name: "notes", key: Array("k".utf8), author: "svc", on: url)
        let second = try await SyncBackend.put(json: "\"two\"", group: group, name: "notes", key: Array("k".utf8), author: "svc",
                                               expectedVersion: first.version, on: url)
        let stale = try await SyncBackend.delete(group: group, name: "notes", key: Array("k".utf8), author: "svc", expectedVersion: first.version, on: url)
        let absent = try await SyncBackend.put(json: "1", group: group, name: "notes", key: Array("new".utf8), author: "svc", expectedVersion: 0, on: url)
        #expect(first.outcome == .applied && second.outcome == .applied && absent.outcome == .applied)
        #expect(stale.outcome == .conflict && stale.version == second.version && stale.device == "server:svc" && stale.value != nil, "\(stale)")
        #expect((first.clock ?? 0) > ahead && (second.clock ?? 0) > (first.clock ?? 0), "\(first) \(second) \(ahead)")
        let log = try await offPool {
            try cluster.psql("SELECT string_agg(token::text, ',' ORDER BY seq) FROM kvsync_changes WHERE group_id = '\(group)' AND device = 'server:svc'")
        }.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(log == "1,2,3", "\(log)")
        #expect(try await offPool { try cluster.count("SELECT last_seq - (SELECT max(seq) FROM kvsync_changes WHERE group_id = '\(group)') FROM kvsync_groups WHERE group_id = '\(group)'") } == 0)
        // Bad input: one line each, nothing written.
        for (kind, name, groupName, author, says) in [("collection", "notes", group, "a b", "an author is"), ("other", "notes", group, "a", "the kind is"),
                                                      ("collection", "_files", group, "a", "files manifest"), ("collection", "notes", "", "a", "not empty"),
                                                      ("collection", "notes", group, String(repeating: "a", count: 65), "an author is")] {
            do {
                let result = try await SyncBackend.put(json: "1", group: groupName, kind: kind, name: name, key: [1], author: author, on: url)
                Issue.record("\(kind) \(name) \(author): \(result)")
            } catch {
                #expect("\(error)".contains(says) && !"\(error)".contains("\n"), "\(error)")
            }
        }
        #expect(try await offPool { try cluster.count("SELECT count(*) FROM kvsync_changes WHERE device LIKE 'server:a%'") } == 0)

        // A validator of the collection refuses a server write with its reason: nothing is written.
        // Registered in part C's registry when it is there; else a stand-in `kvsync_validate` of the
        // contract's signature, which the server write looks up by name.
        _ = try await offPool {
            try cluster.psql("""
                CREATE FUNCTION no_forbidden(p_group text, p_key bytea, p_new jsonb, p_old jsonb, p_device text) RETURNS text
                LANGUAGE sql AS $$ SELECT CASE WHEN p_new #>> '{}' = 'forbidden' THEN 'forbidden by ' || p_device END $$;
                DO $$ BEGIN
                    IF to_regclass('kvsync_validators') IS NOT NULL THEN
                        INSERT INTO kvsync_validators (kind, name, fn) VALUES ('collection', 'notes', 'no_forbidden(text, bytea, jsonb, jsonb, text)');
                    ELSE
                        CREATE FUNCTION kvsync_validate(p_group text, p_kind text, p_name text, p_key bytea, p_new jsonb, p_old jsonb, p_device text)
                        RETURNS text LANGUAGE sql AS 'SELECT CASE WHEN p_name = ''notes'' THEN no_forbidden(p_group, p_key, p_new, p_old, p_device) END';
                    END IF;
                END $$;
                """)
        }
        let refused = try await SyncBackend.put(json: "\"forbidden\"", group: group, name: "notes", key: Array("k".utf8), author: "svc", on: url)
        #expect(refused.outcome == .rejected && refused.reason == "forbidden by server:svc" && refused.version == second.version, "\(refused)")
        let refusedByTool = try await kvtoolRun(["sync", "server", "put", "--database", url.description, "--group", group, "--collection", "notes",
                                                 "--key", "k", "--json", "\"forbidden\""])
        #expect(refusedByTool.status == 65 && refusedByTool.stderr.contains("forbidden by server:kvtool"), "\(refusedByTool.stderr)")
        #expect(try await offPool { try cluster.count("SELECT count(*) FROM kvsync_changes WHERE group_id = '\(group)' AND device LIKE 'server:%'") } == 3)

        // Stored JSON for a listed collection: rows before and after the listing (a device's push
        // too), a GIN index answers containment, and unlisting clears the column and the trigger.
        _ = try await offPool { try cluster.psql("INSERT INTO kvsync_json_collections VALUES ('collection', 'notes')") }
        #expect(try await offPool { try cluster.count("SELECT count(*) FROM kvsync_state WHERE name = 'notes' AND value IS NOT NULL AND value_json IS NULL") } == 0)
        _ = try await SyncBackend.put(json: "{\"score\": 5}", group: group, name: "notes", key: Array("s".utf8), author: "svc", on: url)
        try device.put("pushed while listed", "p")
        _ = try await offPool { try device.kvtool(["sync", "run", "--once", "--server", url.description]) }
        let stored = try await offPool {
            try cluster.psql("""
                CREATE INDEX notes_json ON kvsync_state USING gin (value_json jsonb_path_ops);
                SELECT string_agg(convert_from(key, 'UTF8') || '=' || (value_json #>> '{}'), ',' ORDER BY key) FROM kvsync_state
                WHERE group_id = '\(group)' AND value_json @> '{"score": 5}' OR (group_id = '\(group)' AND key = 'p'::bytea);
                """)
        }.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(stored == "p=pushed while listed,s={\"score\": 5}", "\(stored)")
        _ = try await offPool { try cluster.psql("DELETE FROM kvsync_json_collections") }
        #expect(try await offPool { try cluster.count("SELECT count(*) FROM kvsync_state WHERE value_json IS NOT NULL") } == 0)
        #expect(try await offPool { try cluster.count("SELECT count(*) FROM pg_trigger WHERE tgname = 'kvsync_state_json'") } == 0)
    }

    /// A server write reaches live devices at once: through the gateway's stream and the direct
    /// replicator's LISTEN (their polls are set to 10 minutes, so nothing else could bring it). A server
    /// write and a device write of one key at once end with one value on every device and the server,
    /// the one the collection's rule (last writer wins) picks. A JSON write the devices' type does not
    /// decode is quarantined on them with the reason, and later writes still land.
    @Test func aServerWriteReachesLiveDevicesAndSettlesAConcurrentDeviceWriteAlikeEverywhere() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("live")
        let (gateway, gatewayURL) = try await startGateway(cluster)
        defer { gateway.kill(SIGKILL) }
        _ = try await SyncServerSetup.prepare(on: cluster.tcpURL, backendLogin: "be")
        try await SyncBackend.grant(login: "be", group: group, on: cluster.tcpURL)
        let backend = try ServerURL("postgres://be@127.0.0.1:\(cluster.port)/kv")
        var options = Replicator.Options()
        options.pollInterval = .seconds(600)
        let (streamed, listening, writer) = (try Device(group: group), try Device(group: group), try Device(group: group))
        var replicators: [Replicator] = []
        for device in [streamed, writer] {
            let token = try await issueToken(cluster, ["--group", group])
            replicators.append(try Replicator(container: device.container, gateway: SyncGatewayURL(gatewayURL), token: token,
                                              targets: device.targets, options: options))
        }
        replicators.append(try listening.replicator(cluster.tcpURL, options: options))
        let running = replicators.map { replicator in Task { try await replicator.run(until: ContinuousClock.now + .seconds(120)) } }
        defer { for task in running { task.cancel() } }
        let devices = [streamed, listening, writer]
        // Every replicator is live (its first round done): a device write reaches the others.
        try writer.put("hello", "ready")
        #expect(await eventuallyAsync(60) { devices.allSatisfy { (try? $0.notes.get("ready")) == "hello" } })

        // Live delivery: the time from the write's answer to each device's store.
        for round in 0..<3 {
            let value = "from the server \(round)"
            let started = ContinuousClock.now
            let result = try await SyncBackend.put(json: "\"\(value)\"", group: group, name: "notes", key: Array("live".utf8), author: "svc", on: backend)
            #expect(result.outcome == .applied)
            var reached: [String] = []
            for (name, device) in [("gateway stream", streamed), ("direct LISTEN", listening)] {
                #expect(await eventuallyAsync(30) { (try? device.notes.get("live")) == value }, "\(name)")
                reached.append("\(name) \(ContinuousClock.now - started)")
            }
            print("[backend] a server write reached live devices (poll 600 s): \(reached.joined(separator: ", "))")
        }

        // Concurrent writes of one key: every device and the server end with the same value, the
        // later clock's (device id breaks a tie).
        for round in 0..<4 {
            let key = "race\(round)"
            async let serverWrite = SyncBackend.put(json: "\"server \(round)\"", group: group, name: "notes", key: Array(key.utf8), author: "svc", on: backend)
            try writer.put("device \(round)", key)
            _ = try await serverWrite
            let prefix = Array(key.utf8).hex + ":"
            let settled = await eventuallyAsync(60) {
                guard let server = try? cluster.storedNotes(group: group).first(where: { $0.hasPrefix(prefix) }) else { return false }
                return devices.allSatisfy { ((try? $0.storedNotes()) ?? []).first(where: { $0.hasPrefix(prefix) }) == server }
            }
            #expect(settled, "\(key): \(devices.map { try? $0.notes.get(key) })")
            // The rule's pick: the greater (clock, device) of the two writes in the log.
            let writes = try await offPool {
                try cluster.psql("SELECT hlc, device, encode(value, 'hex') FROM kvsync_changes WHERE group_id = '\(group)' AND key = '\\x\(Array(key.utf8).hex)' ORDER BY hlc, device")
            }.split(separator: "\n")
            let winner = writes.last.map { String($0.split(separator: "|")[2]) }
            let final = try cluster.storedNotes(group: group).first(where: { $0.hasPrefix(prefix) })
            #expect(final.map { String($0.split(separator: ":")[1]) } == winner, "\(key): \(writes) → \(String(describing: final))")
            print("[backend] \(key): \(writes.count) writes in the log; every device holds \(String(describing: try? writer.notes.get(key)))")
        }

        // A device that wrote the key offline after the server's write (a later clock) wins it on every device.
        let offline = try Device(group: group)
        _ = try await SyncBackend.put(json: "\"server first\"", group: group, name: "notes", key: Array("late".utf8), author: "svc", on: backend)
        try offline.put("the later device write", "late")
        #expect(try await offline.kvtoolOffPool(["sync", "run", "--once", "--server", cluster.tcpURL.description]).status == 0)
        #expect(await eventuallyAsync(30) { (devices + [offline]).allSatisfy { (try? $0.notes.get("late")) == "the later device write" } })

        // A JSON value `notes` (String values) cannot decode: quarantined on each device with the reason.
        let bad = try await SyncBackend.put(json: "{\"not\": \"a string\"}", group: group, name: "notes", key: Array("shape".utf8), author: "svc", on: backend)
        #expect(bad.outcome == .applied)
        for device in devices {
            #expect(await eventuallyAsync(30) { ((try? Replication.quarantine(of: device.container)) ?? []).contains { $0.key == Array("shape".utf8) } })
            let held = try Replication.quarantine(of: device.container).first { $0.key == Array("shape".utf8) }
            #expect(held?.device == "server:svc" && held?.reason.isEmpty == false, "\(String(describing: held))")
            #expect(try device.notes.get("shape") == nil)
        }
        print("[backend] quarantined: \(try Replication.quarantine(of: streamed.container).first { $0.key == Array("shape".utf8) }?.reason ?? "-")")
        let later = try await SyncBackend.put(json: "\"after\"", group: group, name: "notes", key: Array("later".utf8), author: "svc", on: backend)
        #expect(later.outcome == .applied)
        #expect(await eventuallyAsync(30) { devices.allSatisfy { (try? $0.notes.get("later")) == "after" } })
        // Each replicator ends and closes its connection (one left open at exit is a leak to AddressSanitizer).
        for task in running { task.cancel() }
        for task in running { _ = try? await task.value }
        for replicator in replicators { await replicator.close() }
    }
}

extension [UInt8] {
    /// Lower-case hex, as PostgreSQL's `encode(…, 'hex')` writes it.
    var hex: String { map { String(format: "%02x", $0) }.joined() }
}
#endif
