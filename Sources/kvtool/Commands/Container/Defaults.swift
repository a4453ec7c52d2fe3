import ArgumentParser
import Foundation
import KVStore

/// `kvtool defaults read|write|delete|domains`, like macOS `defaults`.
///
/// The suite is `--suite NAME` (default: the App Group's own suite), or, as macOS `defaults` takes
/// its domain, the first word: `read DOMAIN KEY`, `write DOMAIN KEY VALUE`, `delete DOMAIN KEY`, and
/// `read DOMAIN` when DOMAIN is a suite and not a key of the App Group's suite.
struct Defaults: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "defaults",
        abstract: "Read and write shared defaults suites, like macOS defaults.",
        discussion: """
            The suite is --suite NAME (default: the App Group's own suite), or, as macOS defaults takes \
            its domain, the first word: "read DOMAIN KEY", "write DOMAIN KEY VALUE", "delete DOMAIN KEY", \
            and "read DOMAIN" when DOMAIN is a suite and not a key of the App Group's suite (a word that \
            is both is refused: say --suite). write DOMAIN KEY VALUE writes only into a suite that exists \
            (or the App Group's own); --suite NAME creates one. macOS's -string, -int (-integer), -float and \
            -bool (-boolean) before the value are --type string|int|float|bool, as on macOS: \
            "defaults write KEY -bool yes".
            """,
        subcommands: [Read.self, Write.self, DeleteKey.self, Domains.self])

    /// The suite option shared by the subcommands: the App Group's own suite by default.
    struct SuiteOption: ParsableArguments {
        @Option(help: "The defaults suite (default: the group identifier).") var suite: String?
    }

    /// The suite and the remaining words of a command that takes `plain` words after an optional
    /// macOS-style DOMAIN: with `plain + 1` words, the first is the suite (and `--suite` must not be
    /// given too).
    static func domain(_ words: [String], plain: Int, suite: String?, usage: String) throws -> (suite: String?, rest: [String]) {
        switch words.count {
        case plain: return (suite, words)
        case plain + 1:
            guard suite == nil else { throw ValidationError("give the suite once: as --suite or as the first word (\(usage))") }
            return (words[0], Array(words.dropFirst()))
        default: throw ValidationError("expected \(usage)")
        }
    }

    struct Read: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "read", abstract: "Print one key's value, or the whole suite. Exits 1 if the key has no value.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var suite: SuiteOption
        @Argument(help: "[DOMAIN] [KEY]: the key (omit it to print every key), after the suite as macOS names its domain.") var words: [String] = []

        func validate() throws {
            if words.count > 2 { throw ValidationError("expected [DOMAIN] [KEY]") }
            if words.count == 2 && suite.suite != nil { throw ValidationError("give the suite once: as --suite or as the first word (read DOMAIN KEY)") }
        }

        func run() throws {
            let container = try global.openContainer(readOnly: true)
            var suiteName = suite.suite
            var key = words.last
            if words.count == 2 {
                suiteName = words[0]
            } else if let word = words.first, suiteName == nil,
                      try container.store.catalog().contains(where: { $0.kind == .defaults && $0.name == word }) {
                // `read DOMAIN`, as on macOS, unless the word is also a key of the App Group's suite.
                if try container.defaults().cborValue(forKey: word) != nil {
                    throw CLIError(.usage, "'\(word)' is both a suite and a key of the suite '\(container.groupIdentifier.rawValue)': "
                                   + "say --suite \(word) for the suite, or --suite \(container.groupIdentifier.rawValue) \(word) for the key")
                }
                suiteName = word
                key = nil
            }
            let defaults = try container.defaults(suite: suiteName)
            guard let key else {
                let keys = try defaults.keys()
                if global.json {
                    let values = try keys.map { try defaults.cborValue(forKey: $0).map(JSONValue.init(cbor:)) ?? .null }
                    print(try Output.line(.object(zip(keys, values).map { JSONValue.Member($0, $1) })))
                } else {
                    Output.table(["KEY", "VALUE"], try keys.map { [$0, try render(defaults, $0)] })
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
            return try Output.line(JSONValue(cbor: value))
        }
    }

    struct Write: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "write", abstract: "Store a value: a string by default, or --type int|float|bool|json.")
        enum ValueType: String, ExpressibleByArgument, CaseIterable { case string, int, float, bool, json }

        @OptionGroup var global: GlobalOptions
        @OptionGroup var suite: SuiteOption
        @Option(help: "How to read the value: string, int, float, bool or json.") var type: ValueType = .string
        @Argument(help: "[DOMAIN] KEY VALUE: the key and the value (- for standard input), after the suite as macOS names its domain.") var words: [String] = []

        func validate() throws {
            _ = try Defaults.domain(words, plain: 2, suite: suite.suite, usage: "[DOMAIN] KEY VALUE")
        }

        func run() throws {
            let (suiteName, rest) = try Defaults.domain(words, plain: 2, suite: suite.suite, usage: "[DOMAIN] KEY VALUE")
            let (key, value) = (rest[0], rest[1])
            let text = try Output.readArgument(value, limit: SharedDefaults.maxValueSize * 4)
            // The value is checked before anything is opened or created.
            let typed = try Self.value(text, as: type)
            let container = try global.openContainer(readOnly: false, create: true)
            if suiteName != nil, suite.suite == nil, suiteName != container.groupIdentifier.rawValue,
               try !container.store.catalog().contains(where: { $0.kind == .defaults && $0.name == suiteName }) {
                // `write DOMAIN KEY VALUE` names a suite that does not exist: most likely a typo, or a
                // key meant for the App Group's suite. Creating a suite takes --suite.
                throw CLIError(.notFound, "no defaults suite named '\(suiteName!)' (kvtool defaults domains lists them): say --suite \(suiteName!) to create it, or leave the domain out to write in the App Group's suite")
            }
            let defaults = try container.defaults(suite: suiteName)
            try container.store.write(author: global.author) { tx in
                try defaults.set(cborValue: typed, forKey: key, in: tx)
            }
            if global.json {
                try Output.json(["suite": .string(defaults.suiteName), "key": .string(key), "stored": true, "type": .string(type.rawValue)])
            }
        }

        /// The value as the type says, as stored: the errors name the text.
        static func value(_ text: String, as type: ValueType) throws -> CBORValue {
            switch type {
            case .string:
                return .text(text)
            case .int:
                guard let v = Int64(text) else { throw CLIError(.badInput, "\(KVStoreError.quote(text)) is not an integer") }
                return v >= 0 ? .unsigned(UInt64(v)) : .negative(UInt64(~v))
            case .float:
                guard let v = Double(text), v.isFinite else { throw CLIError(.badInput, "\(KVStoreError.quote(text)) is not a number") }
                return .float(v)
            case .bool:
                switch text.lowercased() {
                case "true", "yes", "1": return .bool(true)
                case "false", "no", "0": return .bool(false)
                default: throw CLIError(.badInput, "\(KVStoreError.quote(text)) is not a bool (true/false/yes/no/1/0)")
                }
            case .json:
                return try JSONBridge.cbor(fromJSON: text)
            }
        }
    }

    struct DeleteKey: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "delete", abstract: "Remove a key. Exits 1 if it had no value.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var suite: SuiteOption
        @Argument(help: "[DOMAIN] KEY: the key, after the suite as macOS names its domain.") var words: [String] = []

        func validate() throws {
            _ = try Defaults.domain(words, plain: 1, suite: suite.suite, usage: "[DOMAIN] KEY")
        }

        func run() throws {
            let (suiteName, rest) = try Defaults.domain(words, plain: 1, suite: suite.suite, usage: "[DOMAIN] KEY")
            let key = rest[0]
            let container = try global.openContainer(readOnly: false)
            let defaults = try container.defaults(suite: suiteName)
            let existed = try container.store.write(author: global.author) { tx -> Bool in
                guard try defaults.object(forKey: key, in: tx) != nil else { return false }
                try defaults.removeObject(forKey: key, in: tx)
                return true
            }
            guard existed else { throw CLIError(.notFound, "no value for key '\(key)' in suite '\(defaults.suiteName)'") }
            if global.json { try Output.json(["suite": .string(defaults.suiteName), "key": .string(key), "deleted": true]) }
        }
    }

    struct Domains: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "domains", abstract: "List the defaults suites.")
        @OptionGroup var global: GlobalOptions

        func run() throws {
            let container = try global.openContainer(readOnly: true)
            let suites = try container.store.catalog().filter { $0.kind == .defaults }.map(\.name)
            if global.json { try Output.json(.array(suites.map(JSONValue.string))) } else { suites.forEach { print($0) } }
        }
    }
}

extension Defaults {
    /// macOS `defaults write` takes the value's type as `-bool`, `-int`, `-float` or `-string` before the
    /// value; swift-argument-parser would read those as short flags, so they become `--type …`.
    static func translatingMacOSTypeFlags(_ arguments: [String]) -> [String] {
        guard let at = arguments.indices.first(where: { arguments[$0] == "defaults" }),
              at + 1 < arguments.count, arguments[at + 1] == "write" else { return arguments }
        let types = ["-string": "string", "-int": "int", "-integer": "int", "-float": "float", "-bool": "bool", "-boolean": "bool"]
        var result = Array(arguments[...(at + 1)])
        for argument in arguments[(at + 2)...] {
            if let type = types[argument] {
                result += ["--type", type]
            } else {
                result.append(argument)
            }
        }
        return result
    }
}
