import ArgumentParser
import Foundation
import KVStore

/// `kvtool defaults read|write|delete|domains`, like macOS `defaults`.
struct Defaults: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "defaults",
        abstract: "Read and write shared defaults suites, like macOS defaults.",
        subcommands: [Read.self, Write.self, DeleteKey.self, Domains.self])

    /// The suite option shared by the subcommands: the App Group's own suite by default.
    struct SuiteOption: ParsableArguments {
        @Option(help: "The defaults suite (default: the group identifier).") var suite: String?
    }

    struct Read: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "read", abstract: "Print one key's value, or the whole suite. Exits 1 if the key has no value.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var suite: SuiteOption
        @Argument(help: "The key; omit it to print every key.") var key: String?

        func run() throws {
            let container = try global.openContainer(readOnly: true)
            let defaults = try container.defaults(suite: suite.suite)
            guard let key else {
                let keys = try defaults.keys()
                let values = try keys.map { try render(defaults, $0) }
                if global.json {
                    print(JSONText.object(zip(keys, values).map { ($0, $1) }))
                } else {
                    Output.table(["KEY", "VALUE"], zip(keys, values).map { [$0, $1] })
                }
                return
            }
            guard try defaults.object(forKey: key) != nil else {
                throw CLIError(.notFound, "no value for key '\(key)' in suite '\(defaults.suiteName)'")
            }
            print(try render(defaults, key))
        }

        private func render(_ defaults: SharedDefaults, _ key: String) throws -> String {
            guard let value = try defaults.cborValue(forKey: key) else { return "null" }
            if !global.json, case .text(let s) = value { return s }
            return JSONBridge.json(value)
        }
    }

    struct Write: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "write", abstract: "Store a value: a string by default, or --type int|float|bool|json.")
        enum ValueType: String, ExpressibleByArgument, CaseIterable { case string, int, float, bool, json }

        @OptionGroup var global: GlobalOptions
        @OptionGroup var suite: SuiteOption
        @Option(help: "How to read the value: string, int, float, bool or json.") var type: ValueType = .string
        @Argument(help: "The key.") var key: String
        @Argument(help: "The value, or - for standard input.") var value: String

        func run() throws {
            let text = try Output.readArgument(value, limit: SharedDefaults.maxValueSize * 4)
            let container = try global.openContainer(readOnly: false)
            let defaults = try container.defaults(suite: suite.suite)
            try container.store.write(author: global.author) { tx in
                switch type {
                case .string:
                    try defaults.set(text, forKey: key, in: tx)
                case .int:
                    guard let v = Int(text) else { throw CLIError(.badInput, "\(KVStoreError.quote(text)) is not an integer") }
                    try defaults.set(v, forKey: key, in: tx)
                case .float:
                    guard let v = Double(text), v.isFinite else { throw CLIError(.badInput, "\(KVStoreError.quote(text)) is not a number") }
                    try defaults.set(v, forKey: key, in: tx)
                case .bool:
                    switch text.lowercased() {
                    case "true", "yes", "1": try defaults.set(true, forKey: key, in: tx)
                    case "false", "no", "0": try defaults.set(false, forKey: key, in: tx)
                    default: throw CLIError(.badInput, "\(KVStoreError.quote(text)) is not a bool (true/false/yes/no/1/0)")
                    }
                case .json:
                    try defaults.set(cborValue: try JSONBridge.cbor(fromJSON: text), forKey: key, in: tx)
                }
            }
        }
    }

    struct DeleteKey: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "delete", abstract: "Remove a key. Exits 1 if it had no value.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var suite: SuiteOption
        @Argument(help: "The key.") var key: String

        func run() throws {
            let container = try global.openContainer(readOnly: false)
            let defaults = try container.defaults(suite: suite.suite)
            let existed = try container.store.write(author: global.author) { tx -> Bool in
                guard try defaults.object(forKey: key, in: tx) != nil else { return false }
                try defaults.removeObject(forKey: key, in: tx)
                return true
            }
            guard existed else { throw CLIError(.notFound, "no value for key '\(key)' in suite '\(defaults.suiteName)'") }
        }
    }

    struct Domains: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "domains", abstract: "List the defaults suites.")
        @OptionGroup var global: GlobalOptions

        func run() throws {
            let container = try global.openContainer(readOnly: true)
            let suites = try container.store.catalog().filter { $0.kind == .defaults }.map(\.name)
            if global.json { Output.json(suites) } else { suites.forEach { print($0) } }
        }
    }
}
