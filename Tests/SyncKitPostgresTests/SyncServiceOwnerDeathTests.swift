#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import PostgresTesting
import TestSupport
import SyncTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A request waiting when the owner of sync dies, with no standby: the request itself starts the
/// registered agent, which sends the write (issue 38's "what happens to a request when the owner dies").
@Suite struct SyncServiceOwnerDeathTests {
    @Test func aRequestWaitingWhenTheOwnerDiesIsAnsweredByTheAgentItStarts() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = SyncServiceTests.group("owner-dies")
        let device = try Device(group: group)
        // The agent reaches the server; the live owner cannot (its rounds fail), so the request waits.
        let set = try await device.kvtoolOffPool(["sync", "agent", "set", "--server", cluster.tcpURL.description])
        #expect(set.status == 0, "\(set.stderr)")
        let owner = try await SyncServiceTests.liveOwner(device, SyncServiceTests.deadServer)
        try device.put("written while the owner cannot push", "k")
        let wait = Int(BuildScale.seconds(60))
        let request = try device.kvtoolInBackground(["sync", "request", "--wait", "\(wait)", "--json"])
        // The request waits (its post woke the owner, whose round fails again), then the owner dies.
        let service = try SyncService(container: device.container)
        let failed = try await offPool {
            try eventually(BuildScale.seconds(60), every: 20_000) { try service.status().lastError?.reason == .unreachable }
        }
        #expect(failed, "the owner's rounds did not fail as expected")
        #expect(SyncServiceTests.agentLog(device).isEmpty, "an agent started while the owner lived")
        owner.kill(SIGKILL)
        let answered = try await offPool { request.wait(timeout: Double(wait) + BuildScale.seconds(30)) }
        let printed = answered.lines.joined(separator: "\n")
        #expect(answered.status == 0, "\(printed) \(answered.stderr)")
        #expect(SyncServiceTests.json(printed)?["outcome"] as? String == "acknowledged", "\(printed)")
        #expect(try await offPool { try cluster.storedNotes(group: group).count } == 1)
        // The agent prints its round when it exits, idle.
        try await SyncServiceTests.waitForNoOwner(device)
        #expect(SyncServiceTests.agentLog(device).hasPrefix("pushed 1,"), "no agent pushed: \(SyncServiceTests.agentLog(device))")
    }
}
#endif
