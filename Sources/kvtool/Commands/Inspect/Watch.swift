import ArgumentParser
import Foundation
import KVStore
import SyncKit

/// `kvtool watch`: one line per commit from now on, by any process: the history's entries for the
/// commits that recorded some, and the transaction ID (with the time it was seen) for those that did
/// not.
struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print a line per commit of any process, as it happens.",
        discussion: """
            A commit to a collection or suite with history (kvtool history enable) prints one line per \
            change: token, time, transaction, author, operation, target and key. Any other commit prints \
            its transaction ID and the time it was seen, and the first such line says how to record \
            what changed. Wakes on the container's change notification, and looks for commits of \
            processes that post none every 50 ms.
            """)

    @OptionGroup var global: GlobalOptions
    @Option(help: "Exit after printing this many lines (changes or commits).") var count: Int?

    func validate() throws {
        if let count, count <= 0 { throw ValidationError("--count must be positive") }
    }

    func run() throws {
        let container = try global.openContainer(readOnly: true)
        let text = try HistoryText(store: container.store)
        var follower = try CommitFollower(container: container)
        var printed = 0
        var explained = false
        var more: Bool { count.map { printed < $0 } ?? true }
        if !global.json {
            print("watching \(container.groupIdentifier.rawValue) from token \(follower.token), transaction \(follower.transaction)")
        }
        Output.flush()
        while more {
            let commits: [CommitFollower.Commit]
            switch try follower.next() {
            case .commits(let found):
                commits = found
            case .purged(let through, let found):
                // Purged while we slept: say so and carry on from the end.
                if !global.json { print("history was purged through \(through); continuing from the current token") }
                commits = found
            }
            for commit in commits where more {
                for entry in commit.entries where more {
                    try text.print(entry, json: global.json)
                    printed += 1
                }
                guard commit.entries.isEmpty else { continue }
                print(global.json ? try Self.commitJSON(commit.transactionID, seen: commit.seen) : Self.commitLine(commit.transactionID, seen: commit.seen))
                printed += 1
                if !explained && !global.json {
                    print("   (no history recorded for txn \(commit.transactionID): kvtool history enable COLLECTION, or --suite NAME, records what each commit changes)")
                    explained = true
                }
            }
            Output.flush()
        }
    }

    /// A commit that recorded no history, in the columns of a history line.
    static func commitLine(_ id: Int, seen: Date) -> String {
        ["-", HistoryText.timestamp(seen), "txn \(id)", "-", "commit", "-", "-"].joined(separator: "  ")
    }

    static func commitJSON(_ id: Int, seen: Date) throws -> String {
        try Output.line(["transaction": .integer(id), "seen": .string(HistoryText.timestamp(seen)), "history": false])
    }
}
