#if PostgreSQL
import ArgumentParser
import Foundation
import KVStore
import SyncKitPostgres

extension SyncCommand {
    /// `kvtool sync blobs ls|gc`: the files' bytes the server keeps (issue 49), as the database's owner.
    struct Blobs: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "blobs",
            abstract: "The files' bytes the server keeps, per group (as the database's owner): list them, collect those no one needs.",
            subcommands: [List.self, Collect.self])

        /// `HASH  SIZE  STATE  GROUP`, one blob a line.
        static func line(group: String, hash: String, size: Int64, state: String) -> String {
            "\(hash)\t\(size)\t\(state)\t\(Escaping.escape(group, quoting: false, shortForms: true, style: .swift))"
        }

        struct List: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "ls",
                abstract: "The blobs (hash, size, state, group): complete and referenced by a manifest row, complete and unreferenced, or an upload and how far it is.")
            @OptionGroup var database: DatabaseOption
            @Option(help: "Only this group's (default: $KVSTORE_GROUP; every group's when neither is given).") var group: String?
            @Flag(help: "One JSON array.") var json = false

            func run() throws {
                let url = try database.url()
                let group = SyncCommand.given(self.group, orEnvironment: "KVSTORE_GROUP")
                let blobs = try blocking { try await SyncServerBlobs.list(on: url, group: group) }
                if json {
                    print(try Output.line(.array(blobs.map { blob in
                        [
                            "group": .string(blob.group), "hash": .string(blob.hash.hex), "size": .integer(blob.status.size),
                            "received": .integer(blob.status.received), "complete": .bool(blob.status.complete),
                            "referenced": .bool(blob.referenced),
                        ]
                    })))
                    return
                }
                if blobs.isEmpty { print("no blobs") }
                for blob in blobs {
                    let state = blob.status.complete ? (blob.referenced ? "referenced" : "unreferenced")
                                                     : "uploading \(blob.status.received)/\(blob.status.size)"
                    print(Blobs.line(group: blob.group, hash: blob.hash.hex, size: blob.status.size, state: state))
                }
            }
        }

        struct Collect: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "gc",
                abstract: "Remove the blobs no one needs, in every group: uploads untouched for a day, complete blobs no manifest row names for a week.",
                discussion: """
                    A complete blob is kept while a current manifest row of its group names it, and for \
                    --unreferenced-grace after it was completed or last named by a push; an upload in flight, for \
                    --uploading-grace after its last chunk. --dry-run lists exactly what a run would remove, and removes nothing.
                    """)
            @OptionGroup var database: DatabaseOption
            @Flag(name: .customLong("dry-run"), help: "List what would be removed; remove nothing.") var dryRun = false
            @Option(name: .customLong("uploading-grace"),
                    help: "Seconds an upload may go untouched (default: \(SyncServerBlobs.defaultUploadingGrace.components.seconds), a day).")
            var uploadingGrace: Double?
            @Option(name: .customLong("unreferenced-grace"),
                    help: "Seconds an unreferenced blob is kept (default: \(SyncServerBlobs.defaultUnreferencedGrace.components.seconds), a week).")
            var unreferencedGrace: Double?
            @Flag(help: "One JSON array.") var json = false

            func validate() throws {
                for (name, seconds) in [("--uploading-grace", uploadingGrace), ("--unreferenced-grace", unreferencedGrace)] {
                    guard let seconds else { continue }
                    guard seconds >= 0 && seconds <= 3_153_600_000 else { throw ValidationError("\(name) must be from 0 to 3153600000 seconds") }
                }
            }

            func run() throws {
                let url = try database.url()
                let uploading = uploadingGrace.map { Duration.milliseconds(Int64($0 * 1000)) } ?? SyncServerBlobs.defaultUploadingGrace
                let unreferenced = unreferencedGrace.map { Duration.milliseconds(Int64($0 * 1000)) } ?? SyncServerBlobs.defaultUnreferencedGrace
                let dryRun = dryRun
                let collected = try blocking {
                    try await SyncServerBlobs.collect(on: url, uploadingGrace: uploading, unreferencedGrace: unreferenced, dryRun: dryRun)
                }
                if json {
                    print(try Output.line(.array(collected.map { blob in
                        ["group": .string(blob.group), "hash": .string(blob.hash.hex), "size": .integer(blob.size), "complete": .bool(blob.complete)]
                    })))
                    return
                }
                for blob in collected {
                    print(Blobs.line(group: blob.group, hash: blob.hash.hex, size: blob.size, state: blob.complete ? "unreferenced" : "upload"))
                }
                let bytes = collected.reduce(Int64(0)) { $0 + $1.size }
                print("\(dryRun ? "would remove" : "removed") \(collected.count) blob\(collected.count == 1 ? "" : "s"), \(bytes) bytes")
            }
        }
    }
}
#endif
