import ArgumentParser
import Foundation
import KVStore

/// `kvtool files ls|cat|put|rm`: the container's shared `Files/` area, with the library's path safety.
struct Files: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "files",
        abstract: "List, print, write and remove files in the container's shared Files/ area.",
        discussion: """
            Paths are relative to Files/ and checked as SharedFiles checks them: no absolute path, no \
            '.' or '..' component, no NUL, control character or backslash, no component that Unicode \
            normalisation (NFKC) turns into one of those, and no symbolic link is ever followed. put replaces \
            a file atomically (temporary file, fsync, rename, fsync of the directory).
            """,
        subcommands: [List.self, Cat.self, Put.self, Remove.self, Status.self])

    /// Files larger than this are refused by `cat` and `put`.
    static let sizeLimit = 64 << 20

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "ls", abstract: "List a directory of Files/ (default: its top).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "A directory relative to Files/.") var directory: String = ""
        @Flag(name: [.short, .long], help: "List every file below the directory.") var recursive = false

        func run() throws {
            let files = try global.openContainer(readOnly: true).files
            if recursive {
                let paths = try files.list(directory, recursive: true)
                if global.json { try Output.json(.array(paths.map(JSONValue.string))) } else { paths.forEach { print($0) } }
                return
            }
            let entries = try files.entries(in: directory)
            if global.json {
                try Output.json(.array(entries.map {
                    ["name": .string($0.name), "path": .string($0.path), "kind": .string(Files.kindName($0.kind)),
                     "size": .integer($0.size), "modified": .string(Snapshot.timestamp($0.modificationDate))]
                }))
                return
            }
            Output.table(["KIND", "SIZE", "MODIFIED", "NAME"], entries.map {
                [Files.kindName($0.kind), String($0.size), Snapshot.timestamp($0.modificationDate),
                 $0.name + ($0.kind == .directory ? "/" : "")]
            })
        }
    }

    struct Cat: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "cat", abstract: "Write a file's bytes to standard output.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "A file relative to Files/.") var path: String

        func run() throws {
            let data: Data
            do {
                data = try global.openContainer(readOnly: true).files.read(path, maxSize: Files.sizeLimit)
            } catch KVStoreError.io(_, _, EISDIR) {
                // The same fault as `files put`'s source being a directory, with the same status.
                throw CLIError(.badInput, "Files/\(path) is a directory, not a file (kvtool files ls \(path) lists it)")
            }
            FileHandle.standardOutput.write(data)
        }
    }

    struct Put: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "put",
            abstract: "Atomically write a file from a local file, or from standard input with -.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The destination, relative to Files/.") var path: String
        @Argument(help: "A local file to copy, or - for standard input.") var source: String

        func run() throws {
            // Check the destination before reading anything, so a bad path costs nothing.
            _ = try SharedFiles.validate(path)
            let data: Data
            if source == "-" {
                data = try Output.readAll(FileHandle.standardInput, limit: Files.sizeLimit, name: "standard input", what: "file")
            } else {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: source, isDirectory: &isDirectory) else {
                    throw CLIError(.notFound, "no file at \(source)")
                }
                guard !isDirectory.boolValue else { throw CLIError(.badInput, "\(source) is a directory, not a file") }
                guard let handle = FileHandle(forReadingAtPath: source) else {
                    throw CLIError(.failure, "cannot open \(source) for reading")
                }
                defer { try? handle.close() }
                data = try Output.readAll(handle, limit: Files.sizeLimit, name: source, what: "file")
            }
            let files = try global.openContainer(readOnly: false, create: true).files
            try files.write(data, to: path)
            if global.json { try Output.json(["path": .string(path), "size": .integer(data.count)]) }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "rm", abstract: "Remove a file, a symbolic link or an empty directory.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The path, relative to Files/.") var path: String

        func run() throws {
            try global.openContainer(readOnly: false).files.remove(path)
            if global.json { try Output.json(["path": .string(path), "removed": true]) }
        }
    }

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "Where each replicated file stands on this device: present, downloading, missing, waiting to upload.",
            discussion: """
                One line per row of the files manifest (the files under the prefixes declared with \
                Replication.files): its state here, size, the first 12 hex digits of its SHA-256, media \
                type and path, and why its last transfer stopped, if it did. present: the bytes the \
                manifest names are on this device; downloading: they are being fetched; missing: they are \
                not here (a read answers notYetDownloaded); waiting_to_upload: written here, not yet \
                complete on the server. Nothing is printed for a container that replicates no file.
                """)
        @OptionGroup var global: GlobalOptions

        func run() throws {
            let rows = try global.openContainer(readOnly: true).files.fileStatus()
            if global.json {
                try Output.json(.array(rows.map { row in
                    var object: JSONValue = [
                        "path": .string(row.path), "state": .string(row.state.rawValue), "size": .integer(row.entry.size),
                        "sha256": .string(Hex.encode(Array(row.entry.sha256))), "type": .string(row.entry.type),
                    ]
                    if let problem = row.problem { object["problem"] = .string(problem) }
                    return object
                }))
                return
            }
            Output.table(["STATE", "SIZE", "SHA256", "TYPE", "PATH", "PROBLEM"], rows.map {
                [$0.state.rawValue, String($0.entry.size), String(Hex.encode(Array($0.entry.sha256)).prefix(12)), $0.entry.type, $0.path, $0.problem ?? ""]
            })
        }
    }

    static func kindName(_ kind: SharedFiles.DirectoryEntry.Kind) -> String {
        switch kind {
        case .file: "file"
        case .directory: "dir"
        case .symbolicLink: "symlink"
        case .other: "other"
        }
    }
}
