#if PostgreSQL
import ArgumentParser
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import PostgresTesting

extension Bench {
    /// `kvtool bench sync`: replication through a throwaway PostgreSQL cluster.
    struct Sync: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "sync",
            abstract: "Time replication through a throwaway PostgreSQL cluster: push and pull, latency, many devices.",
            discussion: """
                Starts its own cluster (fsync=off, loopback) and temporary containers, then times: one device \
                pushing --changes pending changes; another pulling and applying them; a commit on one device \
                until another (a live replicator) has it, --samples times; and --devices devices pushing at \
                once, each in its own group, then in one group. Client and server share this machine.
                """)

        @Option(help: "Changes pushed, then pulled.") var changes = 10_000
        @Option(help: "Latency samples.") var samples = 200
        @Option(help: "Device counts of the scale run, comma-separated.") var devices = "1,2,4,8,16,32"
        @Option(help: "Changes each device pushes in the scale run.") var changesPerDevice = 2_000
        @Option(help: "Value bytes.") var valueSize = 100

        func validate() throws {
            guard (1...1_000_000).contains(changes), (1...100_000).contains(samples), (1...10_000).contains(valueSize),
                  (1...1_000_000).contains(changesPerDevice) else {
                throw ValidationError("--changes, --samples, --changes-per-device and --value-size must be positive (and not huge)")
            }
            guard !deviceCounts.isEmpty, deviceCounts.allSatisfy({ (1...256).contains($0) }) else {
                throw ValidationError("--devices takes counts from 1 to 256, comma-separated")
            }
        }

        var deviceCounts: [Int] { devices.split(separator: ",").compactMap { Int($0) } }

        func run() throws {
            let cluster = try LocalPostgresCluster()
            defer { try? cluster.stop() }
            print("PostgreSQL cluster on 127.0.0.1:\(cluster.port) (fsync=off); values of \(valueSize) bytes")
            let value = String(repeating: "v", count: valueSize)

            // Push, then pull and apply.
            let a = try BenchDevice(group: "group.bench.sync", .database(cluster.tcpURL))
            let b = try BenchDevice(group: "group.bench.sync", .database(cluster.tcpURL))
            _ = try blocking { try await a.replicator.sync() }   // connected, schema made: not timed
            _ = try blocking { try await b.replicator.sync() }
            try a.write((0..<changes).map { (String(format: "key-%08d", $0), value) })
            let pushStart = Bench.now()
            let pushed = try blocking { try await a.replicator.sync() }
            let pushSeconds = Double(Bench.now() - pushStart) / 1e9
            let pullStart = Bench.now()
            let pulled = try blocking { try await b.replicator.sync() }
            let pullSeconds = Double(Bench.now() - pullStart) / 1e9
            guard pushed.pushed == changes, pulled.pulled == changes, try b.count() == changes else {
                throw CLIError(.failure, "pushed \(pushed.pushed), pulled \(pulled.pulled), B has \(try b.count()) of \(changes)")
            }
            print(String(format: "push %d changes: %.3f s (%.0f changes/s, batches of %d)", changes, pushSeconds,
                         Double(changes) / pushSeconds, Replicator.Options().batchSize))
            print(String(format: "pull and apply %d changes: %.3f s (%.0f changes/s)", changes, pullSeconds, Double(changes) / pullSeconds))

            // Latency: a commit on A until B, live, has it.
            let live = Task { try await b.replicator.run() }
            defer { live.cancel() }
            var latencies: [Double] = []
            for sample in 0..<samples {
                let key = "latency-\(sample)", expected = "\(sample)"
                let start = Bench.now()
                try a.write([(key, expected)])
                _ = try blocking { try await a.replicator.sync() }
                let deadline = start + 10_000_000_000
                while try b.value(key) != expected {
                    guard Bench.now() < deadline else { throw CLIError(.failure, "B did not get \(key) within 10 s") }
                    usleep(100)
                }
                latencies.append(Double(Bench.now() - start) / 1e6)
            }
            latencies.sort()
            func percentile(_ p: Double) -> Double { latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
            print(String(format: "commit on A until B (live, LISTEN/NOTIFY) has it, %d samples: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms",
                         samples, percentile(0.5), percentile(0.9), percentile(0.99), latencies.last ?? 0))
            live.cancel()
            _ = try? blocking { await a.replicator.close() }

            // Scale: devices pushing at once.
            for sameGroup in [false, true] {
                for count in deviceCounts {
                    let rate = try scale(devices: count, sameGroup: sameGroup, cluster: cluster, value: value)
                    print(String(format: "%3d device%@ pushing %d changes each at once, %@: %.0f changes/s",
                                 count, count == 1 ? " " : "s", changesPerDevice, sameGroup ? "one group" : "a group each", rate))
                }
            }
        }

        /// Changes per second the server took from `count` devices pushing at once (push only: in one
        /// group, a sync would also pull every other device's changes).
        private func scale(devices count: Int, sameGroup: Bool, cluster: LocalPostgresCluster, value: String) throws -> Double {
            let run = UUID().uuidString.prefix(8).lowercased()
            let devices = try (0..<count).map { index in
                try BenchDevice(group: sameGroup ? "group.bench.scale.\(run)" : "group.bench.scale.\(run).\(index)", .database(cluster.tcpURL))
            }
            for device in devices {
                _ = try blocking { try await device.replicator.sync() }
                try device.write((0..<changesPerDevice).map { ("\(device.replicator.device)-\($0)", value) })
            }
            let start = Bench.now()
            let pushed = try blocking {
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for device in devices { group.addTask { try await device.replicator.push().pushed } }
                    return try await group.reduce(0, +)
                }
            }
            let seconds = Double(Bench.now() - start) / 1e9
            for device in devices { _ = try? blocking { await device.replicator.close() } }
            guard pushed == count * changesPerDevice else {
                throw CLIError(.failure, "the server took \(pushed) of \(count * changesPerDevice) changes")
            }
            return Double(pushed) / seconds
        }
    }
}

/// One simulated device: a temporary container with a replicated `bench` collection.
final class BenchDevice: Sendable {
    let directory: String
    let container: SharedContainer
    let collection: KVCollection<String, String>
    let replicator: Replicator

    /// A device of `group` syncing with `endpoint`, with the prefixes of `Files/` in `files` replicated.
    init(group: String, _ endpoint: Replicator.Endpoint, files: [(prefix: String, fetch: FileFetch)] = []) throws {
        directory = try Demo.temporaryDirectory("kvstore-bench-sync-")
        container = try SharedContainer(groupIdentifier: group, root: directory)
        collection = try container.store.collection("bench", key: String.self, value: String.self)
        try Replication.enable(.collection("bench"), in: container)
        for (prefix, fetch) in files { try Replication.files(prefix: prefix, fetch: fetch, in: container) }
        replicator = try Replicator(container: container, endpoint: endpoint, targets: [.collection(collection)])
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    func write(_ pairs: [(String, String)]) throws {
        try container.store.write(author: "app") { tx in
            for (key, value) in pairs { try collection.put(value, forKey: key, in: tx) }
        }
    }

    func value(_ key: String) throws -> String? { try collection.get(key) }
    func count() throws -> Int { try collection.count() }
}
#endif
