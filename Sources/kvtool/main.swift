import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif

// Global options may come before the subcommand (`kvtool --group G info`); swift-argument-parser
// wants them on the subcommand, so they are moved there before parsing.
let arguments = GlobalOptions.movingGlobalOptionsAfterSubcommand(Array(CommandLine.arguments.dropFirst()))
do {
    var command = try KVTool.parseAsRoot(arguments)
    try command.run()
} catch let error as CLIError {
    error.exit()
} catch {
    if let mapped = CLIError(mapping: error) {
        mapped.exit()
    }
    KVTool.exit(withError: error)
}
