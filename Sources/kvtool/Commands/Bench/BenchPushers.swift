#if PostgreSQL
import ArgumentParser
import Foundation
import KVStore
import Logging
import PostgresNIO
import PostgresTesting
import SyncKitPostgres
import SyncWire

extension Bench {
    /// `kvtool bench pushers`: concurrent pushers, with the wake-up inside the push's transaction
    /// (`kvsync_push` revision 6) and after its commit (revision 7, issue 51), side by side on one server.
    struct Pushers: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pushers",
            abstract: "Time concurrent pushers with the wake-up inside the push's transaction and after its commit, side by side.",
            discussion: """
                Starts its own cluster (fsync=off, loopback) with one LISTENing connection (a gateway's), then \
                runs each count of --pushers pushers for --seconds, each on its own connection pushing batches of \
                --batch changes, to a group each and then all to one group: once with kvsync_push revision 6 (it \
                calls pg_notify inside its transaction: every commit that notified takes a lock of the whole \
                cluster) and once with this library's revision, which does not, the pusher sending the wake-up \
                after the commit (at most one per group per 20 ms). Prints commits/s, changes/s and the p50/p99 of \
                a push (with its wake-up). Client and server share this machine.
                """)

        @Option(help: "Pusher counts, comma-separated.") var pushers = "1,8,16,32,64"
        @Option(help: "Seconds each count runs, per mode.") var seconds = 2.0
        @Option(help: "Changes per push (one server transaction).") var batch = 10
        @Option(help: "Value bytes.") var valueSize = 100

        func validate() throws {
            guard !counts.isEmpty, counts.allSatisfy({ (1...256).contains($0) }) else {
                throw ValidationError("--pushers takes counts from 1 to 256, comma-separated")
            }
            guard seconds >= 0.1 && seconds <= 600, (1...5_000).contains(batch), (1...100_000).contains(valueSize) else {
                throw ValidationError("--seconds must be from 0.1 to 600, --batch from 1 to 5000, --value-size from 1 to 100000")
            }
        }

        var counts: [Int] { pushers.split(separator: ",").compactMap { Int($0) } }

        /// What one run of pushers did.
        struct Run {
            var pushes = 0
            var changes = 0
            var seconds = 0.0
            /// Each push's time (with its wake-up), in milliseconds, sorted.
            var latencies: [Double] = []
            var notifications = 0

            func percentile(_ p: Double) -> Double { latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
            var line: String {
                String(format: "%.0f commits/s (%.0f changes/s), p50 %.2f ms, p99 %.2f ms, %d notifications",
                       Double(pushes) / seconds, Double(changes) / seconds, percentile(0.5), percentile(0.99), notifications)
            }
        }

        func run() throws {
            let cluster = try LocalPostgresCluster()
            defer { try? cluster.stop() }
            let url = cluster.tcpURL
            let logger = Logger(label: "kvtool.bench.pushers", factory: { _ in SwiftLogNoOpLogHandler() })
            print("PostgreSQL cluster on 127.0.0.1:\(cluster.port) (fsync=off); batches of \(batch) changes of \(valueSize) bytes; " +
                  "\(seconds) s per run; load \(Self.loadAverage())")
            let configuration = try url.connectionConfiguration()
            let owner = try blocking { try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger) }
            defer { _ = try? blocking { try await owner.close() } }
            try blocking { try await ServerStatements.migrate(owner, logger: logger) }
            // One connection LISTENs, as a gateway's does: notifications are queued and read.
            let heard = Locked(0)
            let listening = Task {
                let listener = try await PostgresConnection.connect(configuration: configuration, id: 2, logger: logger)
                defer { Task { try? await listener.close() } }
                try await listener.listen(on: ServerStatements.channel) { notifications in
                    for try await _ in notifications { heard.withLock { $0 += 1 } }
                }
            }
            defer { listening.cancel() }
            let value = [UInt8](repeating: UInt8(ascii: "v"), count: valueSize)
            for sameGroup in [false, true] {
                for count in counts {
                    var runs: [Run] = []
                    for wakeInside in [true, false] {
                        try blocking { try await ServerStatements.installPush(wakeInside: wakeInside, on: owner, logger: logger) }
                        let before = heard.withLock { $0 }
                        var run = try pushers(count, sameGroup: sameGroup, wakeInside: wakeInside, configuration: configuration,
                                              value: value, logger: logger)
                        // The wake-ups sent at the end of a window arrive within it.
                        usleep(100_000)
                        run.notifications = heard.withLock { $0 } - before
                        runs.append(run)
                    }
                    let (inside, after) = (runs[0], runs[1])
                    print(String(format: "%3d pusher%@, %@: notify inside the push %@; after the commit %@; after/inside %.2f×",
                                 count, count == 1 ? " " : "s", sameGroup ? "one group" : "a group each", inside.line, after.line,
                                 (Double(after.pushes) / after.seconds) / max(Double(inside.pushes) / inside.seconds, 1e-9)))
                }
            }
            try blocking { try await ServerStatements.installPush(wakeInside: false, on: owner, logger: logger) }
            print("load \(Self.loadAverage())")
        }

        /// `count` pushers, each on its own connection, pushing batches for ``seconds``: with revision 6
        /// installed (`wakeInside`) the push is all; else each sends its wake-up after the commit.
        private func pushers(_ count: Int, sameGroup: Bool, wakeInside: Bool, configuration: PostgresConnection.Configuration,
                             value: [UInt8], logger: Logger) throws -> Run {
            let run = UUID().uuidString.prefix(8).lowercased()
            let (batch, duration) = (batch, Duration.milliseconds(Int64(seconds * 1000)))
            return try blocking {
                let connections = try await withThrowingTaskGroup(of: PostgresConnection.self) { group in
                    for index in 0..<count {
                        group.addTask { try await PostgresConnection.connect(configuration: configuration, id: 10 + index, logger: logger) }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                let start = ContinuousClock.now
                let end = start + duration
                let results = try await withThrowingTaskGroup(of: (Int, [Double]).self) { tasks in
                    for (index, connection) in connections.enumerated() {
                        tasks.addTask {
                            let statements = ServerStatements(connection: connection, logger: logger, maxValueBytes: 1 << 20)
                            let wakeUps = WakeUps { group in try? await statements.wake(group: group) }
                            let (group, device) = (sameGroup ? "bench.pushers.\(run)" : "bench.pushers.\(run).\(index)", "pusher-\(index)")
                            var (pushes, token, latencies) = (0, UInt64(0), [Double]())
                            while ContinuousClock.now < end {
                                let clock = UInt64(Date().timeIntervalSince1970 * 1000) << 16
                                let changes = (0..<batch).map { _ in
                                    token += 1
                                    return OutgoingChange(kind: "collection", name: "bench", key: Array("\(device)-\(token)".utf8),
                                                          value: value, clock: clock, base: 0, token: token)
                                }
                                let began = ContinuousClock.now
                                _ = try await statements.push(group: group, device: device, changes: changes, maxClockSkew: .seconds(60))
                                if !wakeInside { await wakeUps.wake(group) }
                                let took = ContinuousClock.now - began
                                latencies.append(Double(took.components.attoseconds) / 1e15 + Double(took.components.seconds) * 1000)
                                pushes += 1
                            }
                            await wakeUps.flush()
                            return (pushes, latencies)
                        }
                    }
                    return try await tasks.reduce(into: [(Int, [Double])]()) { $0.append($1) }
                }
                let elapsed = ContinuousClock.now - start
                for connection in connections { try? await connection.close() }
                let pushes = results.reduce(0) { $0 + $1.0 }
                return Run(pushes: pushes, changes: pushes * batch,
                           seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
                           latencies: results.flatMap(\.1).sorted())
            }
        }

        /// `/proc/loadavg`'s first three figures (the machine's load, to read the figures by).
        static func loadAverage() -> String {
            ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?").split(separator: " ").prefix(3).joined(separator: " ")
        }
    }
}
#endif
