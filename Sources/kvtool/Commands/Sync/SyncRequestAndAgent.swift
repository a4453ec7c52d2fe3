#if PostgreSQL
import ArgumentParser
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres

extension SyncCommand.ServerOption {
    /// ``endpoint()``, or, when neither `--server` nor `$KVSTORE_SYNC_SERVER` names one, the endpoint
    /// registered for the container's agent (`kvtool sync agent set`).
    func endpoint(orRegisteredIn container: SharedContainer) throws -> Replicator.Endpoint {
        if text != nil { return try endpoint() }
        SyncCommand.moveLegacyAgent(of: container)
        guard let registration = try SyncAgentRegistration.load(from: container), let server = registration.server else {
            return try endpoint()   // throws "no server"
        }
        guard SyncGatewayURL.isGateway(server) else { return .database(try ServerURL(server)) }
        guard let token = registration.token else {
            throw CLIError(.usage, "the registered agent's gateway has no credential: kvtool sync agent set --server URL --token-file FILE")
        }
        return .gateway(try SyncGatewayURL(server, caFile: registration.caFile, allowInsecureHTTP: registration.allowInsecureHTTP),
                        token: token)
    }
}

extension SyncCommand {
    /// What `kvtool sync agent set` registers as the agent of `container`: `executable` run as `sync run
    /// --once --exit-when-idle` on it.
    static func agentArguments(_ executable: String, of container: SharedContainer) -> [String] {
        [executable, "--root", container.layout.root, "--group", container.groupIdentifier.rawValue,
         "sync", "run", "--once", "--exit-when-idle"]
    }

