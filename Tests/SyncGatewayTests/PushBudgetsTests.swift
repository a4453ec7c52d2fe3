#if PostgreSQL
import Foundation
import KVStore
@testable import SyncGateway
import SyncWire
import Testing

/// The gateway's push budgets (``PushBudgets``) at a clock the test moves: every budget refuses with
/// its name, limit, total and wait; a refused push charges nothing; a refund gives back; the buckets
/// refill evenly over their period.
@Suite struct PushBudgetsTests {
    static func limits() -> SyncGateway.Limits {
        var limits = SyncGateway.Limits()
        limits.maxPushChanges = 100
        limits.maxPushBytes = 1_000
        limits.deviceChangesPerMinute = 150
        limits.deviceBytesPerMinute = 1_200
        limits.groupChangesPerHour = 360
        limits.groupBytesPerHour = 3_600
        return limits
    }

    @Test func eachBudgetRefusesWithItsLimitAndWaitAndRefillsOverItsPeriod() {
        let budgets = PushBudgets(Self.limits())
        let start = ContinuousClock.now
        // Per push: never fits by waiting.
        #expect(budgets.charge(device: "d", group: "g", changes: 101, bytes: 1_001, now: start)
                == [PushRefusal(.changesPerPush, limit: 100, amount: 101, retryAfter: 0),
                    PushRefusal(.bytesPerPush, limit: 1_000, amount: 1_001, retryAfter: 0)])
        // The device's bytes a minute: 1,000 then 600 more would be 1,600 of 1,200; 400 over at 20 a
        // second: 20 s.
        #expect(budgets.charge(device: "d", group: "g", changes: 10, bytes: 1_000, now: start).isEmpty)
        #expect(budgets.charge(device: "d", group: "g", changes: 10, bytes: 600, now: start)
                == [PushRefusal(.deviceBytesPerMinute, limit: 1_200, amount: 1_600, retryAfter: 20)])
        // Nothing was charged for it: 200 bytes still fit now, and after 20 s the 600 do.
        #expect(budgets.charge(device: "d", group: "g", changes: 1, bytes: 200, now: start).isEmpty)
        #expect(!budgets.charge(device: "d", group: "g", changes: 1, bytes: 600, now: start + .seconds(19)).isEmpty)
        #expect(budgets.charge(device: "d", group: "g", changes: 1, bytes: 600, now: start + .seconds(31)).isEmpty)
        // The group's hour is shared by its devices: 1,800 + 1,000 (another device) + 1,000 = 3,800 of 3,600.
        #expect(budgets.charge(device: "e", group: "g", changes: 1, bytes: 1_000, now: start + .seconds(31)).isEmpty)
        let group = budgets.charge(device: "f", group: "g", changes: 1, bytes: 1_000, now: start + .seconds(31))
        #expect(group.map(\.reason) == ["group-bytes-per-hour"] && group.first?.limit == 3_600, "\(group)")
        // Another group is not charged for it.
        #expect(budgets.charge(device: "h1", group: "h", changes: 1, bytes: 1_000, now: start + .seconds(31)).isEmpty)
        // A refund gives back (a push that failed after it was charged).
        budgets.refund(device: "e", group: "g", changes: 1, bytes: 1_000)
        #expect(budgets.charge(device: "f", group: "g", changes: 1, bytes: 1_000, now: start + .seconds(31)).isEmpty)
        // A new device of a group whose hour is spent is refused for the group's budget only.
        let spent = budgets.charge(device: "x", group: "g", changes: 100, bytes: 1_000, now: start + .seconds(31))
        #expect(spent.map(\.reason) == ["group-bytes-per-hour"], "\(spent)")
        // Changes a minute for a device: 100 of 150, then 100 more would be 200; 50 over at 2.5 a second.
        #expect(budgets.charge(device: "y", group: "k", changes: 100, bytes: 10, now: start).isEmpty)
        let minute = budgets.charge(device: "y", group: "k", changes: 100, bytes: 10, now: start)
        #expect(minute == [PushRefusal(.deviceChangesPerMinute, limit: 150, amount: 200, retryAfter: 20)], "\(minute)")
    }
}
#endif
