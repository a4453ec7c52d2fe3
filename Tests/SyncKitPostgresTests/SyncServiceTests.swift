#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import PostgresTesting
import TestSupport
import SyncTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Sync as a service of the container (issue 38), across real processes: `kvtool sync request` from
/// several processes at once (with no owner, starting the registered agent; with a live owner; through
/// a gateway), `kill -9` of the owner while a standby waits, an agent that cannot reach its server, the
/// status every process reads, and a registration that is not trusted blindly. A real PostgreSQL
/// cluster, real `kvtool` processes, each with a timeout; every wait is for a condition, with a deadline.
@Suite(.serialized) struct SyncServiceTests {
    static func group(_ name: String) -> String { "group.com.example.service.\(name)" }

    /// Nothing listens on port 1 of the loopback: every connection is refused at once.
    static let deadServer = "postgres://u@127.0.0.1:1/db"

    // MARK: - Helpers

    /// The first line of `text` that is a JSON object, parsed.
    static func json(_ text: String) -> [String: Any]? {
        for line in text.split(separator: "\n") where line.hasPrefix("{") {
            if let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] { return object }
        }
        return nil
    }

    /// The owner `kvtool sync status --json` shows under "service" (its pid and mode), or `nil`.
    static func shownOwner(_ device: Device) throws -> (pid: Int, mode: String)? {
        let result = try device.kvtool(["sync", "status", "--json"], timeout: BuildScale.seconds(60))
        guard result.status == 0, let data = result.stdout.data(using: .utf8),
              let object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
              let owner = (object["service"] as? [String: Any])?["owner"] as? [String: Any],
              let pid = owner["pid"] as? Int else { return nil }
        return (pid, owner["mode"] as? String ?? "?")
    }

    /// `kvtool put notes KEY '"VALUE"'`, then `kvtool sync request --wait SECONDS --json`: two processes,
    /// one after the other.
    static func putAndRequest(_ device: Device, key: String, wait: Double) throws -> (put: ProcessResult, request: ProcessResult) {
        let put = try device.kvtool(["put", "notes", key, "\"written by a process of its own\""], timeout: BuildScale.seconds(60))
        let request = try device.kvtool(["sync", "request", "--wait", "\(Int(wait))", "--json"], timeout: wait + BuildScale.seconds(60))
        return (put, request)
    }

    /// Three processes at once, each writing its own key and asking for it to reach the server; each
    /// must answer "acknowledged".
    static func threeRequestsAtOnce(_ device: Device, prefix: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let wait = BuildScale.seconds(30)
        let results = try await withThrowingTaskGroup(of: (String, ProcessResult, ProcessResult).self) { group in
            for index in 0..<3 {
                let key = "\(prefix)\(index)"
                group.addTask { try await offPool { let (put, request) = try putAndRequest(device, key: key, wait: wait); return (key, put, request) } }
            }
            var all: [(String, ProcessResult, ProcessResult)] = []
            for try await result in group { all.append(result) }
            return all
        }
        #expect(results.count == 3, sourceLocation: sourceLocation)
        for (key, put, request) in results {
            #expect(put.status == 0, "put \(key): \(put.stderr)", sourceLocation: sourceLocation)
            #expect(request.status == 0, "request after \(key): \(request.stdout)\(request.stderr)", sourceLocation: sourceLocation)
            #expect(json(request.stdout)?["outcome"] as? String == "acknowledged", "\(request.stdout)", sourceLocation: sourceLocation)
        }
    }

    /// The hex of every key of the device's `notes`.
    static func localKeys(_ device: Device) throws -> Set<String> {
        Set(try device.container.store.untypedCollection(named: "notes").collection.entries().map { Hex.encode($0.key.bytes) })
    }

    /// The server's change log of `group`'s `notes`, in sequence order.
    static func serverLog(_ cluster: LocalPostgresCluster, group: String) throws -> [(device: String, token: UInt64, key: String)] {
        try cluster.psql("""
            SELECT device || '|' || token || '|' || encode(key, 'hex') FROM kvsync_changes
            WHERE group_id = '\(group)' AND kind = 'collection' AND name = 'notes' ORDER BY seq
            """).split(separator: "\n").compactMap { line in
            let fields = line.split(separator: "|", omittingEmptySubsequences: false)
            guard fields.count == 3, let token = UInt64(fields[1]) else { return nil }
            return (String(fields[0]), token, String(fields[2]))
        }
    }

    /// What is wrong with the server's log of `group`'s `notes` (empty when nothing is): every key of
    /// `expected` (hex) must be there exactly once, nothing else, no (device, token) twice, and each
    /// device's history tokens (below 2^62) strictly increasing in the server's sequence order.
    static func logProblems(_ cluster: LocalPostgresCluster, group: String, expected: Set<String>) throws -> [String] {
        let log = try serverLog(cluster, group: group)
        var problems: [String] = []
        var perKey: [String: Int] = [:]
        for row in log { perKey[row.key, default: 0] += 1 }
        let missing = expected.subtracting(perKey.keys)
        let extra = Set(perKey.keys).subtracting(expected)
        let twice = perKey.filter { $0.value > 1 }
        if !missing.isEmpty { problems.append("\(missing.count) keys written never reached the server: \(missing.sorted().prefix(5))") }
        if !extra.isEmpty { problems.append("keys on the server that were never written: \(extra.sorted().prefix(5))") }
        if !twice.isEmpty { problems.append("keys in the log more than once: \(twice.sorted { $0.key < $1.key }.prefix(5))") }
        let duplicates = try cluster.count("""
            SELECT count(*) FROM (SELECT device, token FROM kvsync_changes WHERE group_id = '\(group)'
                                  GROUP BY device, token HAVING count(*) > 1) AS twice
            """)
        if duplicates != 0 { problems.append("\(duplicates) (device, token) pairs in the log more than once") }
        var last: [String: UInt64] = [:]
        var outOfOrder: [String] = []
        for row in log where row.token < (1 << 62) {
            if let previous = last[row.device], row.token <= previous { outOfOrder.append("\(row.device): \(previous) then \(row.token)") }
            last[row.device] = row.token
        }
        if !outOfOrder.isEmpty { problems.append("history tokens out of order in the server's log: \(outOfOrder.prefix(5))") }
        if log.isEmpty { problems.append("the server's log is empty") }
        return problems
    }

    static func expectLogHoldsEachOnceInOrder(_ cluster: LocalPostgresCluster, group: String, expected: Set<String>,
                                              sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let problems = try await offPool { try logProblems(cluster, group: group, expected: expected) }
        #expect(problems.isEmpty, "\(problems)", sourceLocation: sourceLocation)
    }

    /// The container's `.sync-agent.log` (empty when no agent was started).
    static func agentLog(_ device: Device) -> String {
        (try? String(contentsOfFile: device.container.path + "/" + SyncAgentRegistration.logName, encoding: .utf8)) ?? ""
    }

    /// Waits until no live process owns the container's sync (started agents exit when idle), so that
    /// none outlives the test's container and cluster.
    static func waitForNoOwner(_ device: Device, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let service = try SyncService(container: device.container)
        let none = try await offPool { try eventually(BuildScale.seconds(60), every: 20_000) { try service.status().owner == nil } }
        let owner = try service.status().owner
        #expect(none, "a process still owns sync: \(String(describing: owner))", sourceLocation: sourceLocation)
    }

    /// A live `kvtool sync run` (bounded by `--seconds`), once it says it syncs.
    static func liveOwner(_ device: Device, _ url: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> BackgroundProcess {
        let owner = try device.kvtoolInBackground(["sync", "run", "--server", url, "--seconds", "600"])
        let line = try await offPool { owner.waitForLine(timeout: BuildScale.seconds(60)) { $0.hasPrefix("device ") && $0.contains(" syncing ") } }
        #expect(line != nil, "the live owner did not start: \(owner.output)", sourceLocation: sourceLocation)
        return owner
    }

    // MARK: - 1. Requests from three processes at once

    @Test func threeRequestsAtOnceWithNoOwnerStartTheAgentAndAreEachAcknowledgedOnce() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let url = cluster.tcpURL.description
        let group = Self.group("no-owner")
        let device = try Device(group: group)
        let set = try await device.kvtoolOffPool(["sync", "agent", "set", "--server", url])
        #expect(set.status == 0, "\(set.stderr)")
        try await Self.threeRequestsAtOnce(device, prefix: "agent-")
        // Again once the agents have exited (idle): the next three find no owner either.
        try await Self.waitForNoOwner(device)
        try await Self.threeRequestsAtOnce(device, prefix: "again-")
        try await Self.waitForNoOwner(device)
        let keys = try Self.localKeys(device)
        #expect(keys.count == 6)
        try await Self.expectLogHoldsEachOnceInOrder(cluster, group: group, expected: keys)
        let log = Self.agentLog(device)
        #expect(!log.isEmpty, "no agent was started")
        #expect(!log.contains("two owners"), "\(log)")
        #expect(!log.contains("error"), "an agent failed: \(log)")
        print("SyncServiceTests: the agents' log after six requests:\n\(log)")
    }

    @Test func threeRequestsAtOnceWithALiveOwnerAreEachAcknowledgedOnce() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let url = cluster.tcpURL.description
        let group = Self.group("live-owner")
        let device = try Device(group: group)
        let owner = try await Self.liveOwner(device, url)
        try await Self.threeRequestsAtOnce(device, prefix: "live-")
        // No agent is registered and none was needed.
        #expect(Self.agentLog(device).isEmpty)
        #expect(try await offPool { stop([owner]) })
        let keys = try Self.localKeys(device)
        #expect(keys.count == 3)
        try await Self.expectLogHoldsEachOnceInOrder(cluster, group: group, expected: keys)
    }

    @Test(.blockingWork) func threeRequestsAtOnceThroughAGatewayAgentAreEachAcknowledgedOnce() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let group = Self.group("gateway")
        let (gateway, gatewayURL) = try await startGateway(cluster)
        defer { gateway.kill(SIGKILL); _ = gateway.wait(timeout: 30) }
        let token = try await issueToken(cluster, ["--group", group])
        let device = try Device(group: group)
        let tokenFile = device.directory.path + "/token"
        #expect(FileManager.default.createFile(atPath: tokenFile, contents: Data((token + "\n").utf8), attributes: [.posixPermissions: 0o600]))
        let set = try await device.kvtoolOffPool(["sync", "agent", "set", "--server", gatewayURL, "--token-file", tokenFile])
        #expect(set.status == 0, "\(set.stderr)")
        #expect(!set.stdout.contains(token) && !set.stderr.contains(token))
        try await Self.threeRequestsAtOnce(device, prefix: "gw-")
        try await Self.waitForNoOwner(device)
        let keys = try Self.localKeys(device)
        #expect(keys.count == 3)
        try await Self.expectLogHoldsEachOnceInOrder(cluster, group: group, expected: keys)
        let log = Self.agentLog(device)
        #expect(!log.isEmpty, "no agent was started")
        #expect(!log.contains("two owners"), "\(log)")
        #expect(!log.contains("error"), "an agent failed: \(log)")
        #expect(!log.contains(token), "the agent's log shows its credential")
    }

    // MARK: - 2. kill -9 of the owner, twenty times (two hundred in `make stress`)

    @Test func aStandbyTakesOverEachTimeTheOwnerIsKilledMidPushAndNothingIsLostOrSentTwice() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let url = cluster.tcpURL.description
        let group = Self.group("kill")
        let device = try Device(group: group)
        var owner = try await Self.liveOwner(device, url)

        // A writer: keys keep coming while owners are killed.
        let stopWriting = Locked(false)
        let written = Locked(0)
        let writeError = Locked<String?>(nil)
        let writer = Thread {
            var index = 0
            while !stopWriting.withLock({ $0 }) {
                do {
                    try device.put("value \(index)", "w\(index)")
                    index += 1
                    written.withLock { $0 = index }
                } catch {
                    writeError.withLock { $0 = "\(error)" }
                    return
                }
                usleep(UInt32.random(in: 1_000...8_000))
            }
        }
        writer.start()

        var takeovers: [Double] = []
        var standbys: [BackgroundProcess] = [owner]
        defer {
            stopWriting.withLock { $0 = true }
            for process in standbys { process.kill(SIGKILL) }
        }
        // 20 in `make test`, 200 in `make stress`.
        let rounds = StressLevel.pick(short: 20, long: 200)
        for round in 0..<rounds {
            let standby = try device.kvtoolInBackground(["sync", "run", "--server", url, "--seconds", "600"])
            standbys.append(standby)
            let waiting = try await offPool { standby.waitForLine(timeout: BuildScale.seconds(60)) { $0.hasPrefix("standby:") } }
            #expect(waiting?.contains("pid \(owner.pid)") == true, "round \(round): \(standby.output)")
            guard waiting != nil else { break }
            // A random point of the owner's pushes.
            try await Task.sleep(for: .milliseconds(Int.random(in: 10...400)))
            let killedAt = ContinuousClock.now
            owner.kill(SIGKILL)
            let took = try await offPool { standby.waitForLine(timeout: BuildScale.seconds(60)) { $0.hasPrefix("took over") } }
            let elapsed = ContinuousClock.now - killedAt
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            #expect(took != nil, "round \(round): the standby did not take over: \(standby.output)")
            #expect(took?.contains("(pid \(standby.pid))") == true, "\(took ?? "")")
            #expect(seconds < BuildScale.seconds(10), "round \(round): took over after \(seconds) s")
            takeovers.append(seconds)
            let killed = owner
            _ = try await offPool { killed.wait(timeout: 30) }
            guard took != nil else { break }
            owner = standby
        }
        stopWriting.withLock { $0 = true }
        while !writer.isFinished { try await Task.sleep(for: .milliseconds(10)) }
        #expect(writeError.withLock { $0 } == nil)
        let sorted = takeovers.sorted()
        if !sorted.isEmpty {
            let ms = sorted.map { Int(($0 * 1000).rounded()) }
            print("SyncServiceTests: takeover after kill -9 (\(BuildScale.name), \(ms.count) rounds): min \(ms.first!) ms, median \(ms[ms.count / 2]) ms, max \(ms.last!) ms; all: \(ms)")
        }
        #expect(takeovers.count == rounds)

        // The last owner pushes everything written; then the server's log is checked.
        let request = try await device.kvtoolOffPool(["sync", "request", "--wait", "\(Int(BuildScale.seconds(60)))", "--json"])
        #expect(request.status == 0 && Self.json(request.stdout)?["outcome"] as? String == "acknowledged", "\(request.stdout)\(request.stderr)")
        let last = owner
        #expect(try await offPool { stop([last]) })
        let count = written.withLock { $0 }
        let keys = try Self.localKeys(device)
        #expect(keys.count == count && count > 0, "\(keys.count) keys here, \(count) written")
        print("SyncServiceTests: \(count) keys written while \(rounds) owners were killed")
        try await Self.expectLogHoldsEachOnceInOrder(cluster, group: group, expected: keys)
    }

    // MARK: - 3. An agent that cannot reach its server

    @Test func aRequestWhoseAgentCannotReachTheServerSaysWhyAndALaterOneDelivers() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let url = cluster.tcpURL.description
        let group = Self.group("unreachable")
        let device = try Device(group: group)
        let set = try await device.kvtoolOffPool(["sync", "agent", "set", "--server", Self.deadServer])
        #expect(set.status == 0, "\(set.stderr)")
        try device.put("waits for a reachable server", "k")
        // (Scaled for a slow build's start, but well within the agent's 30 s of retries.)
        let wait = Int(min(BuildScale.seconds(3), 15).rounded(.up))
        let refused = try await device.kvtoolOffPool(["sync", "request", "--wait", "\(wait)"])
        #expect(refused.status == 69, "\(refused.stdout)\(refused.stderr)")
        let line = refused.stdout.split(separator: "\n").first.map(String.init) ?? ""
        #expect(refused.stdout.split(separator: "\n").count == 1, "\(refused.stdout)")
        #expect(line.hasPrefix("not within the deadline"), "\(line)")
        #expect(line.contains("last error (unreachable)"), "\(line)")

        // The agent retries its old endpoint (for --give-up-after, 30 s): it still owns sync, and the
        // request did not wait for it (an agent that kept the requester's output open would have held
        // it until it gave up). It is stopped by its pid, as its owner record shows it.
        let service = try SyncService(container: device.container)
        let retrying = try service.status().owner
        #expect(retrying != nil, "the agent no longer owns sync when the request returned")
        if let agent = retrying {
            #expect(agent.mode == .once)
            let shown = try await offPool { try Self.shownOwner(device) }
            #expect(shown?.pid == Int(agent.pid) && shown?.mode == "once", "\(String(describing: shown))")
            if agent.isAlive { _ = kill(agent.pid, SIGKILL) }
        }
        try await Self.waitForNoOwner(device)

        let reset = try await device.kvtoolOffPool(["sync", "agent", "set", "--server", url])
        #expect(reset.status == 0, "\(reset.stderr)")
        let delivered = try await device.kvtoolOffPool(["sync", "request", "--wait", "\(Int(BuildScale.seconds(30)))", "--json"])
        #expect(delivered.status == 0 && Self.json(delivered.stdout)?["outcome"] as? String == "acknowledged",
                "\(delivered.stdout)\(delivered.stderr)")
        #expect(try await offPool { try device.storedNotes() == cluster.storedNotes(group: group) })
        #expect(try await offPool { try cluster.storedNotes(group: group).count } == 1)
        #expect(try service.status().isSynced)
        try await Self.waitForNoOwner(device)
        #expect(!Self.agentLog(device).contains("two owners"))
    }

    // MARK: - 4. Status every process reads

    @Test func everyProcessSeesTheStatusAnotherProcessRecords() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let url = cluster.tcpURL.description
        let group = Self.group("status")
        let device = try Device(group: group)
        try device.put("pending", "k")
        let service = try SyncService(container: device.container)
        #expect(try !service.status().isSynced)

        // This process observes; another one syncs.
        let seen = Locked<[Bool]>([])
        let observing = Task { () -> Bool in
            do {
                for try await status in service.statusObservation.values(in: device.container) {
                    seen.withLock { $0.append(status.isSynced) }
                    if status.isSynced { return true }
                }
            } catch {
                Issue.record("the observation failed: \(error)")
            }
            return false
        }
        #expect(await eventuallyAsync(BuildScale.seconds(30)) { !seen.withLock { $0 }.isEmpty })
        #expect(seen.withLock { $0.first } == false)
        let round = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", url])
        #expect(round.status == 0, "\(round.stderr)")
        let synced = await outcome(of: observing, within: BuildScale.seconds(30))
        #expect(synced == true, "observed: \(seen.withLock { $0 })")

        // A live owner: `sync status` in another process names it.
        let owner = try await Self.liveOwner(device, url)
        let shown = try await offPool { try Self.shownOwner(device) }
        #expect(shown?.pid == Int(owner.pid) && shown?.mode == "live", "\(String(describing: shown))")
        let text = try await device.kvtoolOffPool(["sync", "status"])
        #expect(text.stdout.contains("owner pid \(owner.pid) (live)"), "\(text.stdout)")
        // And its rounds are seen here: a new write is pending, then synced.
        try device.put("later", "k2")
        #expect(await eventuallyAsync(BuildScale.seconds(30)) { (try? service.status().isSynced) == true })
        #expect(try await offPool { stop([owner]) })
        #expect(try service.status().owner == nil)
    }

    // MARK: - 5. The registration is not trusted blindly

    @Test func aRegistrationThatIsALinkOrReadableByOthersIsRefusedAndShowNeverPrintsTheToken() async throws {
        let group = Self.group("trust")
        let device = try Device(group: group)
        let marker = device.directory.path + "/agent-started"
        let program = device.directory.path + "/agent.sh"
        try "#!/bin/sh\necho started >> '\(marker)'\n".write(toFile: program, atomically: true, encoding: .utf8)
        chmod(program, 0o755)
        let set = try await device.kvtoolOffPool(["sync", "agent", "set", "--server", Self.deadServer, "--program", program])
        #expect(set.status == 0, "\(set.stderr)")
        let registration = try SyncAgentRegistration.registrationPath(for: device.container)
        var info = stat()
        #expect(lstat(registration, &info) == 0 && info.st_mode & 0o777 == 0o600)
        // Something to push: a request with nothing pending is acknowledged at once.
        try device.put("pending", "k")

        func request() async throws -> (status: Int32, agent: String) {
            let result = try await device.kvtoolOffPool(["sync", "request", "--wait", "\(Int(BuildScale.seconds(1)))", "--json"])
            return (result.status, Self.json(result.stdout)?["agent"] as? String ?? "(no agent note: \(result.stdout)\(result.stderr))")
        }
        // As registered, a request starts it (the program exits at once, having left its mark).
        let valid = try await request()
        #expect(valid.status == 69)
        #expect(valid.agent.contains("exited with status 0"), "\(valid.agent)")
        #expect(try await offPool { eventually(BuildScale.seconds(10)) { FileManager.default.fileExists(atPath: marker) } })
        unlink(marker)

        // Readable by others: refused, nothing started.
        chmod(registration, 0o644)
        let readable = try await request()
        #expect(readable.status == 69)
        #expect(readable.agent.contains("invalid sync agent registration") && readable.agent.contains("readable or writable by others"),
                "\(readable.agent)")
        let show = try await device.kvtoolOffPool(["sync", "agent", "show"])
        #expect(show.status != 0 && show.stderr.contains("invalid sync agent registration"), "\(show.stdout)\(show.stderr)")

        // A symbolic link to a registration that is itself 0600: not followed.
        chmod(registration, 0o600)
        let elsewhere = device.directory.path + "/registration-elsewhere"
        #expect(rename(registration, elsewhere) == 0)
        #expect(symlink(elsewhere, registration) == 0)
        let linked = try await request()
        #expect(linked.status == 69)
        #expect(linked.agent.contains("invalid sync agent registration") && linked.agent.contains("symbolic link"), "\(linked.agent)")
        // (A program started would have left its mark within this grace; absence cannot be waited for.)
        usleep(UInt32(BuildScale.seconds(0.5) * 1_000_000))
        #expect(!FileManager.default.fileExists(atPath: marker), "a refused registration's program was started")
        unlink(registration)

        // A gateway credential is registered, never shown.
        let token = "kvs1_" + String(repeating: "B", count: 43)
        let tokenFile = device.directory.path + "/token"
        #expect(FileManager.default.createFile(atPath: tokenFile, contents: Data(token.utf8), attributes: [.posixPermissions: 0o600]))
        let gateway = try await device.kvtoolOffPool(["sync", "agent", "set", "--server", "http://127.0.0.1:1", "--token-file", tokenFile])
        #expect(gateway.status == 0, "\(gateway.stderr)")
        for arguments in [["sync", "agent", "show"], ["sync", "agent", "show", "--json"], ["sync", "status"], ["sync", "status", "--json"]] {
            let result = try await device.kvtoolOffPool(arguments)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            #expect(!result.stdout.contains(token) && !result.stderr.contains(token), "\(arguments) printed the token")
        }
        let shown = try await device.kvtoolOffPool(["sync", "agent", "show"])
        #expect(shown.stdout.contains("(with a credential)"), "\(shown.stdout)")
        #expect(lstat(registration, &info) == 0 && info.st_mode & 0o777 == 0o600)
    }

    // MARK: - 6. --once while a live owner runs

    @Test func aOnceRunWhileALiveOwnerRunsHandsItsRoundToTheOwner() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let url = cluster.tcpURL.description
        let group = Self.group("hand-off")
        let device = try Device(group: group)
        let owner = try await Self.liveOwner(device, url)
        try device.put("handed over", "k")
        let once = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", url])
        #expect(once.status == 0, "\(once.stdout)\(once.stderr)")
        #expect(once.stdout.contains("pid \(owner.pid) owns sync of \(group); handing this round to it"), "\(once.stdout)")
        #expect(once.stdout.contains("the owner pushed every change through token"), "\(once.stdout)")
        #expect(try await offPool { try cluster.storedNotes(group: group) } == device.storedNotes())
        #expect(try await offPool { stop([owner]) })
    }
}
#endif
