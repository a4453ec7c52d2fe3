import ArgumentParser
import Foundation
import KVStore
import SyncKit

/// `kvtool watch`: one line per change committed from now on, by any process.
struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print a line per change committed by any process, as it happens.",
        discussion: "Shows changes to history-enabled collections and suites (see kvtool history enable). Wakes on the container's change notification.")

    @OptionGroup var global: GlobalOptions
    @Option(help: "Exit after printing this many changes.") var count: Int?

    func validate() throws {
        if let count, count <= 0 { throw ValidationError("--count must be positive") }
    }

    func run() throws {
        let container = try global.openContainer(readOnly: true)
        let history = try History.attach(to: container.store)
        let text = try HistoryText(store: container.store)
        let changes = try ChangeNotifier(container: container).subscribe()
        var token = try history.currentToken()
        var printed = 0
        if !global.json { print("watching \(container.groupIdentifier.rawValue) from token \(token)") }
        Output.flush()
        while count.map({ printed < $0 }) ?? true {
            _ = changes.wait(timeout: .seconds(1))
            switch try history.changes(since: token) {
            case .expired(let purged):
                // Purged while we slept: say so and carry on from the end.
                if !global.json { print("history was purged through \(purged); continuing from the current token") }
                token = try history.currentToken()
            case .changes(let transactions, let next):
                for entry in transactions.flatMap(\.entries) where count.map({ printed < $0 }) ?? true {
                    text.print(entry, json: global.json)
                    printed += 1
                }
                token = next
            }
            Output.flush()
        }
    }
}
