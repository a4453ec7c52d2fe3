#if PostgreSQL
import ArgumentParser
import Foundation
import KVStore
import SyncGateway
import SyncKitPostgres
import PostgresTesting
#if canImport(Glibc)
import Glibc
#endif

extension Bench {
    /// `kvtool bench gateway`: the sync gateway at scale, on loopback.
    struct GatewayScale: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "gateway",
            abstract: "Time the sync gateway: many live devices in many groups, and pushes through it.",
            discussion: """
                Starts its own cluster and a `kvtool sync gateway` process per run. For each --devices count, that \
                many live devices in --groups groups (one process multiplexing their connections) follow the \
                gateway's stream; then a commit to one group after another, --samples times, and the time until \
                every device of the group has it; and the gateway's peak RSS. Then one device pushes --push-changes \
                changes through the gateway, the same directly, and a COPY of as many rows into the log (the floor); then the \
                server alone (psql) writing the same rows into the log, into the log and the state, and through kvsync_push.
                """)

        @Option(help: "Live device counts, comma-separated.") var devices = "1000,10000"
        @Option(help: "Groups the devices are spread over.") var groups = 100
        @Option(help: "Commits timed per count.") var samples = 20
        @Option(help: "Changes one device pushes through the gateway.") var pushChanges = 50_000
        @Option(help: "Value bytes.") var valueSize = 100
        @Flag(help: "Time the live devices only, not the push.") var skipPush = false
        @Flag(help: "The live devices follow the gateway over TLS (a certificate made for the run).") var liveTls = false
        @Option(help: ArgumentHelp("A program, by its absolute path, and its arguments (space-separated) that the gateway is run under, e.g. '/usr/bin/heaptrack -o /tmp/gw'.",
                                   discussion: "Its RSS is then the wrapper's; for attributing the gateway's memory, not for timing."))
        var gatewayWrapper: String?
        @Option(help: ArgumentHelp("Gateway processes the live devices are spread over: behind HAProxy (round robin, the PROXY protocol), as Operating.md deploys them.",
                                   discussion: "Every gateway's peak RSS (VmHWM) is printed, and the PostgreSQL connections of all of them (pg_stat_activity)."))
        var gateways = 1
        @Flag(help: "With --gateways, spread the devices over the gateways' own addresses instead of through HAProxy.") var direct = false
        @Option(help: ArgumentHelp("A library, by its absolute path, preloaded into the gateways (LD_PRELOAD), e.g. Debian's /usr/lib/x86_64-linux-gnu/libjemalloc.so.2: to measure another allocator.",
                                   discussion: "The devices, the proxy and this process keep glibc's."))
        var gatewayPreload: String?
        @Option(help: ArgumentHelp("Processes the live devices are followed from, in equal shares (default: this one, or as few as the open-file limit allows).",
                                   discussion: "Each is a `kvtool bench gateway-devices` process that prints the time each of its devices' events came."))
        var deviceProcesses: Int?

        func validate() throws {
            guard !deviceCounts.isEmpty, deviceCounts.allSatisfy({ (1...50_000).contains($0) }) else {
                throw ValidationError("--devices takes counts from 1 to 50000, comma-separated")
            }
            if let deviceProcesses, !(1...64).contains(deviceProcesses) { throw ValidationError("--device-processes takes 1 to 64 processes") }
            guard (1...64).contains(gateways) else { throw ValidationError("--gateways takes 1 to 64 processes") }
            if direct && gateways == 1 { throw ValidationError("--direct goes with --gateways 2 or more") }
            if let gatewayPreload, !gatewayPreload.hasPrefix("/") || !FileManager.default.isReadableFile(atPath: gatewayPreload) {
                throw ValidationError("--gateway-preload takes a library's absolute path, and '\(gatewayPreload)' is not a readable file")
            }
            if gateways > 1 && !direct && liveTls {
                throw ValidationError("--live-tls goes with one gateway or --direct: HAProxy, in HTTP mode, would end TLS itself")
            }
            if gateways > 1 && !direct && !LocalHAProxy.isInstalled {
                throw ValidationError("--gateways \(gateways) puts HAProxy in front, and \(LocalHAProxy.program) is missing (apt-get install haproxy; or --direct)")
            }
            guard (1...10_000).contains(groups), (1...1_000).contains(samples), (1...1_000_000).contains(pushChanges),
                  (1...10_000).contains(valueSize) else {
                throw ValidationError("--groups, --samples, --push-changes and --value-size must be positive (and not huge)")
            }
        }

        var deviceCounts: [Int] { devices.split(separator: ",").compactMap { Int($0) } }

        func run() throws {
            // Every live device is a socket in a device process and one in a gateway (a child, which
            // inherits the limit): raised for the bench alone, past the hard limit when it is too low and
            // this process may (root), never in the gateway's code.
            var limit = rlimit()
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            let most = deviceCounts.max() ?? 0
            let proxied = gateways > 1 && !direct
            // What one gateway holds: a socket for each device of its share. Behind HAProxy, the proxy
            // holds two for each device, one from it and one to a gateway.
            let perServer = proxied ? 2 * most : (most + gateways - 1) / gateways
            let needed = rlim_t(max(perServer, most) + 8_192)
            if limit.rlim_max < needed {
                var raised = limit
                (raised.rlim_cur, raised.rlim_max) = (needed, needed)
                if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
            }
            limit.rlim_cur = limit.rlim_max
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            let open = Int(min(limit.rlim_cur, rlim_t(Int32.max)))
            // Past the limit the streams would fail part-way. The devices are spread over processes of
            // their own when one cannot hold them all (``clientShares(_:open:)``); a gateway, or the
            // proxy, must hold its share.
            guard perServer + 1_024 <= open else {
                throw CLIError(.failure, "\(most) live devices need \(perServer + 1_024) open files in " + (proxied ? "HAProxy (two a device)" : gateways == 1 ? "the gateway" : "each gateway")
                               + "; a process may have \(open) here (the hard limit, which only a process with CAP_SYS_RESOURCE may raise): spread them over more gateways (--gateways N --direct)")
            }
            let cluster = try LocalPostgresCluster()
            defer { try? cluster.stop() }
            print("PostgreSQL cluster on 127.0.0.1:\(cluster.port) (fsync=off); one kvtool sync gateway process per run; loopback; open files \(open) a process")
            let groupIDs = (0..<groups).map { "group.bench.gateway.g\($0)" }
            let tokens = try groupIDs.map { group in
                try blocking { try await SyncTokens.issue(on: cluster.tcpURL, group: group, device: "bench").token }
            }
            for count in deviceCounts {
                try live(count: count, groupIDs: groupIDs, tokens: tokens, cluster: cluster, open: open)
            }
            if !skipPush { try push(cluster: cluster) }
        }

        /// Starts `kvtool sync gateway` (this executable) with limits that let one process open every
        /// stream (the devices of a group share its token here); returns it and its URL. It is killed
        /// if it still runs after an hour (a run takes minutes).
        /// The push budgets, raised for a --push-changes past what the defaults hold (the default run, 50,000
        /// changes of 100 bytes, is well within them and runs with them): the benchmark times pushes, not
        /// budgets.
        var pushBudgets: [String] {
            let defaults = SyncGateway.Limits()
            guard 2 * pushChanges > defaults.deviceChangesPerMinute || pushChanges * (valueSize + 20) > defaults.deviceBytesPerMinute / 2 else { return [] }
            let (changes, bytes) = (String(4 * pushChanges), String(4 * pushChanges * (valueSize + 64)))
            return ["--device-changes-per-minute", changes, "--group-changes-per-hour", changes,
                    "--device-bytes-per-minute", bytes, "--group-bytes-per-hour", bytes]
        }

        /// Trusts a proxy on this machine (`--trusted-proxy 127.0.0.1`) when `behindProxy`; runs under
        /// `--gateway-preload`'s library if given.
        func startGateway(_ cluster: LocalPostgresCluster, tls: TLSFiles? = nil, behindProxy: Bool = false) throws -> (ChildProcess, SyncGatewayURL) {
            // As deployed: a login that is only a member of kvsync_gateway (kvtool sync setup --gateway-login).
            let database = try blocking { try await cluster.prepareForGateways() }
            let arguments = ["sync", "gateway", "--database", database.description, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                             "--rate", "1000000", "--max-connections", "100000", "--max-streams", "100000", "--max-streams-per-credential", "100000"]
                + (tls.map { ["--tls-certificate", $0.certificate, "--tls-key", $0.key] } ?? [])
                + (behindProxy ? ["--trusted-proxy", "127.0.0.1"] : [])
                + pushBudgets
            let wrapper = gatewayWrapper?.split(separator: " ").map(String.init) ?? []
            // env replaces itself with the gateway: the process is still the gateway's.
            let program = (gatewayPreload.map { ["/usr/bin/env", "LD_PRELOAD=\($0)"] } ?? []) + [try Demo.programPath(nil)]
            let command = wrapper + program + arguments
            let process = try ChildProcess(program: command[0], arguments: Array(command.dropFirst()), timeout: 3600, relayIndent: nil)
            let ready = try process.ready(GatewayReadyLine.self, what: "the gateway")
            return (process, try SyncGatewayURL(ready.url, caFile: tls?.certificate))
        }

        /// Stops a gateway started by ``startGateway(_:tls:behindProxy:)`` (SIGTERM: it drains). Under
        /// `--gateway-wrapper` the gateway is the wrapper's child, which a signal to the wrapper would
        /// leave running: the wrapper's children that are this executable are signalled (not the
        /// profiler's own), and the wrapper waited for (a profiler writes its file once the gateway has
        /// exited).
        func stop(_ gateway: ChildProcess) {
            guard gatewayWrapper != nil, gateway.process.isRunning, let own = try? Demo.executablePath() else { return gateway.stop() }
            let pid = gateway.process.processIdentifier
            for child in Self.children(of: pid) {
                var buffer = [CChar](repeating: 0, count: 4096)
                let count = readlink("/proc/\(child)/exe", &buffer, buffer.count - 1)
                guard count > 0, String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) == own else { continue }
                kill(child, SIGTERM)
            }
            gateway.process.waitUntilExit()
        }

        /// A self-signed certificate for 127.0.0.1 and its key, made with openssl in `directory`; the
        /// devices trust that certificate alone.
        struct TLSFiles {
            var certificate: String
            var key: String

            init(in directory: String) throws {
                certificate = directory + "/gateway.pem"
                key = directory + "/gateway.key"
                let openssl = try ChildProcess(program: "/usr/bin/openssl",
                                               arguments: ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                                                           "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                                                           "-keyout", key, "-out", certificate],
                                               timeout: 60, relayIndent: nil, quietErrors: true)
                do {
                    try openssl.finish()
                } catch {
                    throw CLIError(.failure, "openssl could not make a test certificate")
                }
            }
        }

        /// User and system CPU time of this process, all threads, in seconds.
        static func cpuSeconds() -> Double {
            var usage = rusage()
            getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
            return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        }

        /// User and system CPU time of another process (`/proc/PID/stat`), in seconds; with
        /// `reapedChildren`, that of the children it waited for instead (`cutime`, `cstime`).
        static func cpuSeconds(of pid: Int32, reapedChildren: Bool = false) -> Double {
            let stat = procFile("/proc/\(pid)/stat")
            // The fields after the command name (which is in parentheses and may hold spaces).
            guard let close = stat.lastIndex(of: ")") else { return 0 }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            // utime and stime are fields 14 and 15 of the whole line (12 and 13 after the name);
            // cutime and cstime, 16 and 17.
            let first = reapedChildren ? 13 : 11
            guard fields.count > first + 1, let user = Double(fields[first]), let system = Double(fields[first + 1]) else { return 0 }
            return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
        }

        /// The live children of `pid` (`/proc/PID/task/PID/children`).
        static func children(of pid: Int32) -> [Int32] {
            procFile("/proc/\(pid)/task/\(pid)/children").split(separator: " ").compactMap { Int32($0) }
        }

        /// CPU time of a PostgreSQL server, in seconds: the postmaster's own and that of the children it
        /// reaped (backends that exited, as psql's does after a COPY), plus its live children's
        /// (backends, the WAL writer, the checkpointer).
        static func serverCPUSeconds(_ cluster: LocalPostgresCluster) -> Double {
            guard let pid = cluster.serverProcessID else { return 0 }
            return cpuSeconds(of: pid) + cpuSeconds(of: pid, reapedChildren: true) + children(of: pid).reduce(0) { $0 + cpuSeconds(of: $1) }
        }

        /// `body`, tried again a second later, up to 10 times, while the gateway answers 503 (its database
        /// was taken for unreachable: a probe without an answer on an overloaded machine), as a device does.
        static func retryingUnavailable<T>(_ body: () throws -> T) throws -> T {
            for _ in 1..<10 {
                do {
                    return try body()
                } catch ReplicationError.server(let line) where line.hasPrefix("the sync gateway answered 503") {
                    sleep(1)
                }
            }
            return try body()
        }

        /// The devices' ranges of indexes, one a process: all in this one when it may hold them with room to
        /// spare (`open` files a process) and no more processes are `asked`, else in as many `kvtool bench
        /// gateway-devices` processes as asked, or as hold them, in equal shares.
        static func clientShares(_ count: Int, open: Int, processes asked: Int? = nil) -> [Range<Int>] {
            let each = max(1, open - 2_048)
            let processes = min(count, max(asked ?? 1, count + 1_024 > open ? (count + each - 1) / each : 1))
            guard processes > 1 else { return [0..<count] }
            let share = (count + processes - 1) / processes
            return stride(from: 0, to: count, by: share).map { $0..<min(count, $0 + share) }
        }

        private func live(count: Int, groupIDs: [String], tokens: [String], cluster: LocalPostgresCluster, open: Int) throws {
            let directory = try Demo.temporaryDirectory("kvstore-bench-gateway-")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let tls = liveTls ? try TLSFiles(in: directory) : nil
            let proxied = gateways > 1 && !direct
            var fleet: [(process: ChildProcess, url: SyncGatewayURL)] = []
            defer { fleet.forEach { stop($0.process) } }
            for _ in 0..<gateways { fleet.append(try startGateway(cluster, tls: tls, behindProxy: proxied)) }
            let pids = fleet.map { $0.process.process.processIdentifier }
            // One loopback client address reaches one port from at most the ~28,000 ephemeral ports
            // Linux gives it (net.ipv4.ip_local_port_range): the proxy listens on one port per 20,000
            // devices, as a real balancer takes clients from many addresses.
            let proxy = try proxied ? LocalHAProxy(gateways: fleet.map(\.url.port),
                                                   maxConnections: count + 1_000, sharedPorts: (count + 19_999) / 20_000) : nil
            defer { proxy?.stop() }
            let urls = try proxy.map { proxy in try proxy.ports.map { try SyncGatewayURL("http://127.0.0.1:\($0)") } } ?? fleet.map(\.url)
            let url = urls[0]
            let idleAll = pids.map { residentMemory(of: $0) }
            // Device i is in group i % groups; its slot holds how many events it had and when the last came.
            let arrivals = Locked([(events: Int, at: UInt64)](repeating: (0, 0), count: count))
            let shares = Self.clientShares(count, open: open, processes: deviceProcesses)
            var workers: [ChildProcess] = []
            // Stopped before the gateways are (this runs first): their streams end, as the in-process ones do.
            defer { workers.forEach { $0.stop() } }
            let openStart = Bench.now()
            // Streams that ended and were opened again (a 503 while the machine is overloaded).
            let reconnections = Locked(0)
            let followers = shares.count > 1 ? [] : (0..<count).map { index in
                Task {
                    await GatewayDevices.follow(urls[index % urls.count], token: tokens[index % groupIDs.count], group: groupIDs[index % groupIDs.count]) {
                        let now = Bench.now()
                        arrivals.withLock { $0[index] = ($0[index].events + 1, now) }
                    } reconnecting: {
                        reconnections.withLock { $0 += 1 }
                    }
                }
            }
            defer { followers.forEach { $0.cancel() } }
            if shares.count > 1 {
                // The same devices, in processes of their own: each prints its devices' events, with the
                // time each came, and a thread here reads them.
                let plan = directory + "/devices.json"
                let planned = GatewayDevices.Plan(urls: urls.map(\.description), caFile: tls?.certificate, groups: groupIDs, tokens: tokens)
                guard FileManager.default.createFile(atPath: plan, contents: try JSONEncoder().encode(planned), attributes: [.posixPermissions: 0o600]) else {
                    throw CLIError(.failure, "cannot write the devices' plan \(plan)")
                }
                for share in shares {
                    let worker = try ChildProcess(arguments: ["bench", "gateway-devices", "--plan", plan, "--from", String(share.lowerBound), "--to", String(share.upperBound)],
                                                  timeout: 3600, relayIndent: nil)
                    workers.append(worker)
                    nonisolated(unsafe) let reading = worker
                    Thread {
                        while let line = reading.nextLine() {
                            if line.hasPrefix("R ") { reconnections.withLock { $0 += 1 } }
                            let fields = line.split(separator: " ")
                            guard fields.count == 3, fields[0] == "E", let index = Int(fields[1]), (0..<count).contains(index),
                                  let at = UInt64(fields[2]) else { continue }
                            arrivals.withLock { $0[index] = ($0[index].events + 1, at) }
                        }
                    }.start()
                }
            }
            let openDeadline = Bench.now() + 300_000_000_000
            while arrivals.withLock({ $0.contains { $0.events == 0 } }) {
                guard Bench.now() < openDeadline else {
                    let open = arrivals.withLock { $0.filter { $0.events > 0 }.count }
                    throw CLIError(.failure, "only \(open) of \(count) live streams opened within 300 s")
                }
                if let ended = workers.first(where: { !$0.process.isRunning }) {
                    throw CLIError(.failure, "a process of live devices ended (status \(ended.process.terminationStatus)) before every stream opened")
                }
                usleep(10_000)
            }
            let openSeconds = Double(Bench.now() - openStart) / 1e9
            let openedAll = pids.map { residentMemory(of: $0) }
            let descriptors = pids.map { ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\($0)/fd")) ?? []).count }
            // Every connection the gateways hold to the database, as the server counts them.
            let connections = try cluster.psql("""
                SELECT coalesce(sum(n), 0) || ' (' || coalesce(string_agg(n || ' ' || s, ', '), '') || ')' FROM
                (SELECT coalesce(state, 'none') || ' ''' || left(regexp_replace(query, '\\s+', ' ', 'g'), 32) || '''' AS s, count(*) AS n
                 FROM pg_stat_activity WHERE usename = '\(LocalPostgresCluster.gatewayLogin)' GROUP BY 1 ORDER BY 1) AS c
                """).trimmingCharacters(in: .whitespacesAndNewlines)

            // One device per sampled group commits through the gateway; each device of the group is timed.
            var latencies: [Double] = []
            for sample in 0..<samples {
                let group = sample % groupIDs.count
                // A credential of its own: a credential is one device, and the live devices of the group
                // (which never push) share theirs.
                let writerToken = try blocking {
                    try await SyncTokens.issue(on: cluster.tcpURL, group: groupIDs[group], device: "writer-\(count)-\(sample)").token
                }
                let writer = try BenchDevice(group: groupIDs[group], .gateway(url, token: writerToken))
                _ = try Self.retryingUnavailable { try blocking { try await writer.replicator.sync() } }
                let members = stride(from: group, to: count, by: groupIDs.count).map { $0 }
                let before = arrivals.withLock { state in members.map { state[$0].events } }
                try writer.write([("sample-\(sample)", "v")])
                let start = Bench.now()
                _ = try Self.retryingUnavailable { try blocking { try await writer.replicator.push() } }
                let deadline = start + 30_000_000_000
                while true {
                    let (done, times) = arrivals.withLock { state -> (Bool, [UInt64]) in
                        let times = zip(members, before).map { state[$0.0].events > $0.1 ? state[$0.0].at : 0 }
                        return (!times.contains(0), times)
                    }
                    if done {
                        latencies += times.map { Double($0 &- start) / 1e6 }
                        break
                    }
                    guard Bench.now() < deadline else { throw CLIError(.failure, "a commit did not reach every device of its group within 30 s") }
                    usleep(200)
                }
                _ = try? blocking { await writer.replicator.close() }
            }
            latencies.sort()
            func percentile(_ p: Double) -> Double { latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
            let afterAll = pids.map { residentMemory(of: $0) }
            let (idle, opened, after) = (idleAll[0], openedAll[0], afterAll[0])
            // Gateway 0's devices: its share of the addresses directly, about an equal share behind the proxy.
            let onFirst = proxied ? Double(count) / Double(gateways) : Double((count + urls.count - 1) / urls.count)
            let reconnected = reconnections.withLock { $0 }
            let spread = (reconnected == 0 ? "" : " (\(reconnected) streams ended and were opened again)")
                + (shares.count == 1 ? "" : " (followed from \(shares.count) processes of \(shares[0].count) or fewer)")
                + (gateways == 1 ? "" : " on \(gateways) gateways" + (proxied ? " behind HAProxy" : " (spread directly)") + ", RSS of gateway 0")
            print(String(format: "%6d live devices in %d groups" + (liveTls ? " over TLS" : "") + spread + ": opened in %.1f s; a commit reached all %d devices of its group (%d samples, %d arrivals): p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms; gateway RSS idle %.1f MiB, with the streams %.1f MiB, peak %.1f MiB (%.1f MiB once they opened, before the commits) (%.1f KiB a device over idle, %.1f KiB at the peak)",
                         count, groupIDs.count, openSeconds, max(1, count / groupIDs.count), samples, latencies.count,
                         percentile(0.5), percentile(0.9), percentile(0.99), latencies.last ?? 0, idle.now, opened.now, after.peak, opened.peak,
                         (opened.now - idle.now) * 1024 / onFirst, (after.peak - idle.now) * 1024 / onFirst))
            guard gateways > 1 else { return Output.flush() }
            for (index, memory) in afterAll.enumerated() {
                print(String(format: "   gateway %d: %d open descriptors (one a stream), RSS idle %.1f MiB, with the streams %.1f MiB, peak (VmHWM) %.1f MiB (%.1f once they opened)",
                             index, descriptors[index], idleAll[index].now, openedAll[index].now, memory.peak, openedAll[index].peak))
            }
            print("   PostgreSQL connections of the gateways (pg_stat_activity, with the streams open): \(connections); each gateway's pool holds up to \(SyncGateway.Limits().databaseConnections)")
            Output.flush()
        }

        /// One device pushes `pushChanges` changes through the gateway, then directly; then a COPY of as
        /// many rows into the log, the floor.
        private func push(cluster: LocalPostgresCluster) throws {
            let (gateway, url) = try startGateway(cluster)
            // The same gateway over TLS, with a certificate made for the run (if openssl is there).
            let directory = try Demo.temporaryDirectory("kvstore-bench-gateway-")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let tls = FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") ? try TLSFiles(in: directory) : nil
            let secure = try tls.map { try startGateway(cluster, tls: $0) }
            defer {
                for process in [gateway, secure?.0].compactMap({ $0 }) { stop(process) }
            }
            let value = String(repeating: "v", count: valueSize)
            let token = try blocking { try await SyncTokens.issue(on: cluster.tcpURL, group: "group.bench.gateway.push", device: "pusher").token }
            let tlsToken = try blocking { try await SyncTokens.issue(on: cluster.tcpURL, group: "group.bench.gateway.tls", device: "pusher").token }
            // The CPU time each process spent, in µs per change: steadier than the rate on a shared
            // machine, where the client, the gateway and the server compete for the same cores.
            // The server's share too (PostgreSQL's processes, the floor's included): where a push's
            // time goes, before choosing how to bring it nearer to COPY.
            func timed(_ device: BenchDevice, via gateway: ChildProcess) throws -> (rate: Double, client: Double, gateway: Double, server: Double) {
                _ = try blocking { try await device.replicator.sync() }
                try device.write((0..<pushChanges).map { (String(format: "key-%08d", $0), value) })
                let (clientBefore, gatewayBefore) = (Self.cpuSeconds(), Self.cpuSeconds(of: gateway.process.processIdentifier))
                let serverBefore = Self.serverCPUSeconds(cluster)
                let start = Bench.now()
                let report = try blocking { try await device.replicator.push() }
                let seconds = Double(Bench.now() - start) / 1e9
                let (clientAfter, gatewayAfter) = (Self.cpuSeconds(), Self.cpuSeconds(of: gateway.process.processIdentifier))
                let serverAfter = Self.serverCPUSeconds(cluster)
                guard report.pushed == pushChanges else { throw CLIError(.failure, "pushed \(report.pushed) of \(pushChanges)") }
                _ = try? blocking { await device.replicator.close() }
                let perChange = { (before: Double, after: Double) in (after - before) * 1e6 / Double(pushChanges) }
                return (Double(pushChanges) / seconds, perChange(clientBefore, clientAfter), perChange(gatewayBefore, gatewayAfter),
                        perChange(serverBefore, serverAfter))
            }
            let through = try timed(try BenchDevice(group: "group.bench.gateway.push", .gateway(url, token: token)), via: gateway)
            let overTLS = try secure.map { try timed(try BenchDevice(group: "group.bench.gateway.tls", .gateway($0.1, token: tlsToken)), via: $0.0) }
            let direct = try timed(try BenchDevice(group: "group.bench.gateway.direct", .database(cluster.tcpURL)), via: gateway)
            // The floor: the same rows written with COPY, no checks, no state, no outcome per change.
            let hexValue = value.utf8.map { String(format: "%02x", $0) }.joined()
            let (copy, copyServer) = try timedCopy(cluster: cluster, rows: pushChanges,
                                                   into: "kvsync_changes (group_id, device, token, kind, name, key, value, hlc, base)") { index, key in
                "group.bench.gateway.copy,copier,\(index + 1),collection,bench,\\x\(key),\\x\(hexValue),\(index + 1),0"
            }
            print(String(format: "one device pushing %d changes of %d bytes: through the gateway %.0f changes/s, directly %.0f changes/s; COPY of the same rows into the log (the floor) %.0f rows/s (the gateway is %.1f× slower than COPY); CPU per change: the device %.1f µs through the gateway and %.1f µs directly, the gateway %.1f µs",
                         pushChanges, valueSize, through.rate, direct.rate, copy, copy / through.rate, through.client, direct.client, through.gateway))
            print(String(format: "PostgreSQL's CPU per change (all its processes): %.1f µs through the gateway, %.1f µs directly, %.1f µs a row of the COPY",
                         through.server, direct.server, copyServer))
            // The server alone, the same rows written the least ways a push could (part 5's floor).
            let floor = try serverFloor(cluster: cluster, rows: pushChanges, batch: Replicator.Options().batchSize)
            print(String(format: "the server alone, psql, batches of %d (its CPU a row, the arrays' building, %.1f µs, taken off): a bare INSERT into the log %.1f µs (%.1f× a COPY row), into the log and the state %.1f µs (%.1f×), kvsync_push %.1f µs (%.1f×)",
                         Replicator.Options().batchSize, floor.arrays, floor.log, floor.log / copyServer, floor.logAndState,
                         floor.logAndState / copyServer, floor.push, floor.push / copyServer))
            // The other reading of "COPY of the same rows": COPY of every row the push writes, a log row
            // and a state row per change, one after the other.
            let copyBoth = 1 / (1 / copy + 1 / floor.copyStateRate)
            print(String(format: "COPY of the same rows into the state %.0f rows/s, %.1f µs of the server's CPU a row; COPY of both rows a push writes per change (the log's, then the state's) %.0f changes/s: the gateway is %.1f× slower than that",
                         floor.copyStateRate, floor.copyState, copyBoth, copyBoth / through.rate))
            if let overTLS {
                print(String(format: "the same push through the gateway over TLS (https, a certificate made for the run): %.0f changes/s; CPU per change: the device %.1f µs, the gateway %.1f µs",
                             overTLS.rate, overTLS.client, overTLS.gateway))
            } else {
                print("the push over TLS was not timed: /usr/bin/openssl is missing")
            }
        }
    }
}
#endif
