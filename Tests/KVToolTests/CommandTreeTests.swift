import ArgumentParser
import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport
@testable import kvtool

/// The command tree is the only list (issue 37): global options reach every command that takes a
/// container, before or after its path, however deep; a command that takes none says so in one line;
/// and the exit codes `kvtool help` and the README list are `CLIError.Kind`'s.
@Suite struct CommandTreeTests {
    static let globals = ["--root", "/r", "--group", "group.com.example.tree", "--json", "--author", "tester"]
    static let globalNames: Set<String> = ["--root", "--group", "--json", "--author"]

    /// The commands a user runs: leaves, and nodes that run themselves or stand for a default.
    static var runnablePaths: [(path: [String], command: any ParsableCommand.Type)] {
        CommandTree.paths().filter { entry in
            let configuration = entry.command.configuration
            return configuration.subcommands.isEmpty || configuration.defaultSubcommand != nil
                || !CommandTree.longOptionNames(of: entry.command).isDisjoint(with: globalNames)
        }
    }

    @Test(.blockingWork) func everyCommandPathTakesTheGlobalOptionsBeforeAndAfterItOrSaysItHasNoUseForThem() throws {
        let paths = Self.runnablePaths
        // The walk found the deep paths the old table missed.
        let spelled = Set(paths.map { $0.path.joined(separator: " ") })
        for expected in ["info", "defaults write", "history consumers", "demo"] { #expect(spelled.contains(expected)) }
        #if PostgreSQL
        for expected in ["sync quarantine", "sync quarantine list", "sync quarantine retry", "sync token revoke", "sync gateway",
                         "bench sync", "bench gateway", "demo machine"] {
            #expect(spelled.contains(expected), "\(expected) is not in the tree")
        }
        #endif
        var containerCommands = 0
        for (path, _) in paths {
            let spelledPath = path.joined(separator: " ")
            let (resolved, depth) = CommandTree.resolve(path + ["x"])
            #expect(depth == path.count, "\(spelledPath): resolved \(depth) words")
            let declared = CommandTree.longOptionNames(of: resolved)
            if let free = resolved as? any WithoutContainer.Type {
                // It says so in one line, before or after its path, for each global it does not declare.
                for name in Self.globalNames.subtracting(declared) {
                    let given = name == "--json" ? [name] : [name, "value"]
                    for arguments in [given + path, path + given] {
                        do {
                            _ = try GlobalOptions.route(arguments)
                            Issue.record("\(arguments) was routed, not refused")
                        } catch {
                            #expect(error.kind == .usage)
                            #expect(error.message == "kvtool \(spelledPath) has no use for \(name): \(free.withoutContainer)")
                        }
                    }
                }
                continue
            }
            // Every other command takes all four: a new subcommand without `@OptionGroup var global:
            // GlobalOptions` (and not a WithoutContainer) fails here.
            #expect(declared.isSuperset(of: Self.globalNames), "kvtool \(spelledPath) does not take \(Self.globalNames.subtracting(declared).sorted())")
            containerCommands += 1
            let before = try GlobalOptions.route(Self.globals + path)
            #expect(before == path + Self.globals, "\(spelledPath): \(before)")
            let after = try GlobalOptions.route(path + Self.globals)
            #expect(after == path + Self.globals)
            // swift-argument-parser accepts them there: the parse either succeeds with the values in
            // place, or fails for some other reason (a missing argument), never for an unknown option.
            do {
                let parsed = try KVTool.parseAsRoot(before)
                let options = Mirror(reflecting: parsed).children.lazy.compactMap { ($0.value as? OptionGroup<GlobalOptions>)?.wrappedValue }.first
                #expect(options?.root == "/r" && options?.group == "group.com.example.tree" && options?.json == true && options?.author == "tester",
                        "kvtool \(spelledPath) parsed without its global options")
            } catch {
                let message = KVTool.message(for: error)
                #expect(!message.contains("Unknown option") && !message.contains("Unexpected argument"), "kvtool \(spelledPath): \(message)")
            }
        }
        #expect(containerCommands >= 35)
    }

