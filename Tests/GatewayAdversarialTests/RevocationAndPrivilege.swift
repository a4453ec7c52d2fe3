#if PostgreSQL
import Foundation
import KVStore
import SyncKit
@testable import SyncKitPostgres
import SyncTestSupport
import SyncWire
import PostgresTesting
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A stolen credential's stream outlives no revocation, and the gateway's own login can do no more
/// than a gateway needs.
@Suite(.serialized) struct RevocationAndPrivilege {
    /// Follows a live stream with `token` until it ends; what it ended with.
    static func follow(_ url: String, _ token: String, _ group: String, opened: Locked<Int>) -> Task<(any Error)?, Never> {
        Task {
            do {
                try await SyncGatewayClient.followChanges(gateway: try SyncGatewayURL(url), token: token, group: group) {
                    opened.withLock { $0 += 1 }
                }
                return nil
            } catch {
                return error
            }
        }
    }

    /// The gateway's connection to its database is cut (packets dropped, no reset) for 30 s while the
    /// owner revokes a credential and deletes another; once the network heals, both streams close
    /// (within about a second here, bounded at 15): the gateway follows revocations by a cursor, not a
    /// time window.
    @Test func revocationsMadeWhileTheGatewaysDatabaseWasUnreachableCloseTheirStreams() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = "group.com.example.adversary.revoke-outage"
        try await cluster.prepareForGateways()
        let proxy = try FaultProxy(to: cluster.port)
        defer { proxy.stop() }
        let database = "postgres://\(LocalPostgresCluster.gatewayLogin)@127.0.0.1:\(proxy.port)/\(cluster.database)"
        let gateway = try BackgroundProcess(productsDirectory() + "/kvtool", ["sync", "gateway", "--database", database, "--listen", "127.0.0.1:0",
                                                                              "--metrics-listen", "127.0.0.1:0"])
        defer { gateway.kill(SIGKILL) }
        let url = try #require(try await offPool { gateway.waitForLine(timeout: 60) { GatewayReadyLine($0) != nil } }.flatMap(GatewayReadyLine.init)).url
        let revoked = try await issueToken(cluster, ["--group", group, "--device", "stolen"])
        let deleted = try await issueToken(cluster, ["--group", group, "--device", "lost"])
        let opened = Locked(0)
        let streams = [Self.follow(url, revoked, group, opened: opened), Self.follow(url, deleted, group, opened: opened)]
        #expect(await eventuallyAsync(30) { opened.withLock { $0 } == 2 })
        proxy.set(.blackHole)
        #expect(try await SyncTokens.revoke(on: cluster.tcpURL, device: "stolen", group: group) == 1)
        try await offPool { _ = try cluster.psql("DELETE FROM kvsync_tokens WHERE device = 'lost'") }
        try await Task.sleep(for: .seconds(30))
        proxy.heal()
        let healed = ContinuousClock.now
        for stream in streams {
            guard let ended = await outcome(of: stream, within: BuildScale.seconds(30)) else {
                Issue.record("a revoked or deleted credential's stream was still open 30 s after the network healed")
                continue
            }
            #expect("\(String(describing: ended))".contains("revoked"), "\(String(describing: ended))")
        }
        let took = ContinuousClock.now - healed
        print("[adversary] after a 30 s outage of the gateway's database, the revoked and deleted credentials' streams closed \(took) after it healed")
        // About a second on a quiet machine (the figure above); the bound is wider because the pool's
        // black-holed connections time out and reconnect on a loaded one (5.8 s once, with make test's
        // suites in parallel on two cores). The streams closing at all is asserted above.
        #expect(took < .seconds(BuildScale.seconds(15)), "\(took)")
    }

    /// The gateway refuses to start as the owner (here also a superuser), or as a member of
    /// kvsync_gateway that bypasses row-level security, unless told to; as its own login it starts,
    /// and that login reads no credential, deletes nothing and changes no setting.
    @Test func theGatewayRunsAsAMemberOfKvsyncGatewayOnlyAndThatLoginCanDoNoMore() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        // A database nobody set up: the gateway says what to run.
        let bare = try await offPool {
            try run(productsDirectory() + "/kvtool", ["sync", "gateway", "--database", cluster.tcpURL.description, "--listen", "127.0.0.1:0",
                                                      "--metrics-listen", "127.0.0.1:0", "--allow-privileged-role"], timeout: 60)
        }
        #expect(bare.status != 0 && bare.stderr.contains("no kvsync schema") && bare.stderr.contains("kvtool sync setup"), "\(bare.stderr)")
        let setup = try await kvtoolRun(["sync", "setup", "--database", cluster.tcpURL.description, "--gateway-login", "gw", "--json"])
        #expect(setup.status == 0 && setup.stdout.contains("\"createdLogin\":true"), "\(setup.stdout)\(setup.stderr)")
        let again = try await kvtoolRun(["sync", "setup", "--database", cluster.tcpURL.description, "--gateway-login", "gw", "--json"])
        #expect(again.status == 0 && again.stdout.contains("\"createdLogin\":false"), "\(again.stdout)\(again.stderr)")
        // A login name is a plain identifier (it is never spliced into a statement anyway), and a
        // privileged role is not made a gateway's login.
        for name in ["gw; DROP TABLE kvsync_tokens", "Gateway", "kvsync_gateway", "pg_gw", ""] {
            let bad = try await kvtoolRun(["sync", "setup", "--database", cluster.tcpURL.description, "--gateway-login", name])
            #expect(bad.status == 65 && bad.stderr.split(separator: "\n").count == 1, "\(name): \(bad.status) \(bad.stderr)")
        }
        let privileged = try await kvtoolRun(["sync", "setup", "--database", cluster.tcpURL.description, "--gateway-login", "kv"])
        #expect(privileged.status == 65 && privileged.stderr.contains("is privileged"), "\(privileged.stderr)")
        #expect(try await offPool { try cluster.count("SELECT count(*) FROM kvsync_tokens") } == 0)
        /// Starts a gateway as `url`'s login: whether it started, and what it said on stderr.
        func start(_ url: String, _ extra: [String] = []) async throws -> (started: Bool, stderr: String) {
            let process = try BackgroundProcess(productsDirectory() + "/kvtool", ["sync", "gateway", "--database", url, "--listen", "127.0.0.1:0",
                                                                                  "--metrics-listen", "127.0.0.1:0"] + extra)
            let line = try await offPool { process.waitForLine(timeout: 30) { GatewayReadyLine($0) != nil } }
            process.kill(SIGTERM)
            let result = try await offPool { process.wait(timeout: 30) }
            return (line != nil, result.stderr)
        }
        let owner = try await start(cluster.tcpURL.description)
        #expect(!owner.started && owner.stderr.contains("a superuser") && owner.stderr.contains("--allow-privileged-role"), "\(owner.stderr)")
        try await offPool {
            _ = try cluster.psql("CREATE ROLE bypasser LOGIN BYPASSRLS IN ROLE kvsync_gateway")
        }
        let bypass = try await start("postgres://bypasser@127.0.0.1:\(cluster.port)/kv")
        #expect(!bypass.started && bypass.stderr.contains("bypass row-level security"), "\(bypass.stderr)")
        #expect(try await start("postgres://bypasser@127.0.0.1:\(cluster.port)/kv", ["--allow-privileged-role"]).started)
        let stranger = try await start("postgres://nobody@127.0.0.1:\(cluster.port)/kv")
        #expect(!stranger.started, "\(stranger.stderr)")
        let own = try await start("postgres://gw@127.0.0.1:\(cluster.port)/kv")
        #expect(own.started, "\(own.stderr)")

        // What the gateway's login can do on its own, even after RESET ROLE: read no token hash, no
        // revocation, delete nothing, change no setting or schema, and see no group's rows unscoped.
        _ = try await issueToken(cluster, ["--group", "group.com.example.adversary.privilege", "--device", "d"])
        func asGateway(_ sql: String) async throws -> Result<String, any Error> {
            await Result(catching: { try await offPool { try cluster.psql("RESET ROLE; " + sql, as: "gw") } })
        }
        for sql in ["SELECT count(*) FROM kvsync_tokens", "SELECT count(*) FROM kvsync_revocations", "DELETE FROM kvsync_changes",
                    "UPDATE kvsync_schema SET max_clock_skew_ms = 999999999", "ALTER TABLE kvsync_state DISABLE ROW LEVEL SECURITY",
                    "SET ROLE kv", "CREATE ROLE escalated SUPERUSER", "DROP POLICY kvsync_group_scope ON kvsync_state"] {
            guard case .failure(let error) = try await asGateway(sql) else {
                Issue.record("the gateway's login could: \(sql)")
                continue
            }
            #expect("\(error)".contains("permission denied") || "\(error)".contains("must be owner") || "\(error)".contains("permission to"), "\(sql): \(error)")
        }
        let unscoped = try await asGateway("SELECT count(*) FROM kvsync_state")
        #expect((try? unscoped.get().trimmingCharacters(in: .whitespacesAndNewlines)) == "0")
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
#endif
