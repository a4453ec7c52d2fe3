import ArgumentParser
import Foundation
import KVStore
import SyncKit

/// The options every subcommand accepts.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: "The containers' root directory (default: $KVSTORE_ROOT, $XDG_DATA_HOME/kvstore, ~/.local/share/kvstore).")
    var root: String?

    @Option(name: .long, help: "The App Group identifier, e.g. group.com.example.app (default: $KVSTORE_GROUP).")
    var group: String?

    @Flag(name: .long, help: "Print machine-readable JSON.")
    var json = false

    @Option(name: .long, help: "The author recorded for writes.")
    var author: String = "kvtool"

    /// The group identifier from `--group` or `$KVSTORE_GROUP`.
    func groupIdentifier() throws -> String {
        if let group { return group }
        if let group = ProcessInfo.processInfo.environment["KVSTORE_GROUP"], !group.isEmpty { return group }
        throw CLIError(.usage, "no App Group given: pass --group ID or set KVSTORE_GROUP")
    }

    /// Opens the container. Only a command asked to write something new (`create`: `defaults write`,
    /// `files put`, `load`) creates one, and if that command then fails, what it created is removed
    /// again (``CreatedPaths``): a mistyped `--group` leaves the root as it was.
    /// - Parameter clearStaleReaders: whether opening clears the reader slots of dead processes.
    func openContainer(readOnly: Bool, clearStaleReaders: Bool = true, create: Bool = false) throws -> SharedContainer {
        let group = try groupIdentifier()
        var options = SharedContainer.Options()
        options.readOnly = readOnly
        options.store.clearStaleReadersOnOpen = clearStaleReaders
        let layout = try ContainerLayout(groupIdentifier: group, root: root)
        if readOnly || !create {
            // Say "not found" rather than an I/O error when there is simply no container yet.
            guard FileManager.default.fileExists(atPath: layout.storeDataFile) else {
                throw CLIError(.notFound, "no container for \(layout.groupIdentifier.rawValue) at \(layout.path) (check --group and --root; `kvtool collections` lists a container's contents)")
            }
        } else {
            CreatedPaths.recordIfMissing(layout: layout)
        }
        let container = try SharedContainer(groupIdentifier: group, root: root, options: options)
        // Every write records history where it is enabled, and wakes the container's observers. History
        // is attached only where it exists: attaching creates its collections, and a command that fails
        // must leave the store exactly as it was.
        if !readOnly {
            if try container.store.catalogEntry(forCollection: History.entriesName) != nil {
                _ = try History.attach(to: container)
            } else {
                container.store.addObserver(CommitNotifier(notifier: ChangeNotifier(container: container)))
            }
        }
        return container
    }

    /// The global options' names (`--json` is a flag, the others take a value).
    static let valued: Set<String> = ["--root", "--group", "--author"]
    static let flags: Set<String> = ["--json"]

    /// Moves global options that precede the subcommand's path to just after it, where
    /// swift-argument-parser looks for them, however deep the path (`kvtool --group G sync token
    /// revoke …`). The path is found by walking `KVTool.configuration`'s subcommands: the command
    /// tree is the only list. A command that takes no container (``WithoutContainer``) and is given a
    /// global option it does not declare itself is refused in one line that says so, before or after
    /// its name, instead of swift-argument-parser's "Unknown option".
    static func route(_ arguments: [String]) throws(CLIError) -> [String] {
        var leading: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let name = optionName(argument)
            if flags.contains(argument) {
                leading.append(argument)
                index += 1
            } else if valued.contains(name) {
                leading.append(argument)
                if !argument.contains("="), index + 1 < arguments.count {
                    leading.append(arguments[index + 1])
                    index += 1
                }
                index += 1
            } else {
                break
            }
        }
        var rest = Array(arguments[index...])
        let (command, depth) = CommandTree.resolve(rest)
        try refuseUnknownCommand(rest, depth: depth)
        try refuseUnusedGlobals(leading + rest[depth...].prefix { $0 != "--" }, for: command, path: rest.prefix(depth))
        guard !leading.isEmpty, !rest.isEmpty else { return arguments }
        // `help` takes none: it describes commands, whatever the container.
        if rest.first == "help" { return rest }
        // A first word that names no command (a typo) keeps them after it, so that the error
        // is about that word.
        rest.insert(contentsOf: leading, at: max(depth, 1))
        return rest
    }

    /// Throws a usage error naming the word after a command's path that names none of its
    /// subcommands (`kvtool sync statsu`), before or after global options: swift-argument-parser would
    /// report the options that follow it instead ("Unknown option '--root'"), or the word as an
    /// argument the command does not take. A command whose default subcommand takes arguments
    /// (none today) is left to it.
    private static func refuseUnknownCommand(_ words: [String], depth: Int) throws(CLIError) {
        guard depth < words.count else { return }
        let word = words[depth]
        // `help` is swift-argument-parser's own, at the root.
        guard !word.hasPrefix("-"), !(depth == 0 && word == "help") else { return }
        let (node, _) = CommandTree.node(words)
        let subcommands = node.configuration.subcommands
        guard !subcommands.isEmpty else { return }
        if let fallback = node.configuration.defaultSubcommand, CommandTree.takesArguments(fallback) { return }
        let shown = "'\(word)'"
        if depth == 0 { throw CLIError(.usage, "no command named \(shown) (kvtool help lists the commands)") }
        let path = words.prefix(depth).joined(separator: " ")
        var names: [String] = []
        for subcommand in subcommands { names.append(subcommand._commandName) }
        throw CLIError(.usage, "kvtool \(path) has no command named \(shown); its commands: \(names.joined(separator: ", ")) (kvtool help \(path))")
    }

    private static func optionName(_ argument: String) -> String {
        argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
    }

    /// Throws a usage error naming the first global option `command` neither takes through
    /// ``GlobalOptions`` nor declares itself (`sync token issue --group`).
    private static func refuseUnusedGlobals(_ arguments: some Sequence<String>, for command: any ParsableCommand.Type,
                                            path: some Sequence<String>) throws(CLIError) {
        guard let free = command as? any WithoutContainer.Type else { return }
        let given = arguments.map(optionName).filter { valued.contains($0) || flags.contains($0) }
        guard !given.isEmpty else { return }
        let declared = CommandTree.longOptionNames(of: command)
        if let unused = given.first(where: { !declared.contains($0) }) {
            throw CLIError(.usage, "kvtool \(path.joined(separator: " ")) has no use for \(unused): \(free.withoutContainer)")
        }
    }
}

