import ArgumentParser
import KVStore

/// `kvtool`: inspect, dump and administer App Group containers.
struct KVTool: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kvtool",
        abstract: "Inspect and administer KVStore App Group containers.",
        discussion: """
            Global options (--root, --group, --json, --author) go before or after the subcommand.
            KVSTORE_ROOT and KVSTORE_GROUP supply defaults for --root and --group.

            Exit codes: \(CLIError.Kind.summary).
            """,
        version: KVStoreVersion.current,
        subcommands: [
            Info.self, Collections.self, Get.self, Put.self, Delete.self, Scan.self, Dump.self, Load.self,
            Defaults.self, Files.self, HistoryCommand.self, Watch.self, Snapshot.self,
            Readers.self, Check.self, Repair.self, Compact.self, Bench.self, Demo.self,
        ] + KVTool.serveCommands + KVTool.replicationCommands
    )
}

extension KVTool {
    /// `kvtool serve`, with the `Serve` trait (on by default).
    #if Serve
    static let serveCommands: [any ParsableCommand.Type] = [Serve.self]
    #else
    static let serveCommands: [any ParsableCommand.Type] = []
    #endif

    /// `kvtool sync`, with the `PostgreSQL` trait (on by default).
    #if PostgreSQL
    static let replicationCommands: [any ParsableCommand.Type] = [SyncCommand.self]
    #else
    static let replicationCommands: [any ParsableCommand.Type] = []
    #endif
}
