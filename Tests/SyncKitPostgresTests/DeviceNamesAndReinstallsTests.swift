#if PostgreSQL
import Crypto
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import SyncTestSupport
import PostgresTesting
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A device's name is the credential's, and a container is an install of its own (issue 46, finding 7
/// and part of 9): a name issued again after a revocation, and a JWT's `sub`, sync from a new container
/// (the app installed again) while the old container's rows stay in the log; the old container, given
/// the new credential, still syncs as itself; a second live token for one name is issued with a warning
/// that names the first. Real `kvtool` processes, a real gateway and a throwaway cluster.
@Suite(.serialized) struct DeviceNamesAndReinstallsTests {
    static func group(_ name: String) -> String { "group.com.example.reinstall.\(name)" }

    static func lines(_ text: String) -> [Substring] { text.split(separator: "\n", omittingEmptySubsequences: true) }

    /// `kvtool sync run --once` through `url` with `token`.
    static func sync(_ device: Device, _ url: String, _ token: String) async throws -> ProcessResult {
        try await device.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token", token])
    }

    /// The issue's scenario: `sync token revoke --device bob`, a new `token issue --device bob`, and
    /// bob's new container syncs (on the code before, it was refused for good: "this device id is in use
    /// by another container", as long as bob's rows stayed in the log).
    @Test func aNameIssuedAgainSyncsFromANewContainer() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("reissued")
        let (gateway, url) = try await startGateway(cluster)
        defer { gateway.kill(SIGKILL) }
        let database = cluster.tcpURL.description
        let alice = try Device(group: group)
        let aliceToken = try await issueToken(cluster, ["--group", group, "--device", "alice"])

        // bob's first container writes and syncs: its history tokens 1 to 3 are in the log.
        let first = try Device(group: group)
        let firstToken = try await issueToken(cluster, ["--group", group, "--device", "bob"])
        for index in 0..<3 { try first.put("first \(index)", "k\(index)") }
        let synced = try await Self.sync(first, url, firstToken)
        #expect(synced.status == 0, "\(synced.stdout)\(synced.stderr)")

        // The phone is lost: bob's credentials are revoked, and a new one is issued under the same name.
        let revoke = try await kvtoolRun(["sync", "token", "revoke", "--database", database, "--device", "bob", "--group", group])
        #expect(revoke.status == 0 && revoke.stdout.contains("revoked 1 credential"), "\(revoke.stdout)\(revoke.stderr)")
        let refused = try await Self.sync(first, url, firstToken)
        #expect(refused.status == 77 && refused.stderr.contains("was revoked"), "\(refused.stderr)")
        let issued = try await kvtoolRun(["sync", "token", "issue", "--database", database, "--group", group, "--device", "bob"])
        #expect(issued.status == 0 && issued.stderr.isEmpty, "the revoked credential is no live one to warn of: \(issued.stderr)")
        let secondToken = issued.stdout.trimmingCharacters(in: .newlines)
        let logBefore = try await offPool { try cluster.psql("SELECT device || '|' || token FROM kvsync_changes ORDER BY seq") }

        // bob's new container (the app installed again) writes other values under the same history tokens.
        let second = try Device(group: group)
        for index in 0..<3 { try second.put("second \(index)", "n\(index)") }
        let joined = try await Self.sync(second, url, secondToken)
        #expect(joined.status == 0 && joined.stdout.contains("pushed 3,"), "\(joined.status) \(joined.stdout)\(joined.stderr)")
        #expect(try second.status().pendingChanges == 0)
        #expect(try second.notes.get("k0") == "first 0", "the new container did not get what the first one wrote")
        // Its device id is its own: bob's, and not the first container's. The first's rows are untouched.
        let firstID = try #require(try first.status().device), secondID = try #require(try second.status().device)
        #expect(firstID.hasPrefix("bob#") && secondID.hasPrefix("bob#") && firstID != secondID, "\(firstID) \(secondID)")
        let logAfter = try await offPool { try cluster.psql("SELECT device || '|' || token FROM kvsync_changes ORDER BY seq") }
        #expect(logAfter.hasPrefix(logBefore), "the first container's rows changed")

        // Not once only: its next write syncs, and reaches the others.
        try second.put("second again", "k0")
        let again = try await Self.sync(second, url, secondToken)
        #expect(again.status == 0 && again.stdout.contains("pushed 1,"), "\(again.stdout)\(again.stderr)")
        #expect(try await Self.sync(alice, url, aliceToken).status == 0)
        #expect(try alice.notes.get("k0") == "second again" && alice.notes.get("k1") == "first 1" && alice.notes.get("n2") == "second 2")

        // The lost phone is found and given the new credential (a rotation, not a reinstall): it syncs as
        // itself, its next tokens after its own.
        try first.put("found again", "f")
        let found = try await Self.sync(first, url, secondToken)
        #expect(found.status == 0 && found.stdout.contains("pushed 1,"), "\(found.stdout)\(found.stderr)")
        #expect(try first.status().device == firstID)
        for device in [second, alice] { _ = try await Self.sync(device, url, device === alice ? aliceToken : secondToken) }
        let server = try await offPool { try cluster.storedNotes(group: group) }
        for device in [first, second, alice] { #expect(try device.storedNotes() == server) }
    }

    /// A JWT's `sub` is its device's name: the app installed again (a new container) gets a JWT with the
    /// same `sub` and syncs, beside the rows its first install left.
    @Test func aJWTsSubjectSyncsFromAReinstalledApp() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("jwt")
        let keys = TemporaryDirectory()
        let secret = Array("a shared secret of at least thirty-two bytes".utf8)
        try Data(secret).write(to: URL(fileURLWithPath: keys.path + "/secret"))
        #expect(chmod(keys.path + "/secret", 0o600) == 0)   // a secret others can read is refused
        let (gateway, url) = try await startGateway(cluster, extra: ["--jwt-hs256-secret-file", keys.path + "/secret"])
        defer { gateway.kill(SIGKILL) }
        func jwt() -> String {
            let now = Int(Date().timeIntervalSince1970)
            return GatewayTests.jwt("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", "{\"group\":\"\(group)\",\"sub\":\"user-1\",\"iat\":\(now),\"exp\":\(now + 3600)}") {
                Array(HMAC<Crypto.SHA256>.authenticationCode(for: $0, using: SymmetricKey(data: secret)))
            }
        }
        let installed = try Device(group: group)
        for index in 0..<3 { try installed.put("install 1, \(index)", "k\(index)") }
        let first = try await Self.sync(installed, url, jwt())
        #expect(first.status == 0, "\(first.stdout)\(first.stderr)")

        let reinstalled = try Device(group: group)
        for index in 0..<3 { try reinstalled.put("install 2, \(index)", "n\(index)") }
        let joined = try await Self.sync(reinstalled, url, jwt())
        #expect(joined.status == 0 && joined.stdout.contains("pushed 3,"), "\(joined.status) \(joined.stdout)\(joined.stderr)")
        let ids = (try installed.status().device ?? "", try reinstalled.status().device ?? "")
        #expect(ids.0.hasPrefix("user-1#") && ids.1.hasPrefix("user-1#") && ids.0 != ids.1, "\(ids)")
        #expect(try await Self.sync(installed, url, jwt()).status == 0)
        let server = try await offPool { try cluster.storedNotes(group: group) }
        #expect(server.count == 6)
        for device in [installed, reinstalled] { #expect(try device.storedNotes() == server) }
    }

    /// The direct path: a container's device id is made for it (random, once, and again for a copy), so
    /// a container made again for the same group syncs beside the rows of the one before. (This held
    /// before issue 46 too; it is the behaviour the gateway's installs now match.)
    @Test func aContainerMadeAgainSyncsOnTheDirectPath() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("direct")
        let server = cluster.tcpURL.description
        let installed = try Device(group: group)
        for index in 0..<3 { try installed.put("install 1, \(index)", "k\(index)") }
        #expect(try await installed.kvtoolOffPool(["sync", "run", "--once", "--server", server]).status == 0)
        let reinstalled = try Device(group: group)
        for index in 0..<3 { try reinstalled.put("install 2, \(index)", "n\(index)") }
        let joined = try await reinstalled.kvtoolOffPool(["sync", "run", "--once", "--server", server])
        #expect(joined.status == 0 && joined.stdout.contains("pushed 3,"), "\(joined.stdout)\(joined.stderr)")
        #expect(try installed.status().device != reinstalled.status().device)
        #expect(try await installed.kvtoolOffPool(["sync", "run", "--once", "--server", server]).status == 0)
        let stored = try await offPool { try cluster.storedNotes(group: group) }
        for device in [installed, reinstalled] { #expect(try device.storedNotes() == stored) }
    }

    /// A second token for a device that has a live one is issued, with one line on standard error that
    /// names the first by its id and issue time (never a token); a revoked or another device's token is
    /// not named.
    @Test func aSecondTokenForADeviceWarnsAndNamesTheFirst() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("second-token")
        let database = cluster.tcpURL.description
        func issue(_ arguments: [String]) async throws -> ProcessResult {
            try await kvtoolRun(["sync", "token", "issue", "--database", database, "--group", group] + arguments)
        }
        struct Listed: Decodable { var id: Int64; var device: String?; var createdAt: String; var revokedAt: String? }
        func listed() async throws -> [Listed] {
            let list = try await kvtoolRun(["sync", "token", "list", "--database", database, "--group", group, "--json"])
            return try JSONDecoder().decode([Listed].self, from: Data(list.stdout.utf8))
        }
        let first = try await issue(["--device", "bob"])
        #expect(first.status == 0 && first.stderr.isEmpty, "\(first.stderr)")
        let firstToken = first.stdout.trimmingCharacters(in: .newlines)
        let firstRow = try #require(try await listed().last)

        let second = try await issue(["--device", "bob"])
        #expect(second.status == 0, "\(second.stderr)")
        let secondToken = second.stdout.trimmingCharacters(in: .newlines)
        #expect(Self.lines(second.stdout).count == 1 && secondToken.hasPrefix("kvs1_") && secondToken != firstToken, "\(second.stdout)")
        #expect(second.stderr == """
            kvtool: warning: device bob of \(group) already has a live credential: id \(firstRow.id), issued \(firstRow.createdAt); \
            the new one works beside it until one is revoked (kvtool sync token revoke --id \(firstRow.id))

            """, "\(second.stderr)")
        #expect(!second.stderr.contains(firstToken) && !second.stderr.contains(secondToken))
        let secondRow = try #require(try await listed().last)

        // A third names both; the rows are all there, none revoked.
        let third = try await issue(["--device", "bob", "--read-only"])
        #expect(third.status == 0, "\(third.stderr)")
        #expect(third.stderr == """
            kvtool: warning: device bob of \(group) already has 2 live credentials: id \(firstRow.id), issued \(firstRow.createdAt); \
            id \(secondRow.id), issued \(secondRow.createdAt); the new one works beside them until they are revoked \
            (kvtool sync token revoke --id ID)

            """, "\(third.stderr)")
        #expect(try await listed().filter { $0.device == "bob" && $0.revokedAt == nil }.count == 3)

        // A revoked one is no longer named; another name, or none, warns of nothing.
        let revoke = try await kvtoolRun(["sync", "token", "revoke", "--database", database, "--id", "\(firstRow.id)"])
        #expect(revoke.status == 0, "\(revoke.stderr)")
        let fourth = try await issue(["--device", "bob"])
        #expect(fourth.status == 0 && fourth.stderr.contains("already has 2 live credentials: id \(secondRow.id),")
                && !fourth.stderr.contains("id \(firstRow.id),"), "\(fourth.stderr)")
        for arguments in [["--device", "alice"], []] {
            let other = try await issue(arguments)
            #expect(other.status == 0 && other.stderr.isEmpty, "\(arguments): \(other.stderr)")
        }
    }
}
#endif
