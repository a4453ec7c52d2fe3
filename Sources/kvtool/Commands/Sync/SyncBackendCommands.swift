#if PostgreSQL
import ArgumentParser
import Foundation
import KVStore
import SyncKitPostgres

extension SyncCommand {
    /// `kvtool sync backend grant|revoke`: the groups an app backend's login reads and writes.
    struct Backend: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "backend",
            abstract: "As the database's owner: grant or revoke a backend login (sync setup --backend-login) a group.",
            subcommands: [Grant.self, Revoke.self])

        /// The login and the group that `grant` and `revoke` name.
        struct LoginAndGroup: ParsableArguments {
            @OptionGroup var database: DatabaseOption
            @Option(help: "The backend's login role.") var login: String
            @Option(help: "The group (default: $KVSTORE_GROUP).") var group: String?

            func resolved() throws -> (url: ServerURL, login: String, group: String) {
                (try database.url(), login, try SyncCommand.Token.group(group))
            }
        }

        struct Grant: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "grant",
                abstract: "Let a backend login read a group's state (the view kvsync_state_json) and write it (kvsync_server_put…).")
            @OptionGroup var grant: LoginAndGroup

            func run() throws {
                let (url, login, group) = try grant.resolved()
                try blocking { try await SyncBackend.grant(login: login, group: group, on: url) }
                print("granted \(login) the group \(Escaping.escape(group, quoting: false, shortForms: true, style: .swift))")
            }
        }

        struct Revoke: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "revoke",
                abstract: "Take a group back from a backend login: its next statement sees and writes nothing of it.")
            @OptionGroup var grant: LoginAndGroup

            func run() throws {
                let (url, login, group) = try grant.resolved()
                guard try blocking({ try await SyncBackend.revoke(login: login, group: group, on: url) }) else {
                    throw CLIError(.notFound, "\(login) was not granted that group")
                }
                print("revoked the group from \(login)")
            }
        }
    }

    /// `kvtool sync server put|get|delete`: server-authored writes, and reads, as a backend (or the owner).
    struct Server: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "server",
            abstract: "As an app backend (or the owner): read a key's server value as JSON, or write one that devices receive.",
            discussion: """
                Each write is a change in the log like a device's, by device server:AUTHOR, with a clock never behind the \
                group's newest; live devices receive it at once. --expected-version makes it conditional (0: the key has \
                no row). Exit 1 for a conflict (the key's version is another), 65 when a validator refused it (the reason \
                is printed).
                """,
            subcommands: [Put.self, Get.self, Delete.self])

        /// The key a command names.
        struct Target: ParsableArguments {
            @OptionGroup var database: DatabaseOption
            @Option(help: "The group (default: $KVSTORE_GROUP).") var group: String?
            @Option(help: "The collection.") var collection: String
            @Option(help: "The key (a String key, as a collection stores it: UTF-8 in normalization form C).") var key: String

            /// The key's bytes as a device's `KVCollection<String, _>` writes them.
            var keyBytes: [UInt8] {
                var bytes: [UInt8] = []
                key.encodeKey(into: &bytes, terminal: true)
                return bytes
            }
        }

        /// Options of a write.
        struct Write: ParsableArguments {
            @Option(help: "Written as device server:AUTHOR (letters, digits, . _ - @).") var author = "kvtool"
            @Option(name: .customLong("expected-version"), help: "Write only if the key's version is this (0: it has none).")
            var expectedVersion: Int64?
        }

        struct Put: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "put",
                abstract: "Write a value given as JSON (--json; encoded by the server to deterministic CBOR) or as CBOR bytes (--file).")
            @OptionGroup var target: Target
            @Option(name: .customLong("json"), help: "The value as JSON text (- reads standard input).") var value: String?
            @Option(help: "A file holding the value's CBOR bytes, written as they are.") var file: String?
            @OptionGroup var write: Write

            func validate() throws {
                if (value == nil) == (file == nil) { throw ValidationError("pass --json VALUE or --file FILE") }
            }

            func run() throws {
                let url = try target.database.url()
                let group = try SyncCommand.Token.group(target.group)
                let (name, key, author, expected) = (target.collection, target.keyBytes, write.author, write.expectedVersion)
                let result: SyncBackend.WriteResult
                if let value {
                    let text = try Output.readArgument(value)
                    _ = try JSONBridge.parse(Array(text.utf8))   // strict JSON (no duplicate member), with its column
                    result = try blocking {
                        try await SyncBackend.put(json: text, group: group, name: name, key: key, author: author, expectedVersion: expected, on: url)
                    }
                } else {
                    let bytes = try [UInt8](Output.readAll(FileHandle(forReadingFrom: URL(fileURLWithPath: file!)), limit: 16 << 20,
                                                           name: file!, what: "value"))
                    result = try blocking {
                        try await SyncBackend.put(bytes, group: group, name: name, key: key, author: author, expectedVersion: expected, on: url)
                    }
                }
                try Server.report(result)
            }
        }

        struct Delete: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "delete", abstract: "Delete a key: a tombstone devices receive.")
            @OptionGroup var target: Target
            @OptionGroup var write: Write

            func run() throws {
                let url = try target.database.url()
                let group = try SyncCommand.Token.group(target.group)
                let (name, key, author, expected) = (target.collection, target.keyBytes, write.author, write.expectedVersion)
                let result = try blocking {
                    try await SyncBackend.delete(group: group, name: name, key: key, author: author, expectedVersion: expected, on: url)
                }
                try Server.report(result)
            }
        }

        struct Get: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "get",
                abstract: "The key's value on the server as JSON (kvsync_cbor_to_jsonb), or with --json an object with its version, clock and device.")
            @OptionGroup var target: Target
            @Flag(help: "One JSON object: {\"version\",\"clock\",\"device\",\"value\"}.") var json = false

            func run() throws {
                let url = try target.database.url()
                let group = try SyncCommand.Token.group(target.group)
                let (name, key) = (target.collection, target.keyBytes)
                guard let row = try blocking({ try await SyncBackend.get(group: group, name: name, key: key, on: url) }), let value = row.json else {
                    throw CLIError(.notFound, "no value for that key on the server (or this login is not granted the group)")
                }
                guard json else { print(value); return }
                // The server's JSON text, as it gave it, after the row's own fields.
                let fields = try Output.line(["version": .integer(row.version), "clock": .integer(Int64(bitPattern: row.clock)), "device": .string(row.device)])
                print(fields.dropLast() + ",\"value\":" + value + "}")
            }
        }

        /// Prints what a write answered; a conflict or a rejection is an error with its exit code.
        static func report(_ result: SyncBackend.WriteResult) throws {
            switch result.outcome {
            case .applied:
                print("applied: version \(result.version ?? 0) by \(result.device ?? "?")")
            case .conflict:
                throw CLIError(.notFound, "conflict: the key's version is \(result.version.map(String.init) ?? "none (no row)"), not the expected one")
            case .rejected:
                throw CLIError(.badInput, "rejected by a validator: \(result.reason ?? "no reason given")")
            }
        }
    }
}

// (``WithoutContainer``: kept here, beside the commands, rather than in WithoutContainer+Commands.swift.)
extension SyncCommand.Backend: WithoutContainer {
    static let withoutContainer = "a backend's grants live in the database, not in a container"
}

extension SyncCommand.Backend.Grant: WithoutContainer {
    static let withoutContainer = SyncCommand.Backend.withoutContainer
}

extension SyncCommand.Backend.Revoke: WithoutContainer {
    static let withoutContainer = SyncCommand.Backend.withoutContainer
}

extension SyncCommand.Server: WithoutContainer {
    static let withoutContainer = "it reads and writes the server's values, not a container's"
}

extension SyncCommand.Server.Put: WithoutContainer {
    static let withoutContainer = SyncCommand.Server.withoutContainer
}

extension SyncCommand.Server.Get: WithoutContainer {
    static let withoutContainer = SyncCommand.Server.withoutContainer
}

extension SyncCommand.Server.Delete: WithoutContainer {
    static let withoutContainer = SyncCommand.Server.withoutContainer
}
#endif
