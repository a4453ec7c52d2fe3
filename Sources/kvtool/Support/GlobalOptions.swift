import ArgumentParser
import Foundation
import KVStore
import SyncKit

/// The options every subcommand accepts.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: "The containers' root directory (default: $KVSTORE_ROOT, $XDG_DATA_HOME/kvstore, ~/.local/share/kvstore).")
    var root: String?

    @Option(name: .long, help: "The App Group identifier, e.g. group.com.example.app (default: $KVSTORE_GROUP).")
    var group: String?

    @Flag(name: .long, help: "Print machine-readable JSON.")
    var json = false

    @Option(name: .long, help: "The author recorded for writes.")
    var author: String = "kvtool"

    /// The group identifier from `--group` or `$KVSTORE_GROUP`.
    func groupIdentifier() throws -> String {
        if let group { return group }
        if let group = ProcessInfo.processInfo.environment["KVSTORE_GROUP"], !group.isEmpty { return group }
        throw CLIError(.usage, "no App Group given: pass --group ID or set KVSTORE_GROUP")
    }

    /// Opens the container. Only a command asked to write something new (`create`: `defaults write`,
    /// `files put`, `load`) creates one, and if that command then fails, what it created is removed
    /// again (``CreatedPaths``): a mistyped `--group` leaves the root as it was.
    /// - Parameter clearStaleReaders: whether opening clears the reader slots of dead processes.
    func openContainer(readOnly: Bool, clearStaleReaders: Bool = true, create: Bool = false) throws -> SharedContainer {
        let group = try groupIdentifier()
        var options = SharedContainer.Options()
        options.readOnly = readOnly
        options.store.clearStaleReadersOnOpen = clearStaleReaders
        let layout = try ContainerLayout(groupIdentifier: group, root: root)
        if readOnly || !create {
            // Say "not found" rather than an I/O error when there is simply no container yet.
            guard FileManager.default.fileExists(atPath: layout.storeDataFile) else {
                throw CLIError(.notFound, "no container for \(layout.groupIdentifier.rawValue) at \(layout.path) (check --group and --root; `kvtool collections` lists a container's contents)")
            }
        } else {
            CreatedPaths.recordIfMissing(layout: layout)
        }
        let container = try SharedContainer(groupIdentifier: group, root: root, options: options)
        // Every write records history where it is enabled, and wakes the container's observers. History
        // is attached only where it exists: attaching creates its collections, and a command that fails
        // must leave the store exactly as it was.
        if !readOnly {
            if try container.store.catalogEntry(forCollection: History.entriesName) != nil {
                _ = try History.attach(to: container)
            } else {
                container.store.addObserver(CommitNotifier(notifier: ChangeNotifier(container: container)))
            }
        }
        return container
    }

    static let valued: Set<String> = ["--root", "--group", "--author"]
    static let flags: Set<String> = ["--json"]
    static let nested: [String: Set<String>] = ["defaults": ["read", "write", "delete", "domains"],
                                                "history": ["show", "purge", "enable", "disable", "consumers"],
                                                "snapshot": ["export", "list", "verify", "prune"],
                                                "files": ["ls", "cat", "put", "rm"],
                                                "bench": ["dashboard"],
                                                "demo": ["push-extension"],
                                                "sync": ["enable", "run", "status", "prune"]]

    /// Moves global options that precede the subcommand name to just after it (and its
    /// sub-subcommand), where swift-argument-parser looks for them.
    static func movingGlobalOptionsAfterSubcommand(_ arguments: [String]) -> [String] {
        var leading: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let name = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
            if flags.contains(argument) {
                leading.append(argument)
                index += 1
            } else if valued.contains(name) {
                leading.append(argument)
                if !argument.contains("="), index + 1 < arguments.count {
                    leading.append(arguments[index + 1])
                    index += 1
                }
                index += 1
            } else {
                break
            }
        }
        guard !leading.isEmpty, index < arguments.count else { return arguments }
        var rest = Array(arguments[index...])
        var pathLength = 1
        if let subs = nested[rest[0]], rest.count > 1, subs.contains(rest[1]) { pathLength = 2 }
        rest.insert(contentsOf: leading, at: pathLength)
        return rest
    }
}

/// What this kvtool process created (a container, or the root above it), removed again if the
/// command fails: "a failed command changes nothing" holds for a mistyped `--group` too.
enum CreatedPaths {
    nonisolated(unsafe) private static var paths: [String] = []

    /// Records the topmost directory of `layout` that does not exist yet (the root's first missing
    /// ancestor, or the container), before the open creates it.
    static func recordIfMissing(layout: ContainerLayout) {
        let manager = FileManager.default
        guard !manager.fileExists(atPath: layout.path) else { return }
        var topmost = layout.path
        var parent = (layout.root as NSString).standardizingPath
        while !parent.isEmpty, parent != "/", !manager.fileExists(atPath: parent) {
            topmost = parent
            parent = (parent as NSString).deletingLastPathComponent
        }
        paths.append(topmost)
    }

    /// Forgets the record: the command succeeded, or what it made must stay.
    static func keep() { paths.removeAll() }

    /// Removes what this process created (links inside are removed, never followed).
    static func removeAll() {
        for path in paths.reversed() { try? FileManager.default.removeItem(atPath: path) }
        paths.removeAll()
    }
}