    @Test(.blockingWork) func helpAndUnknownWordsKeepTheirOwnErrors() throws {
        // `help` describes commands whatever the container: leading global options are dropped.
        #expect(try GlobalOptions.route(["--group", "group.a.b", "help", "history", "show"]) == ["help", "history", "show"])
        // A word that names no command is the error, before or after global options, at any depth.
        for arguments in [["--root", "/r", "nosuch", "x"], ["nosuch", "--root", "/r"]] {
            #expect(throws: CLIError.self) { _ = try GlobalOptions.route(arguments) }
        }
        let r = try run(productsDirectory() + "/kvtool", ["--group", "group.a.b", "help", "history"], timeout: 60)
        #expect(r.status == 0 && r.stdout.contains("OVERVIEW:"), "\(r.stderr)")
    }

    /// A mistyped command is named as such, whatever global options come before or after it (issue 46:
    /// `kvtool --root R --group G sync statsu` said "Unknown option '--root'"), with the commands it
    /// could have been, read from the tree.
    @Test(.blockingWork) func aMistypedCommandIsNamedBeforeOrAfterGlobalOptionsAtAnyDepth() throws {
        let kvtool = productsDirectory() + "/kvtool"
        func names(_ command: any ParsableCommand.Type) -> String {
            command.configuration.subcommands.map { $0._commandName }.joined(separator: ", ")
        }
        var cases: [([String], String)] = [
            (["--root", "/r", "--group", "group.a.b", "frobnicate"], "no command named 'frobnicate' (kvtool help lists the commands)"),
            (["frobnicate", "--json"], "no command named 'frobnicate' (kvtool help lists the commands)"),
            (["--group", "group.a.b", "history", "shwo", "--json"],
             "kvtool history has no command named 'shwo'; its commands: \(names(HistoryCommand.self)) (kvtool help history)"),
        ]
        #if PostgreSQL
        let sync = "kvtool sync has no command named 'statsu'; its commands: \(names(SyncCommand.self)) (kvtool help sync)"
        #expect(sync.contains("enable, run, request, status, agent"))
        cases += [
            (["--root", "/r", "--group", "group.a.b", "sync", "statsu"], sync),
            (["sync", "statsu", "--root", "/r", "--group", "group.a.b"], sync),
            (["sync", "statsu"], sync),
            (["--json", "sync", "quarantine", "retyr"],
             "kvtool sync quarantine has no command named 'retyr'; its commands: list, retry, keep-mine, drop (kvtool help sync quarantine)"),
        ]
        #endif
        for (arguments, message) in cases {
            let r = try run(kvtool, arguments, timeout: 60)
            #expect(r.status == 64 && r.stdout.isEmpty, "\(arguments): \(r.stdout)\(r.stderr)")
            #expect(r.stderr == "kvtool: error: \(message)\n", "\(arguments)")
        }
    }

