#if PostgreSQL
import ArgumentParser
import Foundation
import KVStore
import SyncKitPostgres

extension SyncCommand {
    /// `kvtool sync blobs ls|gc` (the files' bytes the server keeps, as the database's owner) and
    /// `fetch|verify` (one blob of the container's group, and the container's own copies) (issue 49).
    struct Blobs: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "blobs",
            abstract: "The files' bytes: list and collect the server's (as the database's owner), fetch one of the group's, verify the container's copies.",
            subcommands: [List.self, Collect.self, Fetch.self, Verify.self])

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

        struct Fetch: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "fetch",
                abstract: "Download one file's bytes of the container's group, by SHA-256 or by the path its manifest row names, into --out.",
                discussion: """
                    Through the server the container syncs with (--server, $KVSTORE_SYNC_SERVER, or the registered \
                    agent's): the database directly, or a gateway with the device's credential. The server answers only \
                    for a complete blob that a current manifest row of the group names (another group's hash answers \
                    as an unknown one: exit 1). The bytes go to a new temporary file next to --out, are hashed as they \
                    arrive, and are renamed onto --out only when they hash to the SHA-256 asked for: --out is never \
                    left half-written. Nothing in the container changes.
                    """)
            @OptionGroup var global: GlobalOptions
            @Argument(help: "The blob's SHA-256 (64 lower-case hex digits), or a path relative to Files/ that the manifest names.")
            var blob: String
            @Option(help: "The file to write (replaced whole, by rename).") var out: String
            @OptionGroup var server: SyncCommand.ServerOption

            func run() throws {
                let container = try global.openContainer(readOnly: true)
                let endpoint = try server.endpoint(orRegisteredIn: container)
                let sha256: [UInt8]
                if blob.utf8.count == 64, blob.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }), let bytes = Hex.decode(Array(blob.utf8)) {
                    sha256 = bytes
                } else if let entry = try container.files.manifestEntry(for: blob) {
                    sha256 = Array(entry.sha256)
                } else {
                    throw CLIError(.notFound, "\(blob) is neither a SHA-256 (64 lower-case hex digits) nor a path the files manifest names")
                }
                let (out, group) = (self.out, container.groupIdentifier.rawValue)
                let size: Int64
                do {
                    size = try blocking {
                        let sink = try DumpSink(path: out)
                        do {
                            let size = try await FileTransfers.fetch(sha256: sha256, group: group, from: endpoint) { try sink.write($0) }
                            try sink.finish()
                            return size
                        } catch {
                            sink.abandon()
                            throw error
                        }
                    }
                } catch FileTransferError.notOnServer {
                    throw CLIError(.notFound, "the server has no complete copy of \(Hex.encode(sha256)) that a manifest row of \(group) names; --out was not written")
                } catch FileTransferError.downloadMismatch(_, let reason) {
                    throw CLIError(.failure, "the server's copy of \(Hex.encode(sha256)) was refused (\(reason)); --out was not written")
                }
                if global.json {
                    try Output.json(["sha256": .string(Hex.encode(sha256)), "size": .integer(size), "out": .string(out)])
                } else {
                    print("\(Hex.encode(sha256))\t\(size)\t\(out)")
                }
            }
        }

        struct Verify: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "verify",
                abstract: "Re-hash the container's copies of its files' bytes (Blobs/) and the files of the manifest that are here; exit 1 on a mismatch.",
                discussion: """
                    Each copy in Blobs/ must hash to its name, each file of the manifest at its path to the SHA-256 and \
                    size its row names, and a path recorded present must be there. One line per problem on standard \
                    output, then exit 1; "verified N copies and M files" and exit 0 when there is none. Reads only: \
                    nothing is repaired (a sync round or a read fetches the bytes again).
                    """)
            @OptionGroup var global: GlobalOptions

            func run() throws {
                let container = try global.openContainer(readOnly: true)
                let report = try container.files.verifyLocalCopies()
                if global.json {
                    try Output.json(["copies": .integer(report.copies), "files": .integer(report.files),
                                     "problems": .array(report.problems.map { ["file": .string($0.file), "reason": .string($0.reason)] })])
                } else if report.problems.isEmpty {
                    print("verified \(report.copies) cop\(report.copies == 1 ? "y" : "ies") and \(report.files) file\(report.files == 1 ? "" : "s")")
                } else {
                    for problem in report.problems { print(problem.description) }
                }
                if !report.problems.isEmpty {
                    throw CLIError(.notFound, "\(report.problems.count) problem\(report.problems.count == 1 ? "" : "s") with the container's files' bytes")
                }
            }
        }
    }
}
#endif
