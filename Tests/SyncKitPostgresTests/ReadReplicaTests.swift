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

/// A gateway that reads from a hot standby (`--read-database-url`, issue 51), the standby replaying
/// 500 ms behind its primary (`recovery_min_apply_delay`): devices read their own writes, no cursor
/// skips a row, nothing is applied twice, and a live stream's wake-up finds its row.
@Suite(.serialized, .oneServerFleetAtATime) struct ReadReplicaTests {
    /// A primary, a standby replaying `delay` behind it, and a `kvtool sync gateway` in front of both.
    final class Rig: @unchecked Sendable {
        let primary: LocalPostgresCluster
        let standby: LocalPostgresCluster
        let gateway: BackgroundProcess
        let url: String

        init(delay: Duration = .milliseconds(500)) async throws {
            primary = try await offPool { try LocalPostgresCluster() }
            try await primary.prepareForGateways()
            let primary = primary
            standby = try await offPool { try LocalPostgresCluster(standbyOf: primary, applyDelay: delay) }
            (gateway, url) = try await startGateway(primary, extra: ["--read-database-url", standby.gatewayURL.description])
        }

        deinit { gateway.kill(SIGKILL) }

        /// A device of `group` on the wire, with a token of its own.
        func device(_ group: String, _ name: String) async throws -> WireDevice {
            let token = try await issueToken(primary, ["--group", group, "--device", name])
            return try WireDevice(url: url, token: token, group: group)
        }

        /// The group's log on the primary: its sequence numbers in order.
        func log(_ group: String) throws -> [Int64] {
            try primary.psql("SELECT seq FROM kvsync_changes WHERE group_id = '\(group)' ORDER BY seq")
                .split(separator: "\n").compactMap { Int64($0.trimmingCharacters(in: .whitespaces)) }
        }
    }

    /// A device that speaks the gateway's wire itself (``GatewayConnection``, as a replicator does):
    /// it pushes notes, pulls from its cursor, and keeps every sequence number it was given.
    final class WireDevice: @unchecked Sendable {
        let connection: GatewayConnection
        let group: String
        var cursor: Int64 = 0
        var received: [Int64] = []
        var state: [String: [UInt8]] = [:]
        private var token: UInt64 = 0

        init(url: String, token: String, group: String) throws {
            connection = try GatewayConnection(url: SyncGatewayURL(url), token: token, group: group, maxValueBytes: 1 << 20,
                                               operationTimeout: .seconds(30), connectTimeout: .seconds(10))
            self.group = group
        }

        /// Pushes one note per key; the versions the gateway applied them as.
        func push(_ keys: [String]) async throws -> [Int64] {
            let changes = try keys.map { key -> OutgoingChange in
                token += 1
                return OutgoingChange(kind: "collection", name: "notes", key: Array(key.utf8), value: try CBOREncoder().encode("v-\(key)"),
                                      clock: HybridTimestamp(date: Date()).rawValue, base: 0, token: token)
            }
            let outcomes = try await connection.push(group: group, device: "", changes: changes, maxClockSkew: .seconds(60))
            return outcomes.compactMap { if case .applied(let version) = $0 { version } else { nil } }
        }

        /// Pulls pages from the cursor until one is empty.
        func pull() async throws {
            while true {
                let page = try await connection.changes(group: group, after: cursor, limit: 100)
                guard let last = page.changes.last else { return }
                for change in page.changes {
                    received.append(change.sequence)
                    state[String(decoding: change.key, as: UTF8.self)] = change.value
                }
                cursor = last.sequence
            }
        }
    }

