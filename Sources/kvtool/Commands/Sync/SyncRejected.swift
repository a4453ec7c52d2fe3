#if PostgreSQL
import ArgumentParser
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres

extension SyncCommand {
    /// `kvtool sync rejected [list] [--json]`, `kvtool sync rejected retry|discard ID`: this device's
    /// writes the server refused with a reason (issue 50).
    struct Rejected: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rejected",
            abstract: "This device's writes the server refused, with its reasons: list them, write one again (retry), or drop it (discard).",
            subcommands: [List.self, Act<Retry>.self, Act<Discard>.self], defaultSubcommand: List.self)

        /// What an `Act` command does with one rejected write.
        protocol Action {
            static var name: String { get }
            static var abstract: String { get }
            static func apply(_ id: UInt64, with replicator: Replicator) throws -> RejectedWrite
            static func done(_ shown: String) -> String
        }
        enum Retry: Action {
            static let name = "retry"
            static let abstract = "Write the refused value (or delete) again as a new local change: the next sync sends it, and the server judges it again."
            static func apply(_ id: UInt64, with replicator: Replicator) throws -> RejectedWrite {
                try replicator.retryRejected(id, author: "kvtool")
            }
            static func done(_ shown: String) -> String { "wrote \(shown) again: sent at the next sync" }
        }
        enum Discard: Action {
            static let name = "discard"
            static let abstract = "Drop the record of a refused write: the server's value stays."
            static func apply(_ id: UInt64, with replicator: Replicator) throws -> RejectedWrite {
                try replicator.discardRejected(id)
            }
            static func done(_ shown: String) -> String { "discarded \(shown); the server's value stays" }
        }

        /// `kvtool sync rejected retry|discard ID`. Needs no server.
        struct Act<A: Action>: ParsableCommand {
            static var configuration: CommandConfiguration { CommandConfiguration(commandName: A.name, abstract: A.abstract) }
            @OptionGroup var global: GlobalOptions
            @Argument(help: "The rejected write's number, as kvtool sync rejected lists it.") var id: String

            func run() throws {
                guard let number = UInt64(id), number > 0 else {
                    throw CLIError(.usage, "'\(Escaping.escape(String(id.prefix(40)), quoting: false, shortForms: true, style: .swift))' is not a rejected write's number (a positive integer, as kvtool sync rejected lists it)")
                }
                let container = try global.openContainer(readOnly: false)
                let replicator = try Replicator(container: container, targets: try SyncCommand.targets(of: container))
                let row = try A.apply(number, with: replicator)
                let keys = try HistoryText(store: container.store)
                let key = SyncCommand.key(row.key, of: row.target, keys)
                if global.json {
                    print(try Output.line(["action": .string(A.name), "id": .integer(Int64(row.id)),
                                           "target": .string(row.target?.description ?? row.kind), "key": .string(key)]))
                } else {
                    print(A.done("rejected write \(row.id) of \(row.target?.description ?? row.kind) key \(Escaping.escape(key, quoting: false, shortForms: true, style: .swift))"))
                }
            }
        }

        struct List: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "list",
                abstract: "One line per refused write: number, target, key and the server's reason (--json: one array, with the value).")
            @OptionGroup var global: GlobalOptions

            func run() throws {
                let container = try global.openContainer(readOnly: false)
                let rows = try Replication.rejected(in: container)
                let keys = try HistoryText(store: container.store)
                if global.json {
                    print(try Output.line(.array(rows.map { row in
                        [
                            "id": .integer(Int64(row.id)), "target": .string(row.target?.description ?? row.kind),
                            "kind": .string(row.kind), "name": .string(row.name),
                            "key": .string(SyncCommand.key(row.key, of: row.target, keys)), "keyHex": .string(Hex.encode(row.key)),
                            "value": row.value.map { keys.value($0, of: row.target) } ?? .null,
                            "clock": .string(HybridTimestamp(rawValue: row.clock).description),
                            "reason": .string(row.reason), "rejectedAt": .string(HistoryText.timestamp(row.rejectedAt)),
                            "serverVersion": row.serverVersion.map { .integer($0) } ?? .null,
                        ]
                    })))
                    return
                }
                if rows.isEmpty { print("no write of this device was refused") }
                // The server's reason is shown with its control characters escaped: one printable line each.
                func shown(_ text: String) -> String { Escaping.escape(text, quoting: false, shortForms: true, style: .swift) }
                for row in rows {
                    print("\(row.id)\t\(shown(row.target?.description ?? row.kind))\t\(shown(SyncCommand.key(row.key, of: row.target, keys)))\t\(row.value == nil ? "delete" : "write")\t\(shown(row.reason))")
                }
            }
        }
    }
}
#endif