    /// Moves a registration from before issue 47 out of the container when it names this kvtool as
    /// `sync agent set` wrote it (``SyncKit/SyncAgentRegistration/migrateLegacy(in:ifArgumentsAre:)``):
    /// a container registered before keeps working, its credential leaves the container, and no
    /// program a co-tenant chose is ever moved. Any failure is left to the registration's load,
    /// which names the problem.
    static func moveLegacyAgent(of container: SharedContainer) {
        guard let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return }
        _ = try? SyncAgentRegistration.migrateLegacy(in: container, ifArgumentsAre: agentArguments(executable, of: container))
    }

    /// `kvtool sync request [--wait SECONDS]`: what this container holds, on the server, from any process.
    struct Request: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "request",
            abstract: "Ask the process that owns sync (or the registered agent) to push what is written here, and wait for the server's acknowledgement.",
            discussion: """
                Prints one line: acknowledged (exit 0), only for what a server acknowledged; refused, with the reason \
                (clock skew exits 75, a credential 77, quarantine 74); acknowledged except for the keys it names, which \
                wait behind other devices' changes this device cannot apply (exit 76: kvtool sync quarantine keep-mine|drop); not acknowledged, at once, when nothing of the \
                container is enabled for sync, or no process owns sync and none can start (no agent registered, its \
                registration refused, or it exited) (exit 69); or not within the deadline, with what is known: the \
                owner, the last error, the agent (exit 69). When no process owns sync, the agent registered with \
                kvtool sync agent set is started, detached (--no-agent: never; the request then waits for an owner). \
                --json prints {"outcome":…, …}.
                """)
        @OptionGroup var global: GlobalOptions
        @Option(help: "Wait at most this many seconds.") var wait: Double = 10
        @Flag(name: .customLong("no-agent"), help: "Do not start the registered agent when no process owns sync.")
        var noAgent = false

        func validate() throws {
            guard wait >= 0 && wait <= 86_400 else { throw ValidationError("--wait must be from 0 to 86400 seconds") }
        }

        func run() throws {
            let container = try global.openContainer(readOnly: false)
            SyncCommand.moveLegacyAgent(of: container)
            let service = try SyncService(container: container)
            let outcome = try service.request(within: .milliseconds(Int64(wait * 1000)), startingAgent: !noAgent)
            if global.json {
                print(try Output.line(SyncCommand.json(outcome)))
            } else {
                print(outcome.description)
            }
            switch outcome {
            case .acknowledged: return
            case .acknowledgedExceptHeld:
                Output.flush()
                Foundation.exit(CLIError.Kind.held.rawValue)
            case .refused(let failure):
                Output.flush()
                Foundation.exit(CLIError.Kind(failure.reason).rawValue)
            case .notWithinDeadline, .nothingSyncs:
                Output.flush()
                Foundation.exit(CLIError.Kind.unavailable.rawValue)
            }
        }
    }

    static func json(_ outcome: SyncRequestOutcome) -> JSONValue {
        func failure(_ failure: SyncFailure?) -> JSONValue {
            guard let failure else { return .null }
            return ["reason": .string(failure.reason.rawValue), "message": .string(failure.message)]
        }
        switch outcome {
        case .acknowledged(let token, let elapsed):
            return ["outcome": .string("acknowledged"), "through": .integer(Int(token.rawValue)),
                    "milliseconds": .integer(elapsed.wholeMilliseconds)]
        case .acknowledgedExceptHeld(let token, let elapsed, let held):
            return ["outcome": .string("acknowledgedExceptHeld"), "through": .integer(Int(token.rawValue)),
                    "milliseconds": .integer(elapsed.wholeMilliseconds), "held": .integer(held.count),
                    "message": .string(held.message)]
        case .refused(let refusal):
            return ["outcome": .string("refused"), "error": failure(refusal)]
        case .notWithinDeadline(let shortfall):
            return ["outcome": .string("notWithinDeadline"), "owner": shortfall.owner.map { .integer(Int($0.pid)) } ?? .null,
                    "pending": .integer(shortfall.pending), "lastError": failure(shortfall.lastError),
                    "agent": shortfall.agent.map { .string($0) } ?? .null]
        case .nothingSyncs(let shortfall):
            return ["outcome": .string("nothingSyncs"), "replicates": .bool(shortfall.replicates),
                    "owner": shortfall.owner.map { .integer(Int($0.pid)) } ?? .null, "pending": .integer(shortfall.pending),
                    "lastError": failure(shortfall.lastError), "agent": shortfall.agent.map { .string($0) } ?? .null,
                    "message": .string(outcome.description)]
        }
    }

    /// `kvtool sync agent set|show|clear`: the program a request starts when no process owns sync.
    struct Agent: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "agent",
            abstract: "The sync agent a request starts when no process owns sync: register it, show it, or clear it.",
            subcommands: [Set.self, Show.self, Clear.self], defaultSubcommand: Show.self)

        struct Set: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set",
                abstract: "Register the endpoint, the credential and the program of this container's sync agent.",
                discussion: """
                    The registration is kept outside the container, in $XDG_CONFIG_HOME/kvstore/sync-agents/ \
                    (~/.config/kvstore/sync-agents/ without it; a directory of mode 0700, one file of mode 0600 per \
                    container): a process that can write the container cannot choose the program, and the credential \
                    is never in the container, the store, a dump, kvtool serve or a log. The agent is this kvtool (or \
                    --program), run as sync run --once --exit-when-idle on this container.
                    """)
            @OptionGroup var global: GlobalOptions
            @OptionGroup var server: ServerOption
            @Option(help: "The agent's program, an absolute path (default: this kvtool).") var program: String?

            func run() throws {
                let endpoint = try server.endpoint()
                let container = try global.openContainer(readOnly: false)
                guard let text = server.text else { throw CLIError(.usage, "no server: pass --server URL") }
                let executable = try program ?? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
                guard executable.hasPrefix("/") else { throw CLIError(.usage, "--program must be an absolute path") }
                guard FileManager.default.isExecutableFile(atPath: executable) else {
                    throw CLIError(.notFound, "--program \(executable) is not an executable file")
                }
                var token: String?
                if case .gateway(_, let credential) = endpoint { token = credential }
                let registration = SyncAgentRegistration(
                    arguments: SyncCommand.agentArguments(executable, of: container),
                    server: text, token: token, caFile: server.caFile, allowInsecureHTTP: server.allowInsecureHTTP)
                try registration.save(in: container)
                if global.json {
                    print(try Output.line(["registered": .string(registration.description), "server": .string(endpoint.description)]))
                } else {
                    print("a request with no owner starts: \(registration) (syncing with \(endpoint))")
                }
            }
        }

        struct Show: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "show",
                abstract: "The registered agent's program and endpoint (never its credential).")
            @OptionGroup var global: GlobalOptions

            func run() throws {
                let container = try global.openContainer(readOnly: true)
                SyncCommand.moveLegacyAgent(of: container)
                guard let registration = try SyncAgentRegistration.load(from: container) else {
                    if global.json {
                        print(try Output.line(["registered": .null]))
                    } else {
                        print("no sync agent is registered; \(SyncAgentRegistration.advice(for: container, replacing: false))")
                    }
                    return
                }
                let server = registration.server.map(SyncCommand.shown) ?? "(none)"
                if global.json {
                    print(try Output.line(["registered": .string(registration.description), "server": .string(server),
                                           "credential": .bool(registration.token != nil)]))
                } else {
                    print("agent: \(registration)")
                    print("server: \(server)\(registration.token != nil ? " (with a credential)" : "")")
                }
            }
        }

        struct Clear: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "clear",
                abstract: "Remove the registration: requests with no owner then wait for one.")
            @OptionGroup var global: GlobalOptions

            func run() throws {
                let container = try global.openContainer(readOnly: true)
                let removed = try SyncAgentRegistration.remove(from: container)
                if global.json { print(try Output.line(["removed": .bool(removed)])) } else {
                    print(removed ? "the sync agent registration is removed" : "no sync agent was registered")
                }
            }
        }
    }
}

