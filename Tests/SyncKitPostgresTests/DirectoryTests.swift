#if PostgreSQL
import Foundation
import KVStore
import SyncKit
@testable import SyncKitPostgres
@testable import PostgresTesting
import SyncTestSupport
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Several databases behind one gateway (issue 51, part 7): the home database's directory places each
/// group in a database, the gateway holds a pool, a `LISTEN` and a revocation sweep per database, and
/// each group's pushes, pulls and live streams go to its own database only. Real clusters, a real
/// `kvtool sync gateway` process and real devices.
@Suite(.serialized, .oneServerFleetAtATime) struct DirectoryTests {
    static func group(_ name: String) -> String { GatewayTests.group(name) }

    /// `SELECT count(*) FROM kvsync_changes` of `group` in `cluster`.
    static func changes(of group: String, in cluster: LocalPostgresCluster) async throws -> Int {
        try await offPool { try cluster.count("SELECT count(*) FROM kvsync_changes WHERE group_id = '\(group)'") }
    }

    /// Two clusters, one gateway: a group placed in the second (`kvtool sync directory set`) pushes and
    /// pulls there and only there, a group left in the home database there only; both groups' live
    /// streams wake; a group placed in a database the gateway was not given is refused with a line that
    /// names it; and with the second cluster stopped, the home group still syncs and wakes while the
    /// other's requests are refused at once.
    @Test func eachGroupSyncsWithTheDatabaseTheDirectoryPlacesItIn() async throws {
        let started = ContinuousClock.now
        let home = try await offPool { try LocalPostgresCluster() }
        let other = try await offPool { try LocalPostgresCluster() }
        defer { try? other.stop(immediate: true) }
        let otherURL = try await other.prepareForGateways()
        let (atHome, elsewhere, nowhere, held) = (Self.group("dir-home"), Self.group("dir-b"), Self.group("dir-nowhere"), Self.group("dir-held"))
        // The owner places the groups in the home database's directory (which the command migrates).
        for (group, name) in [(elsewhere, "b"), (nowhere, "nowhere")] {
            let placed = try await kvtoolRun(["sync", "directory", "set", "--database", home.tcpURL.description, "--group", group, "--in", name])
            #expect(placed.status == 0, "\(placed.stderr)")
        }
        let holding = try await kvtoolRun(["sync", "directory", "hold", "--database", home.tcpURL.description, "--group", held])
        #expect(holding.status == 0, "\(holding.stderr)")
        // A name is never an address: refused, nothing written.
        let address = try await kvtoolRun(["sync", "directory", "set", "--database", home.tcpURL.description, "--group", held, "--in", otherURL.description])
        #expect(address.status == 64 && address.stderr.contains("never its URL"), "\(address.status) \(address.stderr)")
        let listed = try await kvtoolRun(["sync", "directory", "list", "--database", home.tcpURL.description])
        #expect(listed.stdout.split(separator: "\n").sorted() == ["\(elsewhere) b", "\(held) held", "\(nowhere) nowhere"].sorted(), "\(listed.stdout)")
        let (gateway, url) = try await startGateway(home, extra: ["--group-database", "b=\(otherURL)"])
        defer { gateway.kill(SIGKILL) }
        // Credentials live with their group's data.
        let homeToken = try await issueToken(home, ["--group", atHome])
        let otherToken = try await issueToken(other, ["--group", elsewhere])
        let homeFollower = try GatewayLiveTests.LiveFollower(url, token: homeToken, group: atHome)
        let otherFollower = try GatewayLiveTests.LiveFollower(url, token: otherToken, group: elsewhere)
        #expect(await eventuallyAsync(30) { homeFollower.count == 1 && otherFollower.count == 1 }, "the live streams did not open")

        for (group, token) in [(atHome, homeToken), (elsewhere, otherToken)] {
            let writer = try Device(group: group)
            try writer.put("written in \(group)", "k")
            let pushed = try await writer.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token", token])
            #expect(pushed.status == 0, "\(pushed.stderr)")
            // Another device of the group pulls it through the same gateway.
            let reader = try Device(group: group)
            let pulled = try await reader.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token", token])
            #expect(pulled.status == 0, "\(pulled.stderr)")
            #expect(try reader.notes.get("k") == "written in \(group)")
        }
        // Each group's rows are in its own database, and none in the other.
        #expect(try await Self.changes(of: atHome, in: home) == 1)
        #expect(try await Self.changes(of: atHome, in: other) == 0)
        #expect(try await Self.changes(of: elsewhere, in: other) == 1)
        #expect(try await Self.changes(of: elsewhere, in: home) == 0)
        // Both live streams woke (each database's LISTEN).
        #expect(await eventuallyAsync(30) { homeFollower.count == 2 && otherFollower.count == 2 },
                "home \(homeFollower.count), other \(otherFollower.count)")

        // A group placed in a database the gateway was not given: refused, in a line naming it.
        let lost = try GatewayConnection(url: SyncGatewayURL(url), token: try await issueToken(home, ["--group", nowhere]), group: nowhere,
                                         maxValueBytes: 1 << 20, operationTimeout: .seconds(30), connectTimeout: .seconds(10))
        await #expect { _ = try await lost.hello() } throws: { "\($0)".contains("'nowhere'") && "\($0)".contains("--group-database nowhere=URL") }
        // A group held while it moves: refused, to be tried again.
        let moving = try GatewayConnection(url: SyncGatewayURL(url), token: try await issueToken(home, ["--group", held]), group: held,
                                           maxValueBytes: 1 << 20, operationTimeout: .seconds(30), connectTimeout: .seconds(10))
        await #expect { _ = try await moving.hello() } throws: { "\($0)".contains("being moved") }

        // The second database stops: the home group keeps syncing and waking; the other is refused at once.
        try await offPool { try other.stop(immediate: true) }
        let stopped = ContinuousClock.now
        let writer = try Device(group: atHome)
        try writer.put("after the other database stopped", "k2")
        let pushed = try await writer.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token", homeToken])
        #expect(pushed.status == 0, "\(pushed.stderr)")
        #expect(try await Self.changes(of: atHome, in: home) == 2)
        #expect(await eventuallyAsync(30) { homeFollower.count == 3 }, "the home group's stream did not wake: \(homeFollower.count)")
        print("[directory] with the other database stopped, a push of the home group and its wake-up took \(ContinuousClock.now - stopped)")
        let cut = try GatewayConnection(url: SyncGatewayURL(url), token: otherToken, group: elsewhere,
                                        maxValueBytes: 1 << 20, operationTimeout: .seconds(30), connectTimeout: .seconds(10))
        let asked = ContinuousClock.now
        await #expect { _ = try await cut.hello() } throws: { "\($0)".contains("cannot reach its database") }
        print("[directory] the stopped database's group was refused in \(ContinuousClock.now - asked); the test took \(ContinuousClock.now - started)")
        homeFollower.task.cancel()
        otherFollower.task.cancel()
        await lost.close()
        await moving.close()
        await cut.close()
    }
}
#endif