    /// Several devices of one group push and pull at once through the gateway while its replica replays
    /// 500 ms late. After each push, the device's next pull holds what it pushed (read-your-writes: the
    /// pull carries the push's version, and the gateway waits for the replica or reads the primary); in
    /// the end every device was given every row of the log exactly once, in order, with no gap, and the
    /// log holds each change once.
    @Test func devicesReadTheirOwnWritesFromALaggingReplicaAndNoCursorSkipsARow() async throws {
        let rig = try await Rig()
        let group = GatewayTests.group("replica")
        let (devices, rounds, perPush) = (4, 5, 3)
        var all: [WireDevice] = []
        for index in 0..<devices { all.append(try await rig.device(group, "d\(index)")) }
        let started = ContinuousClock.now
        // How long each pull after a push took (its wait for the replica included): printed, never asserted.
        let pulls = Locked<[Duration]>([])
        let missed = try await withThrowingTaskGroup(of: [String].self) { tasks in
            for (index, device) in all.enumerated() {
                tasks.addTask {
                    var missed: [String] = []
                    for round in 0..<rounds {
                        let versions = try await device.push((0..<perPush).map { "d\(index)-r\(round)-\($0)" })
                        if versions.count != perPush { missed.append("d\(index) round \(round): \(versions.count) applied of \(perPush)") }
                        let pulling = ContinuousClock.now
                        try await device.pull()
                        pulls.withLock { $0.append(ContinuousClock.now - pulling) }
                        let absent = versions.filter { !device.received.contains($0) }
                        if !absent.isEmpty { missed.append("d\(index) round \(round): its own \(absent) not in its pull") }
                    }
                    return missed
                }
            }
            return try await tasks.reduce(into: []) { $0 += $1 }
        }
        let sorted = pulls.withLock { $0 }.sorted()
        print("ReadReplicaTests: \(devices) devices × \(rounds) rounds of \(perPush) changes, push then pull, in \(ContinuousClock.now - started);"
              + " the pull after a push took p50 \(sorted[sorted.count / 2]), p99 \(sorted[sorted.count * 99 / 100]) (the replica replays 500 ms late)")
        #expect(missed.isEmpty, "\(missed)")
        // Every device catches up (the replica gets there), then holds the whole log, once, in order.
        try await offPool { try rig.standby.catchUp(with: rig.primary) }
        let log = try rig.log(group)
        #expect(log.count == devices * rounds * perPush, "the log holds \(log.count) changes for \(devices * rounds * perPush) pushed")
        #expect(Set(log).count == log.count)
        for (index, device) in all.enumerated() {
            try await device.pull()
            #expect(device.received == log, "device \(index) was given \(device.received), the log is \(log)")
            #expect(device.state.count == log.count)
        }
    }

    /// A live stream's wake-up comes from the primary's LISTEN, before the replica has the row: the
    /// gateway wakes the stream only once the replica has replayed the commit, so the pull it causes
    /// (a device that pushed nothing: nothing to wait for of its own) finds the row.
    @Test func aLiveWakeUpComesOnceTheReplicaHasTheRow() async throws {
        let rig = try await Rig()
        let group = GatewayTests.group("replica-live")
        let reader = try await rig.device(group, "reader"), writer = try await rig.device(group, "writer")
        let follower = try GatewayLiveTests.LiveFollower(rig.url, token: try await issueToken(rig.primary, ["--group", group]), group: group)
        defer { follower.task.cancel() }
        #expect(await eventuallyAsync(30) { follower.count >= 1 })
        for round in 1...3 {
            let before = follower.count
            let versions = try await writer.push(["live-\(round)"])
            let pushed = ContinuousClock.now
            #expect(await eventuallyAsync(30) { follower.count > before })
            let woken = ContinuousClock.now - pushed
            try await reader.pull()
            print("ReadReplicaTests: round \(round): woken \(woken) after the push (the replica replays 500 ms late)")
            #expect(versions.allSatisfy(reader.received.contains), "round \(round): woken, the reader pulled \(reader.received), not \(versions)")
        }
    }

    /// A replica that stops answering costs the devices nothing but its reads: the gateway's watch
    /// finds it down, pulls read the primary (a device still reads its own write) and wake-ups no
    /// longer wait for it.
    @Test func aReplicaThatStopsLeavesPullsAndWakeUpsToThePrimary() async throws {
        let rig = try await Rig()
        let group = GatewayTests.group("replica-down")
        let device = try await rig.device(group, "d")
        let follower = try GatewayLiveTests.LiveFollower(rig.url, token: try await issueToken(rig.primary, ["--group", group]), group: group)
        defer { follower.task.cancel() }
        #expect(await eventuallyAsync(30) { follower.count >= 1 })
        try await offPool { try rig.standby.stop(immediate: true) }
        let started = ContinuousClock.now
        for round in 1...3 {
            let before = follower.count
            let versions = try await device.push(["down-\(round)"])
            try await device.pull()
            #expect(versions.allSatisfy(device.received.contains), "round \(round): \(device.received) lacks its own \(versions)")
            #expect(await eventuallyAsync(30) { follower.count > before }, "round \(round): the live stream was not woken")
        }
        print("ReadReplicaTests: 3 pushes, pulls and wake-ups with the replica stopped in \(ContinuousClock.now - started)")
    }
}
#endif
