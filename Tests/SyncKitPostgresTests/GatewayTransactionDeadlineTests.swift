#if PostgreSQL
import Foundation
import KVStore
import Logging
import PostgresNIO
@testable import SyncGateway
import SyncKit
@testable import SyncKitPostgres
import SyncWire
import PostgresTesting
import TestSupport
import SyncTestSupport
import Testing

/// A gateway request's transaction has a deadline of its own (``SyncGateway/Limits/transactionTimeout``),
/// and a request whose connection closes under it is answered at once (issue 51's failover: a request
/// in flight at the primary's `kill -9` once waited 120 s, the device's own timeout). Real PostgreSQL,
/// a gateway in this process, raw pushes; the group's row is held locked by another session, so the
/// push's transaction waits on the server for as long as the test wants.
@Suite(.serialized) struct GatewayTransactionDeadlineTests {
    static let logger = Logger(label: "test.deadline")

    static func change(_ key: String, token: UInt64) -> OutgoingChange { WakeUpTests.change(key, token: token) }

    /// A raw push of one change (`key`, `token`) as the credential's device.
    static func push(_ url: String, _ token: String, group: String, key: String, change: UInt64) async throws -> RawHTTP.Answer {
        let body = GatewayPushRequest(device: "", changes: [Self.change(key, token: change)]).encoded()
        let headers = ["Authorization: Bearer \(token)", "\(GatewayWire.groupHeader): \(group)"]
        return try await offPool { try RawHTTP.request(url, "POST /v1/push", headers: headers, body: body) }
    }

    /// A push that no lock holds back, accepted (200): tried again while it is answered 503, as a device
    /// would, so that a loaded machine's slow transaction cannot pass the test's short deadline.
    static func accepted(_ url: String, _ token: String, group: String, key: String, change: UInt64) async throws -> RawHTTP.Answer {
        var answer = try await push(url, token, group: group, key: key, change: change)
        let deadline = ContinuousClock.now + .seconds(60)
        while answer.status == 503, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(200))
            answer = try await push(url, token, group: group, key: key, change: change)
        }
        return answer
    }

    /// Another session holding `group`'s row locked (as a push holds it), until `release`.
    struct GroupLock {
        let connection: ServerConnection
        init(_ cluster: LocalPostgresCluster, group: String) async throws {
            connection = try await ServerConnection.connect(cluster.tcpURL, logger: GatewayTransactionDeadlineTests.logger, maxValueBytes: 1 << 20)
            try await connection.connection.query("BEGIN", logger: GatewayTransactionDeadlineTests.logger)
            try await connection.connection.query("SELECT 1 FROM kvsync_groups WHERE group_id = \(group) FOR UPDATE",
                                                  logger: GatewayTransactionDeadlineTests.logger)
        }
        func release() async throws {
            try await connection.connection.query("ROLLBACK", logger: GatewayTransactionDeadlineTests.logger)
            await connection.close()
        }
    }

    /// Backends waiting for a lock (the gateway's push, behind the test's `GroupLock`).
    static func waiting(_ cluster: LocalPostgresCluster) async throws -> Int {
        try await offPool { try cluster.count("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") }
    }

    static func logged(_ cluster: LocalPostgresCluster, group: String) async throws -> Int {
        try await offPool { try cluster.count("SELECT count(*) FROM kvsync_changes WHERE group_id = '\(group)'") }
    }

    /// Past the deadline the device gets 503 with `Retry-After`, and the transaction's connection is
    /// closed: the push it held never commits (PostgreSQL rolls it back once its statement gets the
    /// lock and finds its client gone), and sent again after, it is applied once.
    @Test func aTransactionPastItsDeadlineIsAnswered503AndRolledBack() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = GatewayTests.group("deadline")
        var options = SyncGateway.Options()
        options.limits.transactionTimeout = .seconds(2)
        let (gateway, url, running) = try await WakeUpTests.gateway(cluster, options)
        let token = try await SyncTokens.issue(on: cluster.tcpURL, group: group, device: "d1").token
        let first = try await Self.accepted(url, token, group: group, key: "k1", change: 1)
        #expect(first.status == 200, "\(first.status) \(first.text)")

        let lock = try await GroupLock(cluster, group: group)
        let started = ContinuousClock.now
        let held: RawHTTP.Answer
        do {
            held = try await Self.push(url, token, group: group, key: "k2", change: 2)
        } catch {
            // (No answer within the client's 30 s: the lock's session is closed all the same.)
            try await lock.release()
            throw error
        }
        let took = ContinuousClock.now - started
        print("GatewayTransactionDeadlineTests: a push behind a held lock was answered \(held.status) after \(took): \(held.text)")
        #expect(held.status == 503, "\(held.status) \(held.text)")
        #expect(held.header("Retry-After") != nil)
        #expect(held.text.contains("did not finish this request within 2 s"), "\(held.text)")
        #expect(took >= .seconds(2))
        try await lock.release()
        // The abandoned statement, once it has the lock, finds its connection closed: rolled back.
        #expect(await eventuallyAsync(30) { (try? await Self.waiting(cluster)) == 0 }, "the abandoned push still waits on the server")
        #expect(await eventuallyAsync(30) {
            (try? await offPool { try cluster.count("SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND (state LIKE 'idle in transaction%' OR (state = 'active' AND query LIKE '%kvsync_push%'))") }) == 0
        }, "the abandoned push's transaction is still open")
        #expect(try await Self.logged(cluster, group: group) == 1)
        // Sent again, it is applied (it never was), once.
        let again = try await Self.accepted(url, token, group: group, key: "k2", change: 2)
        #expect(again.status == 200, "\(again.status) \(again.text)")
        #expect(try await Self.logged(cluster, group: group) == 2)

        gateway.shutdown()
        try await running.value
    }

    /// A request whose connection closes under it (its backend terminated, as a dying primary closes
    /// them) is answered 503 with `Retry-After` at once, not when some timeout passes.
    @Test func aTransactionWhoseConnectionClosesIsAnswered503AtOnce() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = GatewayTests.group("closed-under")
        let (gateway, url, running) = try await WakeUpTests.gateway(cluster, SyncGateway.Options())
        let token = try await SyncTokens.issue(on: cluster.tcpURL, group: group, device: "d1").token
        let first = try await Self.accepted(url, token, group: group, key: "k1", change: 1)
        #expect(first.status == 200, "\(first.status) \(first.text)")

        let lock = try await GroupLock(cluster, group: group)
        let pending = Task { try await Self.push(url, token, group: group, key: "k2", change: 2) }
        #expect(await eventuallyAsync(30) { (try? await Self.waiting(cluster)) == 1 }, "the push never waited for the lock")
        let started = ContinuousClock.now
        let terminated = try await offPool {
            try cluster.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
        }
        #expect(terminated.split(separator: "\n") == ["t"], "\(terminated)")
        let answered = await pending.result
        let took = ContinuousClock.now - started
        try await lock.release()
        let answer = try answered.get()
        print("GatewayTransactionDeadlineTests: a push whose connection was closed under it was answered \(answer.status) after \(took): \(answer.text)")
        #expect(answer.status == 503, "\(answer.status) \(answer.text)")
        #expect(answer.header("Retry-After") != nil)
        #expect(took < .seconds(30), "answered only after \(took)")
        let again = try await Self.accepted(url, token, group: group, key: "k2", change: 2)
        #expect(again.status == 200, "\(again.status) \(again.text)")
        #expect(try await Self.logged(cluster, group: group) == 2)

        gateway.shutdown()
        try await running.value
    }
}
#endif
