import ArgumentParser
import Foundation
import KVStore

/// `kvtool compact <destination>`: a compacted copy of the store, published atomically.
struct Compact: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compact",
        abstract: "Write a compacted copy of the store to a new file, published atomically.",
        discussion: """
            The copy is one LMDB file (open it with mdb_stat -n, mdb_dump -n, or Store(copyFile:)) \
            holding every named database as one read transaction saw it, with no free pages: what \
            mdb_copy -c -n writes, but the copy also reports the source transaction ID. It is written \
            to a temporary file next to the destination, fsynced, then linked into place (or renamed \
            over it with --force) and the directory fsynced: the destination is never a partial file. \
            Writers and readers of the store are not blocked meanwhile.
            """)

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The file to create (its directory must exist).") var destination: String
    @Flag(help: "Replace the destination if it exists.") var force = false

    func run() throws {
        guard !destination.isEmpty, !destination.utf8.contains(0) else {
            throw CLIError(.usage, "the destination path is empty or contains NUL")
        }
        let url = URL(fileURLWithPath: destination)
        let directory = url.deletingLastPathComponent().path
        let name = url.lastPathComponent
        guard !name.isEmpty, name != ".", name != "..", !destination.hasSuffix("/") else {
            throw CLIError(.badInput, "the destination \(destination) is a directory; name the file to create")
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw CLIError(.notFound, "the destination's directory \(directory) does not exist")
        }
        let container = try global.openContainer(readOnly: true)
        let before = try container.store.environmentInfo()
        let progress = ProgressBar(total: try container.store.catalogWithCounts().reduce(0) { $0 + $1.count }, label: "compact")
        defer { progress.finish() }
        let result: Store.CopyResult
        do {
            let target = try SharedFiles(directory: directory)
            let temporary = TemporaryFileName.make(for: name)
            result = try target.publish(to: name, temporaryName: temporary, replacing: force) { fd, path in
                try container.store.copy(intoEmptyFile: fd, at: path) { progress.update($0) }
            }
        } catch KVStoreError.io(_, _, let code) where code == EEXIST {
            throw CLIError(.badInput, "\(destination) exists; pass --force to replace it")
        }
        progress.update(result.entries)
        let sourceSize = before.usedPages * before.pageSize
        if global.json {
            try Output.json(["path": .string(url.path), "sourceTransactionID": .integer(result.sourceTransactionID),
                             "databases": .integer(result.databases), "entries": .integer(result.entries), "size": .integer(result.size),
                             "sourceSize": .integer(sourceSize)])
        } else {
            print("compacted \(result.entries) entries in \(result.databases) databases (source txn \(result.sourceTransactionID)) into \(url.path): \(result.size) bytes, from \(sourceSize) used in the store")
        }
    }
}