extension SyncCommand.Run {
    /// `--once` while another process owns sync: asks it, and waits for its acknowledgement; takes the
    /// round over if the owner dies first. Returns the replicator when this process owns sync after
    /// all, `nil` when the owner did the work.
    func handOff(_ container: SharedContainer, owner: SyncOwner?, make: () throws -> Replicator) throws -> Replicator? {
        let service = try SyncService(container: container)
        let shown = owner.map { "pid \($0.pid)" } ?? "another process"
        if !global.json { print("\(shown) owns sync of \(container.groupIdentifier.rawValue); handing this round to it") }
        Output.flush()
        let deadline = ContinuousClock.now + .milliseconds(Int64(giveUpAfter * 1000))
        while true {
            switch try service.request(within: .milliseconds(200), startingAgent: false) {
            case .acknowledged(let token, _):
                if global.json {
                    print(try Output.line(["handedTo": owner.map { .integer(Int($0.pid)) } ?? .null, "acknowledged": .integer(Int(token.rawValue))]))
                } else {
                    print("the owner pushed every change through token \(token)")
                }
                return nil
            case .acknowledgedExceptHeld(let token, _, let held):
                if global.json {
                    print(try Output.line(["handedTo": owner.map { .integer(Int($0.pid)) } ?? .null, "acknowledged": .integer(Int(token.rawValue)),
                                           "held": .string(held.message)]))
                } else {
                    print("the owner pushed every change through token \(token) but the held keys: \(held)")
                }
                return nil
            case .refused(let failure):
                throw CLIError(CLIError.Kind(failure.reason), failure.message)
            case .notWithinDeadline(let shortfall), .nothingSyncs(let shortfall):
                // (Nothing of the container enabled for sync: the replicator made here says so.)
                if shortfall.owner == nil || !shortfall.replicates {
                    do { return try make() } catch ReplicationError.ownedElsewhere {}
                }
                guard ContinuousClock.now < deadline else {
                    throw CLIError(.unavailable, "not within \(Int(giveUpAfter)) s: \(shortfall)")
                }
            }
        }
    }

    /// `--exit-when-idle`: more rounds while requests come or changes wait, then exit. A failed round is
    /// retried with a backoff (at once when a request comes) for at most `--give-up-after` seconds, and
    /// a round that hangs (a connection attempt nothing answers) is given up at the same time
    /// (``round(of:quietSince:)``).
    func serveUntilIdle(_ replicator: Replicator, container: SharedContainer) throws -> SyncReport {
        let service = try SyncService(container: container)
        let requests = try ChangeNotifier(container: container).subscribe(SyncService.requestNotification)
        var total = SyncReport()
        var lastPending = -1
        var failingSince: ContinuousClock.Instant?
        var backoff = Duration.milliseconds(100)
        var first = true
        while true {
            if first {
                first = false
            } else if failingSince == nil {
                let pending = try service.status().pending
                // Idle: nothing waits (or a round changed nothing), and no request came meanwhile.
                if pending == 0 || pending == lastPending {
                    if !requests.wait(timeout: .milliseconds(250)) { return total }
                }
                lastPending = pending
            } else if let since = failingSince {
                // The backoff, but not past --give-up-after: the last attempt is made then.
                let left = since + .milliseconds(Int64(giveUpAfter * 1000)) - .now
                _ = requests.wait(timeout: max(min(backoff, left), .zero))
                backoff = min(backoff * 2, .seconds(2))
            }
            // Failures are counted from the start of the first round that failed.
            let started = ContinuousClock.now
            do {
                let report = try round(of: replicator, quietSince: failingSince ?? started)
                total.add(report)
                failingSince = nil
            } catch let error as GaveUp {
                throw error.error
            } catch {
                let since = failingSince ?? started
                failingSince = since
                if ContinuousClock.now - since >= .milliseconds(Int64(giveUpAfter * 1000)) { throw error }
            }
        }
    }

    /// A round of `replicator`, given up once `--give-up-after` seconds have passed since `quietSince`
    /// (when its failures began, or when it began) in which the server answered none of its requests:
    /// a round that hangs (a connection attempt that nothing answers, a server that went silent) ends
    /// then, however long its statement timeout, while one that goes on long because it has much to do
    /// (a resync of a large group) is not cut short. The abandoned round is left to its timeouts; the
    /// process exits.
    func round(of replicator: Replicator, quietSince: ContinuousClock.Instant) throws -> SyncReport {
        let giveUp = Duration.milliseconds(Int64(giveUpAfter * 1000))
        let gaveUp = Locked(false)
        let shown = replicator.endpoint.map { "\($0)" } ?? "the server"
        do {
            return try blocking {
                try await withDeadline(.seconds(366 * 86_400), what: shown, abandonWhen: {
                    let answered = max(quietSince, replicator.lastServerAnswer ?? quietSince)
                    guard ContinuousClock.now - answered > giveUp else { return nil }
                    gaveUp.withLock { $0 = true }
                    return "gave up"
                }) {
                    try await replicator.sync()
                }
            }
        } catch where gaveUp.withLock({ $0 }) {
            let seconds = giveUpAfter == giveUpAfter.rounded() ? "\(Int(giveUpAfter)) s" : "\(giveUpAfter) s"
            throw GaveUp(error: ReplicationError.unreachable("no answer from \(shown) within --give-up-after (\(seconds)); gave up"))
        }
    }

    /// A round given up (``round(of:quietSince:)``): not retried.
    struct GaveUp: Error {
        var error: ReplicationError
    }
}
#endif
