#if PostgreSQL
import ArgumentParser
import Foundation
import KVStore
import PostgresTesting
import SyncKitPostgres

extension Bench {
    /// `kvtool bench pushers`: concurrent pushers, with the wake-up inside the push's transaction
    /// (as `kvsync_push` did up to revision 6) and after its commit (from revision 7, issue 51), side by
    /// side on one server, with the same body otherwise.
    struct Pushers: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pushers",
            abstract: "Time concurrent pushers with the wake-up inside the push's transaction and after its commit, side by side.",
            discussion: """
                Starts its own cluster (fsync=off, loopback) with one LISTENing connection (a gateway's), then \
                runs each count of --pushers pushers for --seconds, each on its own connection pushing batches of \
                --batch changes, to a group each and then all to one group: once with this library's kvsync_push \
                calling pg_notify inside its transaction, as revision 6 and earlier did (every commit that notified \
                takes a lock of the whole cluster), and once as it is, which does not, the pusher sending the wake-up \
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
            print("PostgreSQL cluster on 127.0.0.1:\(cluster.port) (fsync=off); batches of \(batch) changes of \(valueSize) bytes; " +
                  "\(seconds) s per run; load \(Self.loadAverage())")
            let bench = try blocking { try await PushersBench.open(cluster.tcpURL) }
            defer { _ = try? blocking { await bench.close() } }
            let value = [UInt8](repeating: UInt8(ascii: "v"), count: valueSize)
            let duration = Duration.milliseconds(Int64(seconds * 1000))
            for sameGroup in [false, true] {
                for count in counts {
                    var runs: [Run] = []
                    for wakeInside in [true, false] {
                        try blocking { try await bench.install(wakeInside: wakeInside) }
                        let before = bench.heard
                        let measured = try blocking {
                            try await bench.pushers(count, sameGroup: sameGroup, wakeInside: wakeInside, batch: batch, value: value,
                                                    duration: duration)
                        }
                        // The wake-ups sent at the end of a window arrive within it.
                        usleep(100_000)
                        runs.append(Run(pushes: measured.pushes, changes: measured.changes, seconds: measured.seconds,
                                        latencies: measured.latencies, notifications: bench.heard - before))
                    }
                    let (inside, after) = (runs[0], runs[1])
                    print(String(format: "%3d pusher%@, %@: notify inside the push %@; after the commit %@; after/inside %.2f×",
                                 count, count == 1 ? " " : "s", sameGroup ? "one group" : "a group each", inside.line, after.line,
                                 (Double(after.pushes) / after.seconds) / max(Double(inside.pushes) / inside.seconds, 1e-9)))
                }
            }
            print("load \(Self.loadAverage())")
        }

        /// `/proc/loadavg`'s first three figures (the machine's load, to read the figures by).
        static func loadAverage() -> String {
            ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?").split(separator: " ").prefix(3).joined(separator: " ")
        }
    }
}
#endif
