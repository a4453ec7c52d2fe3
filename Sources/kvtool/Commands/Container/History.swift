import ArgumentParser
import Foundation
import KVStore
import SyncKit

/// `kvtool history`: the change history of history-enabled collections and suites.
struct HistoryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Show, follow, enable and purge the change history.",
        subcommands: [Show.self, Purge.self, Enable.self, Disable.self, Consumers.self],
        defaultSubcommand: Show.self)

    /// `kvtool history [show]`.
    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show",
            abstract: "Print history entries after a token, one line each.",
            discussion: """
                With --consumer, reads from that consumer's stored token and acknowledges what it printed \
                (registering the consumer if it is new, at the oldest entry kept). A token older than the last purge exits with \
                status 1 and says so: the reader must resynchronise.
                """)

        @OptionGroup var global: GlobalOptions
        @Option(parsing: .unconditional, help: "Print the entries after this token (default: everything kept).") var since: UInt64?
        @Option(help: "Read as this consumer, from its stored token, and acknowledge what is printed.") var consumer: String?
        @Option(help: "Only this collection (repeatable).") var collection: [String] = []
        @Option(help: "Only this defaults suite (repeatable).") var suite: [String] = []
        @Option(parsing: .unconditional, help: "At most this many transactions.") var limit: Int?
        @Flag(help: "Keep printing new entries as any process commits them.") var follow = false

        func validate() throws {
            if since != nil && consumer != nil { throw ValidationError("--since and --consumer cannot be combined") }
            if let limit, limit <= 0 { throw ValidationError("--limit must be positive") }
        }

        func run() throws {
            let container = try global.openContainer(readOnly: consumer == nil)
            let history = try History.attach(to: container.store)
            let text = try HistoryText(store: container.store)
            let targets: Set<Mutation.Target>? = collection.isEmpty && suite.isEmpty
                ? nil : Set(collection.map { .collection($0) } + suite.map { .defaults($0) })
            let filter = HistoryFilter(targets: targets, transactionLimit: limit)
            let reader = try consumer.map { try history.consumer(named: $0, startingAt: .oldest) }
            var token = try reader?.token() ?? since.map { ChangeToken(rawValue: $0) } ?? history.purgedThrough()
            if let since, since > (try history.currentToken()).rawValue {
                throw CLIError(.notFound, "token \(since) is ahead of the history, whose last token is \(try history.currentToken()); was it taken from another container?")
            }
            let changes = follow ? try ChangeNotifier(container: container).subscribe() : nil
            repeat {
                switch try history.changes(since: token, matching: filter) {
                case .expired(let purged):
                    throw CLIError(.notFound, "token \(token) has expired: history was purged through \(purged); resynchronise and start from the current token")
                case .changes(let transactions, let next):
                    for entry in transactions.flatMap(\.entries) { try text.print(entry, json: global.json) }
                    if next != token { try reader?.acknowledge(through: next) }
                    token = next
                }
                Output.flush()
            } while changes.map({ _ = $0.wait(timeout: .seconds(1)); return true }) ?? false
        }
    }

    /// `kvtool history purge`.
    struct Purge: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "purge",
            abstract: "Remove the history every live consumer has acknowledged.",
            discussion: "Consumers silent for longer than --max-age or more than --max-lag entries behind count as gone and no longer hold history back.")

        @OptionGroup var global: GlobalOptions
        @Option(parsing: .unconditional, help: "Seconds of silence after which a consumer counts as gone (604800: 7 days).")
        var maxAge: Double = RetentionPolicy.default.maxAge ?? 0
        @Option(parsing: .unconditional, help: "Entries a consumer may lag before it counts as gone.")
        var maxLag: UInt64 = RetentionPolicy.default.maxLag ?? 0

        func validate() throws {
            if maxAge < 0 { throw ValidationError("--max-age must not be negative") }
        }

        func run() throws {
            let container = try global.openContainer(readOnly: false)
            let history = try History.attach(to: container.store)
            let report = try history.purge(retaining: RetentionPolicy(maxAge: maxAge, maxLag: maxLag))
            if global.json {
                try Output.json(["removed": .integer(report.removed), "purgedThrough": .integer(report.purgedThrough.rawValue),
                                 "goneConsumers": .array(report.goneConsumers.map(JSONValue.string))])
            } else {
                print("removed \(report.removed) entries; history is purged through token \(report.purgedThrough)"
                      + (report.goneConsumers.isEmpty ? "" : "; gone consumers: \(report.goneConsumers.joined(separator: ", "))"))
            }
        }
    }

    /// The collection or suite an enable/disable command names.
    struct Target: ParsableArguments {
        @Argument(help: "The collection.") var collection: String?
        @Option(help: "A defaults suite instead of a collection.") var suite: String?

        func validate() throws {
            if (collection == nil) == (suite == nil) { throw ValidationError("name a collection or pass --suite, not both") }
        }

        var target: Mutation.Target { suite.map { .defaults($0) } ?? .collection(collection ?? "") }

        /// Says what `enable` or `disable` did: `{"collection"|"suite": NAME, "history": STATE}`, or a line.
        func report(_ state: String, line: String, json: Bool) throws {
            if json { try Output.json([suite == nil ? "collection" : "suite": .string(target.name), "history": .string(state)]) } else { print(line) }
        }
    }

    /// `kvtool history enable`.
    struct Enable: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "enable", abstract: "Record history for a collection or suite, in every process.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var target: Target

        func run() throws {
            let container = try global.openContainer(readOnly: false)
            // A typo must not silently enable history for something that does not exist.
            guard try container.store.catalog().contains(where: { $0.kind == target.target.kind && $0.name == target.target.name }) else {
                throw CLIError(.notFound, "no \(target.target) in the catalog")
            }
            try History.attach(to: container).enable(target.target)
            try target.report("enabled", line: "history is recorded for \(target.target)", json: global.json)
        }
    }

    /// `kvtool history disable`.
    struct Disable: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "disable", abstract: "Stop recording history for a collection or suite.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var target: Target

        func run() throws {
            let container = try global.openContainer(readOnly: false)
            try History.attach(to: container).disable(target.target)
            try target.report("disabled", line: "history is no longer recorded for \(target.target)", json: global.json)
        }
    }

    /// `kvtool history consumers`.
    struct Consumers: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "consumers", abstract: "List the registered consumers and how far behind they are.")
        @OptionGroup var global: GlobalOptions

        func run() throws {
            let container = try global.openContainer(readOnly: true)
            let history = try History.attach(to: container.store)
            let current = try history.currentToken()
            let consumers = try history.consumers()
            if global.json {
                try Output.json(.array(consumers.map {
                    ["name": .string($0.name), "token": .integer($0.token.rawValue),
                     "behind": .integer(current.rawValue - min($0.token.rawValue, current.rawValue)),
                     "updatedAt": .string(HistoryText.timestamp($0.updatedAt))]
                }))
            } else {
                Output.table(["NAME", "TOKEN", "BEHIND", "LAST SEEN"], consumers.map {
                    [$0.name, String($0.token.rawValue), String(current.rawValue - min($0.token.rawValue, current.rawValue)),
                     HistoryText.timestamp($0.updatedAt)]
                })
            }
        }
    }
}
