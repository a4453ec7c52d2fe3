#if PostgreSQL
import ArgumentParser
import Foundation
import KVStore
import SyncKitPostgres

extension SyncCommand {
    /// `kvtool sync directory set|hold|list`: which database holds each group (issue 51).
    struct Directory: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "directory",
            abstract: "As the home database's owner: place a group in one of the deployment's databases, hold it while it moves, or list the places.",
            discussion: """
                The directory lives in the home database (--database, the gateways' --database). A group without an \
                entry lives there. A gateway sends each request of a group to the database the directory names, by the \
                name it was given with --group-database NAME=URL (home: the home database), and reads the directory \
                again at most 5 s later: placing a group elsewhere moves no row; copy them first (DESIGN.md, \
                "Several databases", says how to move a group).
                """,
            subcommands: [SetPlace.self, Hold.self, List.self])

        /// `--group`, as every other command takes it, and the group shown in a line.
        static func shown(_ group: String) -> String { Escaping.escape(group, quoting: false, shortForms: true, style: .swift) }

        struct SetPlace: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set",
                abstract: "Place a group in the database a gateway knows by NAME (home: the home database).")
            @OptionGroup var database: DatabaseOption
            @Option(help: "The group (default: $KVSTORE_GROUP).") var group: String?
            @Option(name: .customLong("in"), help: "The database's name in the directory (kvtool sync gateway --group-database NAME=URL), or home.")
            var name: String

            func validate() throws {
                guard SyncDirectory.isValidName(name) else {
                    throw ValidationError("--in takes a database's name: 1 to 63 letters, digits, - and _ (never its URL), got '\(name)'")
                }
            }

            func run() throws {
                let (url, group, name) = (try database.url(), try SyncCommand.Token.group(self.group), self.name)
                try blocking { try await SyncDirectory.place(group: group, in: name, on: url) }
                print("placed the group \(Directory.shown(group)) in \(name)")
            }
        }

        struct Hold: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "hold",
                abstract: "Hold a group while it moves: gateways refuse its requests (503, try again) until it is placed again.")
            @OptionGroup var database: DatabaseOption
            @Option(help: "The group (default: $KVSTORE_GROUP).") var group: String?

            func run() throws {
                let (url, group) = (try database.url(), try SyncCommand.Token.group(self.group))
                try blocking { try await SyncDirectory.place(group: group, in: nil, on: url) }
                print("held the group \(Directory.shown(group)): gateways refuse its requests within 5 s")
            }
        }

        struct List: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "list",
                abstract: "Each group the directory places, and where (one line each: GROUP NAME, or GROUP held).")
            @OptionGroup var database: DatabaseOption

            func run() throws {
                let url = try database.url()
                for (group, place) in try blocking({ try await SyncDirectory.list(on: url) }) {
                    print("\(Directory.shown(group)) \(place)")
                }
            }
        }
    }
}

// (``WithoutContainer``: kept here, beside the commands, as the backend's are.)
extension SyncCommand.Directory: WithoutContainer {
    static let withoutContainer = "the directory lives in the home database, not in a container"
}

extension SyncCommand.Directory.SetPlace: WithoutContainer {
    static let withoutContainer = SyncCommand.Directory.withoutContainer
}

extension SyncCommand.Directory.Hold: WithoutContainer {
    static let withoutContainer = SyncCommand.Directory.withoutContainer
}

extension SyncCommand.Directory.List: WithoutContainer {
    static let withoutContainer = SyncCommand.Directory.withoutContainer
}
#endif
