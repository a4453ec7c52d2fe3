#if PostgreSQL
import Foundation
import KVStore
import SyncWire

/// What a device and a group may still push (``SyncGateway/Limits/maxPushChanges`` and the others):
/// a push is charged in full before it is applied, or refused whole with every budget it would break;
/// one that then fails (the database, a refused credential) is given back. Each budget is a bucket
/// refilled evenly over its period (a minute for a device, an hour for a group), so that a device that
/// pushed its minute's worth pushes again as it refills, never all at once at a boundary.
///
/// The buckets are this gateway's: the limits come from its options (the server's settings, never a
/// request), and who is charged from the credential. Gateways that serve one database each count
/// their own pushes (a device that spreads its pushes over N gateways gets N budgets), and a restart
/// starts every bucket full.
final class PushBudgets: Sendable {
    private struct Bucket {
        var changes: Double
        var bytes: Double
        var at: ContinuousClock.Instant
    }

    private struct Buckets {
        var devices: BoundedLRU<String, Bucket>
        var groups: BoundedLRU<String, Bucket>
    }

    private let limits: SyncGateway.Limits
    private let buckets: Locked<Buckets>

    init(_ limits: SyncGateway.Limits) {
        self.limits = limits
        buckets = Locked(Buckets(devices: BoundedLRU(capacity: limits.maxRememberedPrincipals),
                                 groups: BoundedLRU(capacity: limits.maxRememberedPrincipals)))
    }

    /// Charges a push of `changes` changes and `bytes` bytes of keys and values to `device` (a
    /// principal's key) and `group`: no refusal, and the budgets charged; or every budget it would
    /// break, and nothing charged.
    func charge(device: String, group: String, changes: Int, bytes: Int, now: ContinuousClock.Instant = .now) -> [PushRefusal] {
        var refusals: [PushRefusal] = []
        if changes > limits.maxPushChanges {
            refusals.append(PushRefusal(.changesPerPush, limit: limits.maxPushChanges, amount: changes, retryAfter: 0))
        }
        if bytes > limits.maxPushBytes {
            refusals.append(PushRefusal(.bytesPerPush, limit: limits.maxPushBytes, amount: bytes, retryAfter: 0))
        }
        guard refusals.isEmpty else { return refusals }
        let limits = self.limits
        return buckets.withLock { buckets in
            let makeDevice = { Self.full(limits.deviceChangesPerMinute, limits.deviceBytesPerMinute, now) }
            let makeGroup = { Self.full(limits.groupChangesPerHour, limits.groupBytesPerHour, now) }
            var mine = buckets.devices.withValue(for: device, make: makeDevice) { $0 }
            var ours = buckets.groups.withValue(for: group, make: makeGroup) { $0 }
            Self.refill(&mine, limits.deviceChangesPerMinute, limits.deviceBytesPerMinute, period: 60, now: now)
            Self.refill(&ours, limits.groupChangesPerHour, limits.groupBytesPerHour, period: 3_600, now: now)
            var refusals: [PushRefusal] = []
            Self.check(mine.changes, Double(changes), limits.deviceChangesPerMinute, 60, .deviceChangesPerMinute, into: &refusals)
            Self.check(mine.bytes, Double(bytes), limits.deviceBytesPerMinute, 60, .deviceBytesPerMinute, into: &refusals)
            Self.check(ours.changes, Double(changes), limits.groupChangesPerHour, 3_600, .groupChangesPerHour, into: &refusals)
            Self.check(ours.bytes, Double(bytes), limits.groupBytesPerHour, 3_600, .groupBytesPerHour, into: &refusals)
            if refusals.isEmpty {
                mine.changes -= Double(changes)
                mine.bytes -= Double(bytes)
                ours.changes -= Double(changes)
                ours.bytes -= Double(bytes)
            }
            buckets.devices.withValue(for: device, make: makeDevice) { $0 = mine }
            buckets.groups.withValue(for: group, make: makeGroup) { $0 = ours }
            return refusals
        }
    }

    /// Gives back what ``charge(device:group:changes:bytes:now:)`` took for a push that was not applied.
    func refund(device: String, group: String, changes: Int, bytes: Int) {
        let limits = self.limits
        buckets.withLock { buckets in
            if buckets.devices.peek(device) != nil {
                buckets.devices.withValue(for: device, make: { Self.full(0, 0, .now) }) { bucket in
                    bucket.changes = min(Double(limits.deviceChangesPerMinute), bucket.changes + Double(changes))
                    bucket.bytes = min(Double(limits.deviceBytesPerMinute), bucket.bytes + Double(bytes))
                }
            }
            if buckets.groups.peek(group) != nil {
                buckets.groups.withValue(for: group, make: { Self.full(0, 0, .now) }) { bucket in
                    bucket.changes = min(Double(limits.groupChangesPerHour), bucket.changes + Double(changes))
                    bucket.bytes = min(Double(limits.groupBytesPerHour), bucket.bytes + Double(bytes))
                }
            }
        }
    }

    private static func full(_ changes: Int, _ bytes: Int, _ now: ContinuousClock.Instant) -> Bucket {
        Bucket(changes: Double(changes), bytes: Double(bytes), at: now)
    }

    private static func refill(_ bucket: inout Bucket, _ changes: Int, _ bytes: Int, period: Double, now: ContinuousClock.Instant) {
        let elapsed = now - bucket.at
        let seconds = max(0, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        bucket.changes = min(Double(changes), bucket.changes + seconds * Double(changes) / period)
        bucket.bytes = min(Double(bytes), bucket.bytes + seconds * Double(bytes) / period)
        bucket.at = max(bucket.at, now)
    }

    /// Adds the refusal of `asked` against a bucket holding `left` of `limit` (refilled over `period`
    /// seconds), if it does not fit: with the window's total it would make, and the seconds until it
    /// fits (0 when it never does: it is over the whole budget).
    private static func check(_ left: Double, _ asked: Double, _ limit: Int, _ period: Double, _ reason: PushRefusal.Reason,
                              into refusals: inout [PushRefusal]) {
        guard asked > left else { return }
        let used = max(0, Double(limit) - left)
        let wait = asked > Double(limit) ? 0 : max(1, Int(((asked - left) * period / Double(max(limit, 1))).rounded(.up)))
        refusals.append(PushRefusal(reason, limit: limit, amount: Int((used + asked).rounded()), retryAfter: wait))
    }
}
#endif
