#if PostgreSQL
import ArgumentParser
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres

/// `kvtool sync`: replication of this container with other machines' through PostgreSQL.
struct SyncCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Replicate collections and defaults suites with other machines through PostgreSQL.",
        discussion: """
            Declare what replicates (sync enable), then run a replicator (sync run). --server takes a libpq-style URL, \
            postgres://USER[:PASSWORD]@HOST:PORT/DATABASE, or postgres://USER@/DATABASE?host=/socket/directory \
            (machines trusted with the database), or a sync gateway's http(s)://HOST:PORT with --token \
            (devices with a credential of their own group: sync token issue, sync gateway); \
            $KVSTORE_SYNC_SERVER and $KVSTORE_SYNC_TOKEN give the defaults. Errors are one line on standard error; \
            sync run exits 64 when nothing replicates yet, and 74 when it never reached its server.
            """,
        subcommands: [Enable.self, Run.self, Request.self, Status.self, Agent.self, Quarantine.self, Rejected.self, Prune.self, Setup.self,
                      Token.self, Gateway.self, Blobs.self, Backend.self, Server.self, Directory.self])

    /// `value`, or the environment variable `name` when it is not given; `nil` when neither is, or is empty.
    static func given(_ value: String?, orEnvironment name: String) -> String? {
        guard let text = value ?? ProcessInfo.processInfo.environment[name], !text.isEmpty else { return nil }
        return text
    }

    /// The secret a file holds (a token, a URL with its password), its trailing newline dropped: a
    /// secret on the command line is visible to every user of the machine through `ps`. A file other
    /// users can read is refused, as `ssh` refuses such a key (``SecretFile``): exit 65.
    static func secret(fromFile path: String, what: String) throws -> String {
        do {
            return try SecretFile.line(path, what: what)
        } catch {
            throw CLIError(refusal: error)
        }
    }

    /// The bytes of a secret file (a JWT signing secret, a TLS key), as ``secret(fromFile:what:)`` checks it.
    static func secretBytes(fromFile path: String, what: String, maxBytes: Int = 64 << 10) throws -> [UInt8] {
        do {
            return try SecretFile.read(path, what: what, maxBytes: maxBytes)
        } catch {
            throw CLIError(refusal: error)
        }
    }

    /// `--server URL` for the commands that need the database itself (prune): no gateway options.
    struct DatabaseServerOption: ParsableArguments {
        @Option(name: .long, help: "The database, postgres://USER[:PASSWORD]@HOST:PORT/DATABASE (default: $KVSTORE_SYNC_SERVER); not a gateway.")
        var server: String?

        func url() throws -> ServerURL {
            guard let text = SyncCommand.given(server, orEnvironment: "KVSTORE_SYNC_SERVER") else {
                throw CLIError(.usage, "no server: pass --server postgres://USER@HOST:PORT/DATABASE or set KVSTORE_SYNC_SERVER")
            }
            if SyncGatewayURL.isGateway(text) {
                throw CLIError(.usage, "this command needs the database (postgres://…), not a gateway: run it as the database's owner")
            }
            return try ServerURL(text)
        }
    }

    struct ServerOption: ParsableArguments {
        @Option(name: .long, help: "The server, postgres://USER[:PASSWORD]@HOST:PORT/DATABASE (default: $KVSTORE_SYNC_SERVER).")
        var server: String?

        @Option(name: .long, help: "A sync gateway's credential, for an http(s):// --server (default: $KVSTORE_SYNC_TOKEN). Visible to `ps`: prefer --token-file or the variable.")
        var token: String?
        @Option(name: .customLong("token-file"), help: "A file holding the credential, instead of --token.")
        var tokenFile: String?
        @Option(name: .customLong("ca-file"), help: "PEM certificates to trust for an https:// gateway instead of the system's.")
        var caFile: String?
        @Flag(name: .customLong("allow-insecure-http"),
              help: "Allow an http:// gateway on another machine (the credential then travels in clear text).")
        var allowInsecureHTTP = false

        func validate() throws {
            if token != nil && tokenFile != nil { throw ValidationError("pass --token or --token-file, not both") }
        }

        var text: String? { SyncCommand.given(server, orEnvironment: "KVSTORE_SYNC_SERVER") }

        /// The database's URL (commands that need the database itself).
        func url() throws -> ServerURL {
            guard let text else { throw CLIError(.usage, "no server: pass --server URL or set KVSTORE_SYNC_SERVER") }
            if SyncGatewayURL.isGateway(text) {
                throw CLIError(.usage, "this command needs the database (postgres://…), not a gateway")
            }
            return try ServerURL(text)
        }

        /// The database, or a gateway and its credential.
        func endpoint() throws -> Replicator.Endpoint {
            guard let text else { throw CLIError(.usage, "no server: pass --server URL or set KVSTORE_SYNC_SERVER") }
            guard SyncGatewayURL.isGateway(text) else {
                if token != nil || tokenFile != nil { throw CLIError(.usage, "--token is for a gateway (http(s)://…); a postgres:// server takes none") }
                if caFile != nil { throw CLIError(.usage, "--ca-file is for an https:// gateway") }
                if allowInsecureHTTP { throw CLIError(.usage, "--allow-insecure-http is for an http:// gateway") }
                return .database(try ServerURL(text))
            }
            let given = try tokenFile.map { try SyncCommand.secret(fromFile: $0, what: "token") } ?? token
            guard let token = SyncCommand.given(given, orEnvironment: "KVSTORE_SYNC_TOKEN") else {
                throw CLIError(.usage, "a gateway needs a credential: pass --token-file FILE (or --token TOKEN) or set KVSTORE_SYNC_TOKEN")
            }
            return .gateway(try SyncGatewayURL(text, caFile: caFile, allowInsecureHTTP: allowInsecureHTTP), token: token)
        }
    }

    struct Enable: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "enable",
            abstract: "Replicate a collection (or --suite SUITE), enabling its history if needed; existing keys are sent at the next sync.",
            discussion: """
                Enabling a collection also publishes its catalog entry (how its keys and values are encoded) \
                through the server at the next sync. A device that has never opened the collection joins it with \
                --server URL: the entry another device published is fetched, the collection is created here empty, \
                and the next sync run fills it. A collection here whose encodings differ from the published one is \
                refused (exit 65), as is one with indexes or derived collections (its app creates those). A defaults \
                suite must exist here (exit 1 otherwise, as for a collection). --json prints what changed: \
                {"enabled":NAME,"kind":"collection"|"defaults","changed":BOOL,"created":BOOL}.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The collection.") var collection: String?
        @Option(help: "A defaults suite instead of a collection.") var suite: String?
        @OptionGroup var server: ServerOption

        func validate() throws {
            if (collection == nil) == (suite == nil) { throw ValidationError("name a collection or --suite SUITE, not both") }
        }

        func run() throws {
            // A second device joining (--server) may have no container yet: enabling is asked to write.
            // If it fails, what it created is removed again.
            let container = try global.openContainer(readOnly: false, create: true)
            let target: Mutation.Target = suite.map { .defaults($0) } ?? .collection(collection!)
            // A suite that does not exist is refused as a collection is (enabling one would create it).
            if let suite, try !container.store.catalog().contains(where: { $0.kind == .defaults && $0.name == suite }) {
                throw CLIError(.notFound, "no defaults suite named '\(suite)' (kvtool collections lists them)")
            }
            var created = false
            if let collection, !collection.hasPrefix("_") {
                let local = try container.store.catalogEntry(forCollection: collection)
                // The server is asked when the collection is not here, or when --server is given.
                if let text = server.text, local == nil || server.server != nil {
                    try Self.pullCatalog(of: container, from: try server.endpoint())
                    if let published = try Replication.publishedCatalogEntry(ofCollection: collection, in: container) {
                        if let local {
                            try Replication.checkAgrees(local, published)
                        } else {
                            try Replication.createCollection(from: published, in: container)
                            created = true
                        }
                    } else if local == nil {
                        throw CLIError(.notFound, "no collection named '\(collection)' here, and no device has published one through \(SyncCommand.shown(text)): run kvtool sync enable \(collection) and kvtool sync run on a device that has it, then this again")
                    }
                } else if local == nil {
                    throw CLIError(.notFound, "no collection named '\(collection)' here; to join the one other devices replicate: kvtool sync enable \(collection) --server URL")
                }
            }
            let already = try Replication.declaredTargets(in: container.store).contains(target)
            try Replication.enable(target, in: container)
            if case .collection(let name) = target { try Replication.publishCatalogEntry(ofCollection: name, in: container) }
            if global.json {
                print(try Output.line([
                    "enabled": .string(target.name), "kind": .string(target.kind.rawValue),
                    "changed": .bool(!already), "created": .bool(created),
                ]))
            } else {
                print(created ? "created \(target) as other devices have it; it replicates from the next sync (kvtool sync run)"
                      : already ? "\(target) already replicates" : "\(target) replicates from the next sync")
            }
        }

        /// Pulls what other devices published of the catalog (and of the targets replicated here).
        static func pullCatalog(of container: SharedContainer, from endpoint: Replicator.Endpoint) throws {
            try Replication.enableCatalog(in: container)
            let targets = try SyncCommand.targets(of: container)
            let replicator = try Replicator(container: container, endpoint: endpoint, targets: targets)
            defer { _ = try? blocking { await replicator.close() } }
            try blocking { _ = try await replicator.pull() }
        }
    }

    /// `--max-clock-skew SECONDS`, for the commands that apply other devices' changes.
    struct ClockOption: ParsableArguments {
        @Option(name: .customLong("max-clock-skew"),
                help: "How far ahead of this machine's clock (or the server's) a change's clock may be, in seconds.")
        var maxClockSkew: Double = History.defaultMaxClockSkew.inSeconds

        func validate() throws {
            guard maxClockSkew >= 0 && maxClockSkew <= 31_536_000 else {
                throw ValidationError("--max-clock-skew must be from 0 to 31536000 seconds")
            }
        }

        var duration: Duration { .milliseconds(Int64(maxClockSkew * 1000)) }
    }

    struct Run: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "run",
            abstract: "Push pending changes and pull other machines' (--once), or stay live until interrupted.",
            discussion: """
                One process at a time owns a container's sync. A live run started while another process owns it waits \
                as a standby (it says so in one line) and takes over when the owner exits or is killed. --once hands its \
                round to the owner and waits for its acknowledgement (taking over if the owner dies). --exit-when-idle \
                (with --once, as the registered agent runs) goes on while requests come, then exits. Without --server \
                or $KVSTORE_SYNC_SERVER, the endpoint registered with kvtool sync agent set is used.
                """)
        @OptionGroup var global: GlobalOptions
        @OptionGroup var server: ServerOption
        @Flag(help: "Push, pull and exit.") var once = false
        @Flag(name: .customLong("exit-when-idle"), help: "With --once: sync again while requests come or changes wait, then exit.")
        var exitWhenIdle = false
        @Option(name: .customLong("give-up-after"),
                help: "With --once: give up after this many seconds in which the server answered nothing (retrying failed rounds meanwhile, with --exit-when-idle), or waiting for another owner.")
        var giveUpAfter: Double = 30
        @Option(help: "Stay live this many seconds, then exit (default: until interrupted).") var seconds: Double?
        @Option(help: "Changes per server transaction.") var batchSize: Int = Replicator.Options().batchSize
        @OptionGroup var clock: ClockOption
        @Option(name: .customLong("statement-timeout"),
                help: "Abandon a statement with no answer after this many seconds, and connect anew.")
        var statementTimeout: Double = 120

        func validate() throws {
            guard statementTimeout >= 0.1 && statementTimeout <= 86_400 else {
                throw ValidationError("--statement-timeout must be from 0.1 to 86400 seconds")
            }
            if let seconds, !(seconds > 0 && seconds <= 31_536_000) { throw ValidationError("--seconds must be positive") }
            guard (1...100_000).contains(batchSize) else { throw ValidationError("--batch-size must be from 1 to 100000") }
            if exitWhenIdle && !once { throw ValidationError("--exit-when-idle goes with --once") }
            guard giveUpAfter >= 0 && giveUpAfter <= 86_400 else { throw ValidationError("--give-up-after must be from 0 to 86400 seconds") }
        }

        func run() throws {
            let container = try global.openContainer(readOnly: false)
            let endpoint = try server.endpoint(orRegisteredIn: container)
            guard try Replication.declaredTargets(in: container.store).contains(where: { !$0.name.hasPrefix("_") }) else {
                throw CLIError(.usage, "nothing replicates here: enable a collection or suite first (kvtool sync enable COLLECTION, or --suite SUITE)")
            }
            // A failed round: --once reports it once, as its error; a live run reports each distinct
            // failure once on standard error (again only after a round that succeeded).
            let failures = FailureLog(live: !once)
            var options = Replicator.Options()
            options.batchSize = batchSize
            options.maxClockSkew = clock.duration
            options.statementTimeout = .milliseconds(Int64(statementTimeout * 1000))
            let json = global.json
            let afterSync = try KVToolApps.afterSync(in: container)
            let note = { @Sendable (changed: Set<Mutation.Target>?) in
                for note in afterSync(changed) { SyncCommand.say(json, note.kind, note.message) }
            }
            // Keys as `kvtool get` takes them (the catalog's encodings as the run starts).
            let keys = try HistoryText(store: container.store)
            let events: @Sendable (SyncEvent) -> Void = { event in
                switch event {
                case .conflict(let conflict):
                    SyncCommand.say(json, "conflict", conflict.description(key: keys.key(conflict.key, of: conflict.target)))
                case .resynchronized(let cursor):
                    SyncCommand.say(json, "resync", "reloaded from the server's state at \(cursor)")
                    note(nil)
                case .serverChanged(let server):
                    SyncCommand.say(json, "server", "another server (id \(server)) than the last sync's: every key is sent again and the cursor starts over")
                case .applied(let targets, let changes):
                    let names = targets.map(\.description).sorted().joined(separator: ", ")
                    SyncCommand.say(json, "applied", "\(changes) change\(changes == 1 ? "" : "s") from other devices to \(names)")
                    note(Set(targets))
                case .quarantined(let change):
                    SyncCommand.say(json, "quarantined", change.description(key: SyncCommand.key(of: change, keys)))
                case .rejected(let write):
                    SyncCommand.say(json, "rejected", write.description(key: SyncCommand.key(write.key, of: write.target, keys))
                                    + " (kvtool sync rejected)")
                case .failed(let message): failures.report(message)
                }
            }
            let targets = try SyncCommand.targets(of: container)
            let make = { try Replicator(container: container, endpoint: endpoint, targets: targets, options: options, events: events) }
            let replicator: Replicator
            do {
                replicator = try make()
            } catch ReplicationError.ownedElsewhere(let owner, _) {
                if once {
                    guard let taken = try handOff(container, owner: owner, make: make) else { return }
                    replicator = taken
                } else {
                    let shown = owner.map { "pid \($0.pid) (\($0.mode.rawValue))" } ?? "another process"
                    if !json { print("standby: \(shown) owns sync of \(container.groupIdentifier.rawValue); this process takes over when it exits") }
                    Output.flush()
                    let settled = options
                    replicator = try blocking {
                        try await Replicator.whenOwning(container: container, endpoint: endpoint, targets: targets, options: settled,
                                                        events: events)
                    }
                    if !json { print("took over sync of \(container.groupIdentifier.rawValue) (pid \(replicator.owner.pid))") }
                }
            }
            let shown = endpoint.description
            failures.attach(replicator)
            if once {
                let report: SyncReport
                do {
                    report = exitWhenIdle ? try serveUntilIdle(replicator, container: container)
                                          : try round(of: replicator, quietSince: .now)
                } catch let error as GaveUp {
                    throw error.error
                }
                if json {
                    print(try Output.line([
                        "device": .string(replicator.device), "pushed": .integer(report.pushed), "pulled": .integer(report.pulled),
                        "conflicts": .integer(report.conflicts), "quarantined": .integer(report.quarantined),
                        "rejected": .integer(report.rejected),
                        "resynchronized": .bool(report.resynchronized), "cursor": .integer(report.cursor),
                        "held": report.held.map { .string($0.message) } ?? .null,
                    ]))
                } else {
                    let quarantined = report.quarantined > 0 ? ", quarantined \(report.quarantined)" : ""
                    let rejected = report.rejected > 0 ? ", rejected \(report.rejected)" : ""
                    print("pushed \(report.pushed), pulled \(report.pulled), conflicts \(report.conflicts)\(quarantined)\(rejected)\(report.resynchronized ? ", resynchronized" : ""); cursor \(report.cursor)")
                    if report.filesUploaded > 0 { print("files uploaded \(report.filesUploaded) (\(report.fileBytesSent) bytes sent)") }
                    if report.waitingForFiles > 0 { print("files waiting to upload \(report.waitingForFiles) (kvtool files status)") }
                    // Only these keys wait; everything else is on the server.
                    if let held = report.held { print("held: \(held)") }
                }
                // Out before ownership is released: a process that sees no owner (an agent's starter,
                // a test) finds this round in the agent's log, not still in stdio's buffer.
                Output.flush()
            } else {
                if !json { print("device \(replicator.device) syncing \(container.groupIdentifier.rawValue) with \(shown)") }
                Output.flush()
                let deadline = seconds.map { ContinuousClock.now + .milliseconds(Int64($0 * 1000)) }
                try blocking { try await replicator.run(until: deadline) }
                if replicator.successfulRounds == 0 {
                    // Never reached its server: a failure, whose error was printed once already.
                    _ = try? blocking { await replicator.close() }
                    guard failures.printed else { throw CLIError(.failure, "the run ended before it reached \(shown)") }
                    Output.flush()
                    Foundation.exit(CLIError.Kind.failure.rawValue)
                }
            }
            _ = try? blocking { await replicator.close() }
        }
    }

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "The device id, the cursor, pending changes, the last error and conflicts resolved.")
        @OptionGroup var global: GlobalOptions

        func run() throws {
            let container = try global.openContainer(readOnly: false)
            SyncCommand.moveLegacyAgent(of: container)
            var status = try Replication.status(of: container)
            // What is not on the server yet is one count (SyncKit's), read once: the text shows it once,
            // and the JSON's two fields for it (`pendingChanges`, `service.pending`) hold the same number.
            let service = try SyncService(container: container).status(countingUpTo: .max)
            status.pendingChanges = service.pending
            if global.json {
                // Sorted keys, dates in ISO 8601 (2026-11-27T04:48:32Z), as the text's below; the
                // container's sync service (owner, acknowledged token, last failure) under "service".
                var value = try JSONValue(encoding: status)
                if case .object(var members) = value {
                    members.append(JSONValue.Member("service", try JSONValue(encoding: service)))
                    value = .object(members)
                }
                try Output.json(value)
                return
            }
            let format = ISO8601DateFormatter()
            guard !status.targets.isEmpty else {
                print("nothing replicates (kvtool sync enable COLLECTION, or --suite SUITE)")
                return
            }
            if let owner = service.owner {
                print("owner pid \(owner.pid) (\(owner.mode.rawValue)) since \(format.string(from: owner.since))")
            } else {
                if let problem = service.agentProblem {
                    print("owner none: a request cannot start the registered agent: \(problem)")
                } else if service.agentRegistered {
                    print("owner none: a request starts the registered agent")
                } else {
                    print("owner none: no agent is registered; \(SyncAgentRegistration.advice(for: container, replacing: false))")
                }
            }
            print("acknowledged through token \(service.acknowledged) of \(service.current); \(service.pending) local change\(service.pending == 1 ? "" : "s") not on the server yet")
            if let failure = service.lastError { print("last round failed (\(failure.reason.rawValue)) at \(format.string(from: failure.at)): \(failure.message)") }
            print("device \(status.device ?? "(none yet)")")
            print("replicates \(status.targets.joined(separator: ", "))")
            print("cursor \(status.cursor); pushed \(status.pushed); pulled \(status.pulled); conflicts resolved \(status.conflictsResolved); resyncs \(status.resyncs)")
            if status.quarantined > 0 { print("quarantined \(status.quarantined) (kvtool sync quarantine)") }
            if status.rejected > 0 { print("rejected by the server \(status.rejected) (kvtool sync rejected)") }
            for file in status.filesWaiting ?? [] { print("waiting to upload \(file)") }
            print("last sync \(status.lastSyncAt.map(format.string(from:)) ?? "never")")
            if let error = status.lastError { print("last error \(error) at \(status.lastErrorAt.map(format.string(from:)) ?? "?")") }
        }
    }

    /// `kvtool sync quarantine [--json]` and `kvtool sync quarantine retry`.
    struct Quarantine: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "quarantine",
            abstract: "Other devices' changes this container could not apply: list them, retry them after an upgrade, or settle a key (keep-mine, drop).",
            subcommands: [List.self, Retry.self, Settle<KeepMine>.self, Settle<Drop>.self], defaultSubcommand: List.self)

        /// Which resolution a `Settle` command applies.
        protocol Choice { static var resolution: QuarantineResolution { get } }
        enum KeepMine: Choice { static let resolution = QuarantineResolution.keepMine }
        enum Drop: Choice { static let resolution = QuarantineResolution.drop }

        /// `kvtool sync quarantine keep-mine|drop SEQUENCE`: settles the key of a quarantined change as
        /// this device's user decides (``Replicator/resolveQuarantined(sequence:as:)``). Needs no server.
        struct Settle<C: Choice>: ParsableCommand {
            static var configuration: CommandConfiguration {
                switch C.resolution {
                case .keepMine:
                    CommandConfiguration(
                        commandName: "keep-mine",
                        abstract: "Send this device's value of the change's key over it (and every quarantined change of that key) at the next sync, stamped later: every device takes it.")
                case .drop:
                    CommandConfiguration(
                        commandName: "drop",
                        abstract: "Take nothing of the change (and every quarantined change of its key): follow the server from its version on, and drop a local write of the key that waited behind it.")
                }
            }
            @OptionGroup var global: GlobalOptions
            @OptionGroup var clock: ClockOption
            @Argument(help: "The change's number, as kvtool sync quarantine lists it.") var sequence: String

            func run() throws {
                guard let number = Int64(sequence), number > 0 else {
                    throw CLIError(.usage, "'\(Escaping.escape(String(sequence.prefix(40)), quoting: false, shortForms: true, style: .swift))' is not a change number (a positive integer, as kvtool sync quarantine lists it)")
                }
                let container = try global.openContainer(readOnly: false)
                var options = Replicator.Options()
                options.maxClockSkew = clock.duration
                let replicator = try Replicator(container: container, targets: try SyncCommand.targets(of: container), options: options)
                let report = try replicator.resolveQuarantined(sequence: number, as: C.resolution)
                let keys = try HistoryText(store: container.store)
                let key = report.target.map { keys.key(report.key, of: $0) } ?? "0x" + Hex.encode(report.key)
                let shownKey = Escaping.escape(key, quoting: false, shortForms: true, style: .swift)
                let target = report.target?.description ?? "?"
                if global.json {
                    print(try Output.line(["resolution": .string(C.resolution.rawValue), "target": .string(target), "key": .string(key),
                                           "resolved": .integer(report.resolved), "droppedLocalWrites": .integer(report.droppedLocalWrites),
                                           "queued": .bool(report.queued)]))
                    return
                }
                switch C.resolution {
                case .keepMine:
                    print("kept this device's value of \(target) key \(shownKey) over \(report.resolved) quarantined change\(report.resolved == 1 ? "" : "s"): sent at the next sync")
                case .drop:
                    print("dropped \(report.resolved) quarantined change\(report.resolved == 1 ? "" : "s") of \(target) key \(shownKey)\(report.droppedLocalWrites > 0 ? " and \(report.droppedLocalWrites) local write\(report.droppedLocalWrites == 1 ? "" : "s") that waited behind" : ""); this device follows the server from there")
                }
            }
        }

        struct List: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "list",
                abstract: "One line per quarantined change: sequence, target, key, device and reason (--json: one array).")
            @OptionGroup var global: GlobalOptions

            func run() throws {
                let container = try global.openContainer(readOnly: false)
                let rows = try Replication.quarantine(of: container)
                // The key as `kvtool get` takes it ("key"), and its bytes ("keyHex").
                let keys = try HistoryText(store: container.store)
                if global.json {
                    print(try Output.line(.array(rows.map { row in
                        [
                            "sequence": .integer(row.sequence), "target": .string(row.target?.description ?? row.kind),
                            "kind": .string(row.kind), "name": .string(row.name),
                            "key": .string(SyncCommand.key(of: row, keys)), "keyHex": .string(Hex.encode(row.key)),
                            "device": .string(row.device),
                            "clock": .string(HybridTimestamp(rawValue: row.clock).description),
                            "valueBytes": row.value.map { .integer($0.count) } ?? .null,
                            "reason": .string(row.reason),
                            "fromPreviousServer": .bool(row.fromPreviousServer),
                            "previousSequence": row.previousSequence.map { .integer($0) } ?? .null,
                        ]
                    })))
                    return
                }
                if rows.isEmpty { print("nothing is quarantined") }
                // What another device sent is shown with its control characters escaped: one
                // printable line each, whatever it holds.
                func shown(_ text: String) -> String { Escaping.escape(text, quoting: false, shortForms: true, style: .swift) }
                for row in rows {
                    // A change kept from the server this device followed before: its number there.
                    let number = row.fromPreviousServer ? "previous:\(row.previousSequence.map(String.init) ?? "?")" : "\(row.sequence)"
                    print("\(number)\t\(shown(row.target?.description ?? row.kind))\t\(shown(SyncCommand.key(of: row, keys)))\t\(shown(row.device))\t\(shown(row.reason))")
                }
            }
        }

        struct Retry: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "retry",
                abstract: "Apply the quarantined changes that can now be applied (needs no server).")
            @OptionGroup var global: GlobalOptions
            @OptionGroup var clock: ClockOption

            func run() throws {
                let container = try global.openContainer(readOnly: false)
                var options = Replicator.Options()
                options.maxClockSkew = clock.duration
                let replicator = try Replicator(container: container, targets: try SyncCommand.targets(of: container), options: options)
                let report = try replicator.retryQuarantined()
                if global.json {
                    print(try Output.line(["applied": .integer(report.applied), "superseded": .integer(report.superseded),
                                           "remaining": .integer(report.remaining)]))
                } else {
                    print("applied \(report.applied), superseded \(report.superseded); \(report.remaining) still quarantined")
                }
            }
        }
    }

    struct Prune: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "prune",
            abstract: "Remove the server's changes and tombstones of this group older than --older-than seconds; devices behind that resync.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var server: DatabaseServerOption
        @Option(name: .customLong("older-than"), help: "Age in seconds.") var olderThan: Double

        func validate() throws {
            guard olderThan >= 0 && olderThan < 1e10 else { throw ValidationError("--older-than must be 0 or more seconds") }
        }

        func run() throws {
            let url = try server.url()
            let container = try global.openContainer(readOnly: false)
            let replicator = try Replicator(container: container, server: url, targets: try SyncCommand.targets(of: container))
            let pruning = try blocking { try await replicator.pruneServerReport(olderThan: .milliseconds(Int64(olderThan * 1000))) }
            _ = try? blocking { await replicator.close() }
            if global.json {
                print(try Output.line(["removedChanges": .integer(pruning.changes), "removedTombstones": .integer(pruning.tombstones),
                                       "prunedThrough": .integer(pruning.prunedThrough)]))
                return
            }
            let age = ReplicationError.seconds(.milliseconds(Int64(olderThan * 1000)))
            let removed = pruning.changes == 0 && pruning.tombstones == 0
                ? "removed nothing: no change of \(container.groupIdentifier.rawValue) on the server is older than \(age)"
                : "removed \(pruning.changes) change\(pruning.changes == 1 ? "" : "s") and \(pruning.tombstones) tombstone\(pruning.tombstones == 1 ? "" : "s") older than \(age)"
            print(removed + "; the server's log is pruned through \(pruning.prunedThrough)"
                  + (pruning.prunedThrough > 0 ? " (a device whose cursor is behind it resyncs)" : ""))
        }
    }

    /// A server URL as shown in messages: its password hidden.
    static func shown(_ text: String) -> String {
        if SyncGatewayURL.isGateway(text) { return text }
        return (try? ServerURL(text).description) ?? "the server"
    }

    /// The declared targets, typed by the app that owns each (``KVToolApps``), untyped otherwise.
    static func targets(of container: SharedContainer) throws -> [ReplicatedTarget] {
        try KVToolApps.replicatedTargets(of: container)
    }

    /// The failed rounds of one `sync run`, each distinct error printed once on standard error.
    final class FailureLog: Sendable {
        private let live: Bool
        /// The replicator (weak: the replicator's event handler holds this log, and a strong reference
        /// back would be a cycle that outlives the run; AddressSanitizer's leak check reported it at
        /// exit), and the last error printed.
        private let state = Locked<(replicator: WeakReplicator, last: (message: String, rounds: Int)?)>((WeakReplicator(), nil))

        /// A weak reference, as a value.
        struct WeakReplicator {
            weak var replicator: Replicator?
        }

        init(live: Bool) { self.live = live }

        func attach(_ replicator: Replicator) { state.withLock { $0.replicator.replicator = replicator } }

        /// Whether an error was printed.
        var printed: Bool { state.withLock { $0.last != nil } }

        func report(_ message: String) {
            // --once throws the round's error, which is printed then.
            guard live else { return }
            let shouldPrint = state.withLock { state -> Bool in
                let rounds = state.replicator.replicator?.successfulRounds ?? 0
                if let last = state.last, last.message == message, last.rounds == rounds { return false }
                state.last = (message, rounds)
                return true
            }
            guard shouldPrint else { return }
            Output.flush()
            FileHandle.standardError.write(Data(("kvtool: error: " + message.replacingOccurrences(of: "\n", with: " ") + "\n").utf8))
        }
    }

    static func say(_ json: Bool, _ kind: String, _ message: String) {
        if json {
            // Text only: writing it cannot fail.
            print((try? Output.line(["event": .string(kind), "message": .string(message)])) ?? "")
        } else {
            print("\(kind): \(message)")
        }
        Output.flush()
    }
}

extension SyncCommand {
    /// A quarantined change's key as `kvtool get` takes it (`0x` and its hex for a target this
    /// container does not know).
    static func key(of change: QuarantinedChange, _ keys: HistoryText) -> String {
        key(change.key, of: change.target, keys)
    }

    /// `bytes`, a key of `target`, as `kvtool get` takes it (`0x` and its hex without a target).
    static func key(_ bytes: [UInt8], of target: Mutation.Target?, _ keys: HistoryText) -> String {
        guard let target else { return "0x" + Hex.encode(bytes) }
        return keys.key(bytes, of: target)
    }
}
#endif