/// A command that works on no container (on the database, or on throwaway containers of its own): it
/// does not take ``GlobalOptions``, and says why when given one of them.
protocol WithoutContainer {
    /// Why, after "has no use for --root: ", e.g. "it works on the database, not on a container".
    static var withoutContainer: String { get }
}

/// kvtool's command tree, read from `KVTool.configuration`.
enum CommandTree {
    /// The command `words` name from the root (`["sync", "token", "revoke", "--id", "3"]` names `sync
    /// token revoke`, depth 3), and how many words its path takes. A command with a default subcommand
    /// stands for it when no subcommand is named (`sync quarantine` is `sync quarantine list`).
    static func resolve(_ words: [String]) -> (command: any ParsableCommand.Type, depth: Int) {
        var (command, depth) = node(words)
        if let fallback = command.configuration.defaultSubcommand { command = fallback }
        return (command, depth)
    }

    /// The node of the tree `words` reach from the root, its default subcommand not stood in for
    /// (`["sync", "statsu"]` reach `sync`, depth 1).
    static func node(_ words: [String]) -> (command: any ParsableCommand.Type, depth: Int) {
        var command: any ParsableCommand.Type = KVTool.self
        var depth = 0
        while depth < words.count,
              let child = command.configuration.subcommands.first(where: { $0._commandName == words[depth] }) {
            command = child
            depth += 1
        }
        return (command, depth)
    }

    /// Whether `command` takes a positional argument (`get`'s collection and key).
    static func takesArguments(_ command: any ParsableCommand.Type) -> Bool {
        struct Info: Decodable {
            struct Command: Decodable {
                struct Argument: Decodable { var kind: String }
                var arguments: [Argument]?
            }
            var command: Command
        }
        guard let info = try? JSONDecoder().decode(Info.self, from: Data(command._dumpHelp().utf8)) else { return true }
        return (info.command.arguments ?? []).contains { $0.kind == "positional" }
    }

    /// Every command path under the root (`["sync", "token", "revoke"]`), with its command type.
    static func paths(from command: any ParsableCommand.Type = KVTool.self, prefix: [String] = [])
        -> [(path: [String], command: any ParsableCommand.Type)] {
        command.configuration.subcommands.flatMap { child -> [(path: [String], command: any ParsableCommand.Type)] in
            let path = prefix + [child._commandName]
            return [(path, child)] + paths(from: child, prefix: path)
        }
    }

    /// The long option and flag names `command` declares (`--group`), from swift-argument-parser's own
    /// description of it.
    static func longOptionNames(of command: any ParsableCommand.Type) -> Set<String> {
        struct Info: Decodable {
            struct Command: Decodable {
                struct Argument: Decodable {
                    struct Name: Decodable { var kind: String; var name: String }
                    var names: [Name]?
                }
                var arguments: [Argument]?
            }
            var command: Command
        }
        guard let info = try? JSONDecoder().decode(Info.self, from: Data(command._dumpHelp().utf8)) else { return [] }
        let names = (info.command.arguments ?? []).flatMap { $0.names ?? [] }
        return Set(names.filter { $0.kind == "long" }.map { "--" + $0.name })
    }
}

/// What this kvtool process created (a container, or the root above it), removed again if the
/// command fails: "a failed command changes nothing" holds for a mistyped `--group` too.
enum CreatedPaths {
    nonisolated(unsafe) private static var paths: [String] = []

    /// Records the topmost directory of `layout` that does not exist yet (the root's first missing
    /// ancestor, or the container), before the open creates it.
    static func recordIfMissing(layout: ContainerLayout) {
        let manager = FileManager.default
        guard !manager.fileExists(atPath: layout.path) else { return }
        var topmost = layout.path
        var parent = (layout.root as NSString).standardizingPath
        while !parent.isEmpty, parent != "/", !manager.fileExists(atPath: parent) {
            topmost = parent
            parent = (parent as NSString).deletingLastPathComponent
        }
        paths.append(topmost)
    }

    /// Forgets the record: the command succeeded, or what it made must stay.
    static func keep() { paths.removeAll() }

    /// Removes what this process created (links inside are removed, never followed).
    static func removeAll() {
        for path in paths.reversed() { try? FileManager.default.removeItem(atPath: path) }
        paths.removeAll()
    }
}
