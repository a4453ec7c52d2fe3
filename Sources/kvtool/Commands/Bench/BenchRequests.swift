#if PostgreSQL
import ArgumentParser
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import PostgresTesting
#if canImport(Glibc)
import Glibc
#endif

extension Bench {
    /// `kvtool bench requests`: sync as a service of the container, through a throwaway PostgreSQL
    /// cluster on loopback.
    struct Requests: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "requests",
            abstract: "Time sync requests: a committed write until the server acknowledges it, with a live owner and with an agent started per request, and the handoff after kill -9 of the owner.",
            discussion: """
                This process plays the extension: it commits a write and calls SyncService.request(within:). With a \
                live owner (kvtool sync run, another process) and with none (the registered agent, kvtool sync run \
                --once --exit-when-idle, started detached by each request: every sample waits until the previous \
                agent has exited). Then --handoffs times: a standby kvtool sync run waits, the owner is killed with \
                SIGKILL right after a write, and the time until the standby owns sync, and until that write is \
                acknowledged, is measured. Client, owner and server share this machine.
                """)

        @Option(help: "Requests with a live owner.") var samples = 200
        @Option(name: .customLong("agent-samples"), help: "Requests with no owner (an agent started for each).") var agentSamples = 200
        @Option(help: "Owners killed with SIGKILL.") var handoffs = 50

        func validate() throws {
            guard (1...100_000).contains(samples), (1...100_000).contains(agentSamples), (0...10_000).contains(handoffs) else {
                throw ValidationError("--samples, --agent-samples and --handoffs must be positive (and not huge)")
            }
        }

        func run() throws {
            let cluster = try LocalPostgresCluster()
            defer { try? cluster.stop() }
            let root = try Demo.temporaryDirectory("kvstore-bench-requests-")
            defer { try? FileManager.default.removeItem(atPath: root) }
            let group = "group.bench.requests"
            let server = "postgres://\(cluster.user)@127.0.0.1:\(cluster.port)/\(cluster.database)"
            let container = try SharedContainer(groupIdentifier: group, root: root)
            _ = try History.attach(to: container)
            let records = try container.store.collection("bench", key: String.self, value: String.self)
            try Replication.enable(.collection("bench"), in: container)
            try SyncAgentRegistration(arguments: [try Demo.programPath(nil), "--root", root, "--group", group,
                                                  "sync", "run", "--once", "--exit-when-idle"], server: server).save(in: container)
            // (Kept outside the container, in the user's configuration: removed with the run.)
            defer { _ = try? SyncAgentRegistration.remove(from: container) }
            let service = try SyncService(container: container)
            print("PostgreSQL cluster on 127.0.0.1:\(cluster.port) (fsync=off); the container's agent: kvtool sync run --once --exit-when-idle")

            var written = 0
            /// Commits one write and requests sync; the milliseconds from the commit to the acknowledgement.
            func writeAndRequest() throws -> Double {
                written += 1
                let key = String(format: "key-%08d", written)
                try container.store.write { tx in try records.put("value \(written)", forKey: key, in: tx) }
                let start = Bench.now()
                let outcome = try service.request(within: .seconds(60))
                guard case .acknowledged = outcome else { throw CLIError(.failure, "request \(written): \(outcome)") }
                return Double(Bench.now() - start) / 1e6
            }
            func waitForNoOwner() throws {
                let deadline = Bench.now() + 60_000_000_000
                while try service.status().owner != nil {
                    guard Bench.now() < deadline else { throw CLIError(.failure, "the agent did not exit within 60 s") }
                    usleep(2_000)
                }
            }
            func report(_ what: String, _ values: [Double]) {
                let sorted = values.sorted()
                func percentile(_ p: Double) -> Double { sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }
                print(String(format: "%@, %d samples: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms",
                             what, sorted.count, percentile(0.5), percentile(0.9), percentile(0.99), sorted.last ?? 0))
            }

            // The first request makes the server's schema: not timed.
            _ = try writeAndRequest()
            try waitForNoOwner()
            var agent: [Double] = []
            for _ in 0..<agentSamples {
                agent.append(try writeAndRequest())
                try waitForNoOwner()
            }
            report("write until acknowledged, no owner (an agent started per request)", agent)

            var owner = try startOwner(root: root, group: group, server: server, service: service, standby: false)
            var live: [Double] = []
            for _ in 0..<samples { live.append(try writeAndRequest()) }
            report("write until acknowledged, a live owner", live)

            var takeovers: [Double] = [], resumed: [Double] = []
            for _ in 0..<handoffs {
                let standby = try startOwner(root: root, group: group, server: server, service: service, standby: true)
                written += 1
                let key = String(format: "key-%08d", written)
                try container.store.write { tx in try records.put("value \(written)", forKey: key, in: tx) }
                let killed = Bench.now()
                kill(owner.process.processIdentifier, SIGKILL)
                let deadline = killed + 60_000_000_000
                while try service.status().owner?.pid != standby.process.processIdentifier {
                    guard Bench.now() < deadline else { throw CLIError(.failure, "the standby did not take over within 60 s") }
                    usleep(200)
                }
                takeovers.append(Double(Bench.now() - killed) / 1e6)
                guard case .acknowledged = try service.request(within: .seconds(60)) else {
                    throw CLIError(.failure, "the write made before the kill was not acknowledged after the handoff")
                }
                resumed.append(Double(Bench.now() - killed) / 1e6)
                try owner.finish(acceptingSignal: SIGKILL)
                owner = standby
            }
            if handoffs > 0 {
                report("kill -9 of the owner until the standby owns sync", takeovers)
                report("kill -9 of the owner until the write made before it is acknowledged", resumed)
            }
            owner.process.interrupt()
            try owner.finish(acceptingSignal: SIGINT)
            let count = try Int(cluster.psql("SELECT count(*) FROM kvsync_changes WHERE kind = 'collection' AND name = 'bench'")
                .trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
            guard count == written else { throw CLIError(.failure, "the server's log holds \(count) changes of the \(written) written") }
            print("the server's log holds each of the \(written) writes once")
        }

        /// A live `kvtool sync run`, once it owns sync (or, `standby`, once it says it waits).
        private func startOwner(root: String, group: String, server: String, service: SyncService, standby: Bool) throws -> ChildProcess {
            let child = try ChildProcess(arguments: ["--root", root, "--group", group, "sync", "run", "--server", server],
                                         timeout: 1_800, relayIndent: nil)
            if standby {
                guard child.relay(untilLineContaining: "standby:") != nil else { throw CLIError(.failure, "the standby did not start") }
                return child
            }
            let deadline = Bench.now() + 60_000_000_000
            while try service.status().owner.map({ $0.pid == child.process.processIdentifier && $0.mode == .live }) != true {
                guard Bench.now() < deadline else { throw CLIError(.failure, "the live owner did not start within 60 s") }
                usleep(2_000)
            }
            return child
        }
    }
}
#endif
