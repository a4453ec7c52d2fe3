import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif

// A parent may have started kvtool with signals blocked (libdispatch's threads block them, and a child
// inherits its spawner's mask): SIGTERM and SIGINT must stop `kvtool sync run` and `watch`.
var unblocked = sigset_t()
sigemptyset(&unblocked)
sigprocmask(SIG_SETMASK, &unblocked, nil)

// Global options may come before the subcommand (`kvtool --group G info`); swift-argument-parser
// wants them on the subcommand, so they are moved there before parsing.
let arguments: [String]
do {
    arguments = try GlobalOptions.route(Defaults.translatingMacOSTypeFlags(Array(CommandLine.arguments.dropFirst())))
} catch {
    error.exit()
}
// `kvtool help NAME…` must name a command: swift-argument-parser prints the root help and exits 0.
if arguments.first == "help" {
    var level: [any ParsableCommand.Type] = KVTool.configuration.subcommands
    var words = arguments.dropFirst().makeIterator()
    while let word = words.next() {
        // A global option's value is not a command's name (`kvtool --group G help`).
        if GlobalOptions.valued.contains(word) { _ = words.next() }
        if word.hasPrefix("-") { continue }
        guard let command = level.first(where: { $0._commandName == word }) else {
            CLIError(.usage, "no command named '\(word)' (kvtool help lists the commands)").exit()
        }
        level = command.configuration.subcommands
    }
}
/// A parse or validation error: one line, exit 64; `--help`, `--version` and completion scripts print
/// in full.
func exitForUsage(_ error: any Error) -> Never {
    if let error = error as? CLIError ?? CLIError(mapping: error) { error.exit() }
    if KVTool.exitCode(for: error) == .success {
        KVTool.exit(withError: error)
    }
    let message = KVTool.message(for: error).split(separator: "\n").first.map(String.init) ?? "invalid usage"
    CLIError(.usage, message.replacingOccurrences(of: "Error: ", with: "") + " (see kvtool help)").exit()
}

var command: any ParsableCommand
do {
    command = try KVTool.parseAsRoot(arguments)
} catch {
    exitForUsage(error)
}
do {
    try command.run()
    CreatedPaths.keep()
} catch {
    CreatedPaths.removeAll()
    if let error = error as? ExitCode { KVTool.exit(withError: error) }
    guard let classified = CLIError(runError: error) else { exitForUsage(error) }
    classified.exit()
}
