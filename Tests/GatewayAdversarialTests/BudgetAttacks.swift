#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import SyncTestSupport
import SyncWire
import PostgresTesting
import TestSupport
import Testing

/// What one member may add to its group's log: budgets per push, per device and minute, and per group
/// and hour, held by the gateway (its options), whoever asks (issue 47, finding 6).
@Suite(.serialized) struct BudgetAttacks {
    /// The push of the issue at the default budgets: 100,001 small changes in one request are refused
    /// whole, with the budget named (changes per push, 100,000), and nothing reaches the log; a push
    /// within it goes through.
    @Test func aHugePushIsRefusedWholeAtTheDefaultBudget() async throws {
        let arena = try await Arena("huge-push")
        let token = try await arena.token(["--device", "mallory"])
        let value = try CBOREncoder().encode("x")
        let clock = HybridTimestamp(date: Date()).rawValue
        let changes = (0..<100_001).map { index in
            OutgoingChange(kind: "collection", name: "notes", key: Array("k\(index)".utf8), value: value, clock: clock, base: 0,
                           token: UInt64(index + 1))
        }
        let answer = try await arena.push(token, changes: changes)
        #expect(answer.status == 200, "\(answer.status) \(answer.text)")
        guard case .refused(let reasons) = try GatewayPushResponse(decoding: answer.body, maxValueBytes: 1 << 20) else {
            Issue.record("a push of 100,001 changes was not refused: \(answer.body.count) bytes of answer")
            return
        }
        #expect(reasons.map(\.reason) == ["changes-per-push"], "\(reasons)")
        #expect(reasons.first?.limit == 100_000 && reasons.first?.amount == 100_001 && reasons.first?.retryAfter == 0, "\(reasons)")
        #expect(try await arena.log().isEmpty)
        // Within the budget: applied.
        let fits = try await arena.push(token, changes: Array(changes.prefix(1_000)))
        guard case .outcomes(let outcomes) = try GatewayPushResponse(decoding: fits.body, maxValueBytes: 1 << 20) else {
            Issue.record("a push of 1,000 changes was refused: \(fits.text)")
            return
        }
        #expect(outcomes.count == 1_000)
        #expect(try await arena.log().count == 1_000)
    }

    /// Small budgets set on the gateway: bytes per push; a device's changes a minute (each device its
    /// own); the group's changes an hour (every device of it together). Each refusal names its budget,
    /// its limit and when the batch fits again; a refused batch adds nothing. A device syncing past a
    /// budget says so in one line (exit 74), and its changes stay pending.
    @Test func budgetsPerPushPerDeviceAndPerGroupRefuseWholeAndNameTheirLimit() async throws {
        let arena = try await Arena("budgets", gatewayArguments: [
            "--max-push-changes", "300", "--max-push-bytes", "65536", "--device-changes-per-minute", "500",
            "--group-changes-per-hour", "800",
        ])
        let mallory = try await arena.token(["--device", "mallory"])
        let bob = try await arena.token(["--device", "bob"])
        var nextToken: UInt64 = 1
        func batch(_ count: Int, size: Int = 1) throws -> [OutgoingChange] {
            try (0..<count).map { _ in
                defer { nextToken += 1 }
                return try note("k\(nextToken)", String(repeating: "v", count: size), token: nextToken)
            }
        }
        func reasons(_ answer: RawHTTP.Answer) throws -> [PushRefusal]? {
            guard case .refused(let reasons) = try GatewayPushResponse(decoding: answer.body, maxValueBytes: 1 << 20) else { return nil }
            return reasons
        }
        // Over the bytes of one push: refused, never fits by waiting.
        let large = try await arena.push(mallory, changes: try batch(1, size: 70_000))
        let overBytes = try #require(try reasons(large), "\(large.status) \(large.text)")
        #expect(overBytes.map(\.reason) == ["bytes-per-push"] && overBytes[0].limit == 65_536 && overBytes[0].retryAfter == 0, "\(overBytes)")
        // 300 and 200 fit the device's minute (500); 300 more do not, and fit again within the minute.
        #expect(try reasons(try await arena.push(mallory, changes: try batch(300))) == nil)
        #expect(try reasons(try await arena.push(mallory, changes: try batch(200))) == nil)
        let minute = try #require(try reasons(try await arena.push(mallory, changes: try batch(300))))
        #expect(minute.map(\.reason) == ["device-changes-per-minute"] && minute[0].limit == 500, "\(minute)")
        #expect((1...60).contains(minute[0].retryAfter), "\(minute)")
        #expect(try await arena.log().count == 500)
        // Another device of the group has its own minute, but the group's hour (800) is shared.
        #expect(try reasons(try await arena.push(bob, changes: try batch(300))) == nil)
        let hour = try #require(try reasons(try await arena.push(bob, changes: try batch(100))))
        #expect(hour.map(\.reason) == ["group-changes-per-hour"] && hour[0].limit == 800 && (890...900).contains(hour[0].amount), "\(hour)")
        #expect(try await arena.log().count == 800)
        // A device of the group that syncs past the budget: one line naming it, nothing applied.
        let carol = try await arena.token(["--device", "carol"])
        let device = try Device(group: arena.group)
        try device.write { tx in
            for index in 0..<50 { try device.notes.put("n", forKey: "carol-\(index)", in: tx) }
        }
        let refused = try await arena.sync(device, carol)
        let lines = refused.stderr.split(separator: "\n")
        #expect(refused.status == 74 && lines.count == 1, "\(refused.status) \(refused.stderr)")
        #expect(refused.stderr.contains("group-changes-per-hour") && refused.stderr.contains("800"), "\(refused.stderr)")
        #expect(try await arena.log().count == 800)
        #expect(try await arena.log().allSatisfy { !$0.contains("carol") })
        // The metrics count them as refusals for a budget.
        let metricsBase = try #require(gatewayMetricsBase(arena.gateway))
        let metrics = try await offPool { try RawHTTP.request(metricsBase, "GET /metrics", headers: []) }
        #expect(metrics.text.contains("kvsync_gateway_refusals_total{reason=\"budget\"} 4"), "\(metrics.text)")
    }
}
#endif
