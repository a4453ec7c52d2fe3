#if PostgreSQL
import ArgumentParser
import Foundation
import KVStore
import SyncKitPostgres
#if canImport(Glibc)
import Glibc
#endif

extension Bench {
    /// `kvtool bench gateway-devices` (not listed): a share of `kvtool bench gateway`'s live devices, in a
    /// process of their own, for a count past what one process may hold open (the open-file limit).
    /// Each event a device receives is printed as `E INDEX NANOSECONDS` (CLOCK_MONOTONIC, comparable
    /// between processes: ``Bench/now()``), for the bench that started it to time.
    struct GatewayDevices: ParsableCommand {
        /// A device's live stream, followed until cancelled: when it ends (the gateway answered 503, or
        /// closed it), `reconnecting` is told and the device connects again a second later, as a device
        /// does. Its first event, and each reconnection's, is the stream's opening.
        static func follow(_ url: SyncGatewayURL, token: String, group: String, onEvent: @escaping @Sendable () -> Void,
                           reconnecting: @Sendable () -> Void) async {
            while !Task.isCancelled {
                try? await SyncGatewayClient.followChanges(gateway: url, token: token, group: group, connectTimeout: .seconds(60), onChange: onEvent)
                if Task.isCancelled { return }
                reconnecting()
                try? await Task.sleep(for: .seconds(1))
            }
        }

        static let configuration = CommandConfiguration(
            commandName: "gateway-devices",
            abstract: "Live devices for kvtool bench gateway, in a process of their own (started by it).",
            shouldDisplay: false)

        /// Which gateway, group and token each device uses: device `i` uses `urls[i % urls.count]`,
        /// `groups[i % groups.count]` and its token. Written by the bench to a file of the run's (mode
        /// 0600): tokens are not put on a command line.
        struct Plan: Codable {
            var urls: [String]
            /// The certificate the devices trust, for gateways over TLS.
            var caFile: String?
            var groups: [String]
            var tokens: [String]
        }

        @Option(help: "The plan's file (JSON), written by kvtool bench gateway.") var plan: String
        @Option(help: "The first device's index.") var from: Int
        @Option(help: "The index past the last device's.") var to: Int

        func validate() throws {
            guard from >= 0, to > from, to - from <= 1_000_000 else { throw ValidationError("--from and --to name 1 to 1000000 devices") }
        }

        func run() throws {
            guard let data = FileManager.default.contents(atPath: plan) else {
                throw CLIError(.notFound, "cannot read the plan \(plan): kvtool bench gateway writes it")
            }
            guard let plan = try? JSONDecoder().decode(Plan.self, from: data) else {
                throw CLIError(.badInput, "the plan \(self.plan) is not the JSON kvtool bench gateway writes")
            }
            guard !plan.urls.isEmpty, !plan.groups.isEmpty, plan.groups.count == plan.tokens.count else {
                throw CLIError(.badInput, "the plan \(self.plan) names no gateway, or not a token for each group")
            }
            guard let urls = try? plan.urls.map({ try SyncGatewayURL($0, caFile: plan.caFile) }) else {
                throw CLIError(.badInput, "the plan \(self.plan) names a gateway URL that is not one")
            }
            // This process holds a socket a device: as many as the hard limit allows.
            var limit = rlimit()
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            limit.rlim_cur = limit.rlim_max
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            // Lines gathered here and written by one thread every 2 ms: a device's time is taken when its
            // event comes, so the write's delay is not in the figure.
            let pending = Locked([UInt8]())
            let writer = Thread {
                while true {
                    usleep(2_000)
                    let bytes = pending.withLock { taken -> [UInt8] in defer { taken.removeAll(keepingCapacity: true) }; return taken }
                    var offset = 0
                    while offset < bytes.count {
                        let written = bytes[offset...].withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
                        // The bench that reads them is gone: nothing is left to do.
                        if written <= 0 { Glibc.exit(0) }
                        offset += written
                    }
                }
            }
            writer.start()
            let followers = (from..<to).map { index in
                Task {
                    let group = index % plan.groups.count
                    await Self.follow(urls[index % urls.count], token: plan.tokens[group], group: plan.groups[group]) {
                        let line = "E \(index) \(Bench.now())\n"
                        pending.withLock { $0.append(contentsOf: line.utf8) }
                    } reconnecting: {
                        pending.withLock { $0.append(contentsOf: "R \(index)\n".utf8) }
                    }
                }
            }
            // Until the bench stops this process (SIGTERM; its ChildProcess timeout kills it otherwise).
            withExtendedLifetime(followers) {
                while true { sleep(60) }
            }
        }
    }
}
#endif
