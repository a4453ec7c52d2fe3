import ArgumentParser
import Foundation
import KVStore

/// `kvtool repair`: the permission repairs a read-only command never makes.
struct Repair: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "repair",
        abstract: "Give the container's files and directories the modes of its sharing mode, and say what changed.",
        discussion: """
            Read-only commands (info, get, scan, check…) change nothing, permissions included: a mode \
            wider than the sharing mode's makes them refuse the container, naming this command. repair \
            opens the container for writing, which narrows (or widens, for a file the owner cannot \
            write) each mode it may change, and prints each change. Only the owner of a file (or root) \
            may change its mode; anything else is refused and named, as any open refuses it.
            """)

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let layout = try ContainerLayout(groupIdentifier: try global.groupIdentifier(), root: global.root)
        let paths = [layout.path] + ContainerLayout.directoryNames.map { layout.path + "/" + $0 }
            + [layout.storeDataFile, layout.store + "/lock.mdb"]
        let before = paths.map(Self.mode)
        _ = try global.openContainer(readOnly: false)
        var changes: [JSONValue] = []
        for (path, old) in zip(paths, before) {
            guard let old, let new = Self.mode(path), old != new else { continue }
            changes.append(["path": .string(path), "from": .string(FilePolicyText.octal(old)), "to": .string(FilePolicyText.octal(new))])
            if !global.json { print("\(path): mode \(FilePolicyText.octal(old)) -> \(FilePolicyText.octal(new))") }
        }
        if global.json {
            try Output.json(["changed": .array(changes)])
        } else if changes.isEmpty {
            print("nothing to repair: every mode is the sharing mode's")
        }
    }

    /// The permission bits (with setgid) of `path`, not following a link; `nil` if it is missing.
    static func mode(_ path: String) -> mode_t? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return st.st_mode & 0o7777
    }
}

enum FilePolicyText {
    static func octal(_ mode: mode_t) -> String { "0" + String(mode, radix: 8) }
}