    @Test(.blockingWork) func theReportedDeepPathsRunWithLeadingGlobalOptions() throws {
        let dir = TemporaryDirectory()
        let group = "group.com.example.tree"
        _ = try SharedContainer(groupIdentifier: group, root: dir.path)
        let kvtool = productsDirectory() + "/kvtool"
        // `history consumers` has three levels' worth of routing with `--json` before it.
        var r = try run(kvtool, ["--root", dir.path, "--group", group, "--json", "history", "consumers"], timeout: 60)
        #expect(r.status == 0, "\(r.stderr)")
        #if PostgreSQL
        // The issue's own line: `sync quarantine list` with --root and --group before it.
        r = try run(kvtool, ["--root", dir.path, "--group", group, "sync", "quarantine", "list"], timeout: 60)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stderr.contains("Unknown option"))
        // The default subcommand stands in: `sync quarantine` alone.
        r = try run(kvtool, ["--root", dir.path, "--group", group, "sync", "quarantine"], timeout: 60)
        #expect(r.status == 0, "\(r.stderr)")
        // A command with no container says so in one line, and exits 64.
        r = try run(kvtool, ["--root", dir.path, "sync", "token", "list", "--database", "postgres://nobody@127.0.0.1:1/none"], timeout: 60)
        #expect(r.status == 64)
        #expect(r.stderr == "kvtool: error: kvtool sync token list has no use for --root: credentials live in the database, not in a container\n")
        // `sync token issue|revoke` take the group from $KVSTORE_GROUP as every command does: they get as
        // far as the (unreachable) database, exit 74, instead of a usage error.
        var environment = ProcessInfo.processInfo.environment
        environment["KVSTORE_GROUP"] = group
        for arguments in [["sync", "token", "issue"], ["sync", "token", "revoke", "--device", "phone"]] {
            r = try run(kvtool, arguments + ["--database", "postgres://nobody@127.0.0.1:1/none"], environment: environment, timeout: 60)
            #expect(r.status == 74, "\(arguments): \(r.stderr)")
            #expect(r.stderr.contains("cannot reach"), "\(r.stderr)")
        }
        // …with a leading --group too (three levels deep).
        r = try run(kvtool, ["--group", group, "sync", "token", "revoke", "--device", "phone", "--database", "postgres://nobody@127.0.0.1:1/none"], timeout: 60)
        #expect(r.status == 74, "\(r.stderr)")
        environment["KVSTORE_GROUP"] = nil
        r = try run(kvtool, ["sync", "token", "issue", "--database", "postgres://nobody@127.0.0.1:1/none"], environment: environment, timeout: 60)
        #expect(r.status == 64)
        #expect(r.stderr == "kvtool: error: no App Group given: pass --group ID or set KVSTORE_GROUP\n")
        #endif
    }

    // MARK: - Exit codes

    @Test(.blockingWork) func helpAndTheREADMEListEveryExitCodeOfCLIErrorKind() throws {
        let help = KVTool.helpMessage(columns: 10_000)
        for kind in CLIError.Kind.allCases {
            #expect(help.contains("\(kind.rawValue) \(kind.meaning)"), "kvtool help does not list \(kind.rawValue)")
        }
        #expect(help.contains("0 success"))
        // The README's table lists exactly 0 and the codes of CLIError.Kind.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        let readme = try String(contentsOfFile: root + "/README.md", encoding: .utf8)
        let lines = readme.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let header = try #require(lines.firstIndex { $0.hasPrefix("| Exit code | Meaning |") }, "README.md has no exit code table")
        var listed: [Int32] = []
        for line in lines[(header + 2)...] {
            guard line.hasPrefix("|") else { break }
            let cell = line.split(separator: "|").first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            listed.append(try #require(Int32(cell), "README.md's exit code row \(line)"))
        }
        #expect(listed == [0] + CLIError.Kind.allCases.map(\.rawValue))
    }

    @Test(.blockingWork) func libraryErrorsAreClassifiedAndAnUnclassifiedOneIsAFailureNotUsage() throws {
        #expect(CLIError(mapping: SyncError.unknownConsumer("x"))?.kind == .notFound)
        #expect(CLIError(mapping: SyncError.corruptHistory("x"))?.kind == .failure)
        #expect(CLIError(mapping: SnapshotError.generationNotFound(3))?.kind == .notFound)
        #expect(CLIError(mapping: SnapshotError.invalidKeepCount(-1))?.kind == .usage)
        #expect(CLIError(mapping: WidgetFeedError.notPublished(name: "a", path: "/p"))?.kind == .notFound)
        #expect(CLIError(mapping: WidgetFeedError.corrupt(path: "/p", reason: "r"))?.kind == .failure)
        #expect(CLIError(mapping: ExportError.notANumber(path: "$.a"))?.kind == .badInput)
        #expect(CLIError(mapping: ExportError.invalidFileName("a/b", reason: "r"))?.kind == .usage)
        struct Unclassified: Error {}
        #expect(CLIError(mapping: Unclassified()) == nil)
        // What a command's run() throws: an error nobody mapped exits 74, not 64; kvtool's own and the
        // libraries' keep their class; swift-argument-parser's own keep its usage contract.
        #expect(CLIError(runError: Unclassified())?.kind == .failure)
        #expect(CLIError(runError: CLIError(.credential, "x"))?.kind == .credential)
        #expect(CLIError(runError: KVStoreError.collectionNotFound("c"))?.kind == .notFound)
        #expect(CLIError(runError: ValidationError("v")) == nil)
    }
}
