import ArgumentParser
import Foundation
import KVStore
import SyncKit

/// `kvtool snapshot export|list|verify|prune`: published snapshots of the store in `Snapshots/`.
struct Snapshot: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "snapshot",
        abstract: "Export, list, verify and prune the container's published snapshots.",
        discussion: """
            A snapshot is a consistent, compacted copy of the store taken in one read transaction and \
            published atomically as Snapshots/snapshot-<generation>.mdb, listed with its source \
            transaction ID, size and SHA-256 in Snapshots/manifest.json.
            """,
        subcommands: [Export.self, List.self, Verify.self, Prune.self])

    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "export",
            abstract: "Publish a snapshot of the store as the next generation.")
        @OptionGroup var global: GlobalOptions

        func run() throws {
            try Snapshot.mappingErrors {
                let container = try global.openContainer(readOnly: true)
                let snapshots = try Snapshots(container: container)
                let entry = try snapshots.export(from: container.store)
                if global.json {
                    var object = Snapshot.json(entry)
                    object["path"] = .string(snapshots.path(of: entry))
                    try Output.json(object)
                } else {
                    print("exported \(entry.file): generation \(entry.generation), source txn \(entry.sourceTransactionID), \(entry.size) bytes, sha256 \(entry.sha256)")
                }
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the published snapshots, oldest first.")
        @OptionGroup var global: GlobalOptions

        func run() throws {
            try Snapshot.mappingErrors {
                let entries = try Snapshot.snapshots(global).list()
                if global.json {
                    try Output.json(.array(entries.map(Snapshot.json)))
                    return
                }
                Output.table(["GENERATION", "FILE", "SOURCE TXN", "SIZE", "CREATED", "SHA256"], entries.map {
                    [String($0.generation), $0.file, String($0.sourceTransactionID), String($0.size),
                     Snapshot.timestamp($0.createdAt), $0.sha256]
                })
            }
        }
    }

    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract: "Recompute every snapshot's size and SHA-256 and compare them with the manifest.",
            discussion: "Prints one line per problem and exits 74 if there is any.")
        @OptionGroup var global: GlobalOptions

        func run() throws {
            try Snapshot.mappingErrors {
                let result = try Snapshot.snapshots(global).verify()
                if global.json {
                    try Output.json([
                        "ok": .bool(result.isValid),
                        "checked": .integer(result.checked.count),
                        "problems": .array(result.problems.map { problem in
                            var object: JSONValue = ["file": .string(problem.file), "kind": .string(problem.kindName),
                                                     "message": .string(problem.description)]
                            if let generation = problem.generation { object["generation"] = .integer(generation) }
                            return object
                        }),
                    ])
                } else if result.isValid {
                    print("ok: \(result.checked.count) snapshot\(result.checked.count == 1 ? "" : "s") verified")
                } else {
                    for problem in result.problems { print(problem) }
                }
                if !result.isValid {
                    let count = result.problems.count
                    throw CLIError(.failure, "\(count) problem\(count == 1 ? "" : "s") in the snapshots of \(try global.groupIdentifier())")
                }
            }
        }
    }

    struct Prune: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "prune",
            abstract: "Keep the N newest snapshots and remove the others, with their manifest entries.")
        @OptionGroup var global: GlobalOptions
        @Option(parsing: .unconditional, help: "How many of the newest snapshots to keep (0 or more).") var keep: Int

        func validate() throws {
            guard keep >= 0 else { throw ValidationError("--keep must be 0 or more, got \(keep)") }
        }

        func run() throws {
            try Snapshot.mappingErrors {
                let result = try Snapshot.snapshots(global).prune(keep: keep)
                if global.json {
                    try Output.json([
                        "removed": .array(result.removed.map { .string($0.file) }), "kept": .array(result.kept.map { .string($0.file) }),
                        "removedUnlisted": .array(result.removedUnlisted.map(JSONValue.string)),
                        "removedTemporaryFiles": .array(result.removedTemporaryFiles.map(JSONValue.string)),
                    ])
                    return
                }
                for file in result.removed.map(\.file) + result.removedUnlisted + result.removedTemporaryFiles {
                    print("removed \(file)")
                }
                print("kept \(result.kept.count) snapshot\(result.kept.count == 1 ? "" : "s")")
            }
        }
    }

    // MARK: - Shared

    /// The container's snapshots, without opening its store; "not found" if there is no container.
    static func snapshots(_ global: GlobalOptions) throws -> Snapshots {
        let layout = try ContainerLayout(groupIdentifier: try global.groupIdentifier(), root: global.root)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: layout.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw CLIError(.notFound, "no container for \(layout.groupIdentifier.rawValue) at \(layout.path)")
        }
        return try Snapshots(directory: layout.snapshots, create: false)
    }

    static func json(_ entry: SnapshotEntry) -> JSONValue {
        ["generation": .integer(entry.generation), "file": .string(entry.file), "sourceTransactionID": .integer(entry.sourceTransactionID),
         "createdAt": .string(timestamp(entry.createdAt)), "size": .integer(entry.size), "sha256": .string(entry.sha256)]
    }

    static func timestamp(_ date: Date) -> String {
        date.formatted(.iso8601)
    }

    /// Runs `body`, turning snapshot errors into `kvtool`'s one-line errors with their exit codes.
    @discardableResult
    static func mappingErrors<R>(_ body: () throws -> R) throws -> R {
        do {
            return try body()
        } catch let error as SnapshotError {
            throw CLIError(mapping: error) ?? CLIError(.failure, error.description)
        }
    }
}
