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
let arguments = GlobalOptions.movingGlobalOptionsAfterSubcommand(Defaults.translatingMacOSTypeFlags(Array(CommandLine.arguments.dropFirst())))
// `kvtool help NAME…` must name a command: swift-argument-parser prints the root help and exits 0.
if arguments.first == "help" {
    var level: [any ParsableCommand.Type] = KVTool.configuration.subcommands
    for word in arguments.dropFirst() where !word.hasPrefix("-") {
        guard let command = level.first(where: { $0._commandName == word }) else {
            CLIError(.usage, "no command named '\(word)' (kvtool help lists the commands)").exit()
        }
        level = command.configuration.subcommands
    }
}
do {
    var command = try KVTool.parseAsRoot(arguments)
    try command.run()
    CreatedPaths.keep()
} catch let error as CLIError {
    CreatedPaths.removeAll()
    error.exit()
} catch {
    CreatedPaths.removeAll()
    if let mapped = CLIError(mapping: error) {
        mapped.exit()
    }
    // --help, --version and completion scripts print in full; usage errors get the one-line contract.
    if KVTool.exitCode(for: error) == .success {
        KVTool.exit(withError: error)
    }
    let message = KVTool.message(for: error).split(separator: "\n").first.map(String.init) ?? "invalid usage"
    CLIError(.usage, message.replacingOccurrences(of: "Error: ", with: "") + " (see kvtool help)").exit()
}
