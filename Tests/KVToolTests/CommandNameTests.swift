import ArgumentParser
import Testing
import TestSupport
@testable import kvtool

/// Every command names itself: otherwise swift-argument-parser derives the name from the type with
/// `String(describing:)`, which scans the process's protocol conformances, about a million
/// instructions a command at each start of `kvtool` (issue 16).
@Suite struct CommandNameTests {
    @Test(.blockingWork) func everyCommandSetsItsName() {
        var seen = 0
        func walk(_ command: any ParsableCommand.Type, path: String) {
            seen += 1
            let name = command.configuration.commandName
            #expect(name != nil, "\(path) \(String(reflecting: command)) has no commandName")
            let children = command.configuration.subcommands
            let names = children.compactMap { $0.configuration.commandName }
            #expect(Set(names).count == names.count, "\(path) has two subcommands with one name: \(names)")
            for child in children { walk(child, path: path + " " + (child.configuration.commandName ?? "?")) }
        }
        walk(KVTool.self, path: "kvtool")
        // The whole tree was walked: kvtool and every command under it (41, with `repair`, `demo
        // push-widget` and `files status` (issue 49)), with `sync` and its subcommands (with `sync quarantine`, its `list`, `retry`,
        // `keep-mine` and `drop` (issue 47),
        // `sync setup`, `sync token` and its `issue`, `list` and `revoke`, `sync gateway`, `sync request`,
        // and `sync agent` and its `set`, `show` and `clear`), `demo machine` and `bench sync`, `bench
        // requests`, `bench gateway`, `bench files` and `bench json` (issue 50), and `sync blobs` with its `ls`, `gc`, `fetch` and
        // `verify` (issue 49), `sync backend` with its `grant` and `revoke`, `sync server` with its `put`, `get`
        // and `delete`, `sync rejected` with its `list`, `retry` and `discard`, and `bench validators` (issue 50), and `bench
        // pushers` and `sync directory` with its `set`, `hold` and `list` (issue 51), and the unlisted `bench gateway-devices` (issue 51) (50) only
        // under the PostgreSQL trait, and `serve` under Serve.
        var expected = 41
        #if PostgreSQL
        expected += 50
        #endif
        #if Serve
        expected += 1
        #endif
        #expect(seen == expected)
    }

    @Test(.blockingWork) func versionPrintsWithoutTouchingAContainer() throws {
        let r = try run(productsDirectory() + "/kvtool", ["--version"], timeout: 60)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == KVTool.configuration.version + "\n")
    }
}
