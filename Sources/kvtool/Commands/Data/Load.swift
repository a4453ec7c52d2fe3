import ArgumentParser
import Foundation
import KVStore
import SyncKit

/// `kvtool load`: restores a dump into a container, all or nothing.
struct Load: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load",
        abstract: "Restore a kvtool dump (JSON Lines, JSON or mdb format) into the container, all or nothing.",
        discussion: """
            The whole input is read and validated before anything is written: the header and its \
            catalog, every key (1 to \(Store.maxKeySize) bytes, decoding under its key encoding) and every value (CBOR, \
            or fixed(N) of N bytes), and, unless --replace, that the dump's catalog agrees with the \
            container's. Then it is applied in one write transaction. A bad dump changes nothing and \
            gets one error line naming the line at fault (exit 65).

            By default entries are merged: each is put, replacing an equal key. The history databases \
            and the other internal collections (_…, such as sync state) are skipped (a note says so; \
            --force merges the internal collections other than history). --replace empties each database the dump holds first, writes \
            the dump's catalog entries, and restores the history as it is in the dump. Puts and deletes \
            in collections and suites are recorded, so history-enabled ones record the load, except \
            when --replace restores the history itself: then the container becomes the dump exactly.

            Each entry line carries its key and value twice: readable (key, value) and raw (k, v). A \
            line where they disagree (a readable field edited by hand) is refused with its line \
            number; to load an edited line, delete its k and v, and the readable form is loaded. The \
            header's entry counts must match the lines, unless --partial: then a dump with lines \
            removed by hand loads, and the report says how many entries it held of those announced.

            Input caps: a line over 64 MiB (--max-line-bytes) or an input over 1 GiB (--max-input-bytes) \
            is rejected; both caps can be lowered, not raised. CSV dumps are not read.
            """)

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The dump file, or - for standard input.") var file: String = "-"
    @Flag(help: "Empty each database in the dump first, write its catalog entries, and restore the history.") var replace = false
    @Flag(name: .customLong("dry-run"), help: "Validate and report what would be loaded, without writing.") var dryRun = false
    @Flag(help: "Accept fewer entries than the header announces (a dump with lines removed by hand).") var partial = false
    @Flag(help: "Also merge the internal collections other than history (_sync…): hand-edited entries there can break sync.")
    var force = false
    @Option(name: .customLong("max-line-bytes"), help: "Reject a line longer than this (at most 67108864).")
    var maxLineBytes = DumpLimits.defaultMaxLineBytes
    @Option(name: .customLong("max-input-bytes"), help: "Reject an input larger than this (at most 1073741824).")
    var maxInputBytes = DumpLimits.defaultMaxInputBytes

    func validate() throws {
        guard (1...DumpLimits.defaultMaxLineBytes).contains(maxLineBytes) else {
            throw ValidationError("--max-line-bytes must be 1 to \(DumpLimits.defaultMaxLineBytes)")
        }
        guard (1...DumpLimits.defaultMaxInputBytes).contains(maxInputBytes) else {
            throw ValidationError("--max-input-bytes must be 1 to \(DumpLimits.defaultMaxInputBytes)")
        }
    }

    func run() throws {
        let group = try GroupIdentifier(try global.groupIdentifier())
        let limits = DumpLimits(maxLineBytes: maxLineBytes, maxInputBytes: maxInputBytes)
        if file == "-" && isatty(STDIN_FILENO) == 1 {
            throw CLIError(.usage, "load reads a dump: name the file (kvtool load FILE), or pipe one in (kvtool load - < FILE)")
        }
        let input = try readInput(limit: limits.maxInputBytes)
        var validating: ProgressBar?
        let document = try DumpReader.read(input, limits: limits, partial: partial) { done, total in
            let bar = validating ?? ProgressBar(total: total, label: "validating")
            validating = bar
            bar.advance(by: done - bar.done)
        }
        validating?.finish()
        let plan = LoadPlan(document: document, replace: replace, mergesInternal: force)
        try plan.checkDatabaseCount(group: group.rawValue, limit: Int(Store.Options().maxDatabases))

        // Check against the target before touching it: a container that does not exist yet is empty.
        let exists = FileManager.default.fileExists(atPath: try ContainerLayout(groupIdentifier: group, root: global.root).storeDataFile)
        var container: SharedContainer?
        if exists {
            var options = SharedContainer.Options()
            options.readOnly = dryRun
            let opened = try SharedContainer(groupIdentifier: group.rawValue, root: global.root, options: options)
            let handles = try plan.openTargetDatabases(opened.store)
            try opened.store.read { tx in try plan.check(against: tx, handles: handles) }
            container = opened
        } else {
            try plan.check(againstCatalog: [])
        }

        if dryRun {
            try report(plan, dryRun: true)
            return
        }
        let target = try container ?? global.openContainer(readOnly: false, create: true)
        // Every write records history where it is enabled, and wakes the container's observers.
        let history = try History.attach(to: target)
        let progress = ProgressBar(total: plan.entryCount, label: "loading")
        try target.store.write(author: global.author) { tx in
            // Databases new to the target are created in this transaction, so a failed load leaves none.
            let handles = try plan.openTargetDatabases(in: tx)
            try plan.check(against: tx, handles: handles)
            try plan.apply(in: tx, handles: handles, progress: progress)
        }
        progress.finish()
        if !plan.recordsMutations {
            // Nothing was recorded, so History posted nothing: wake the container's observers anyway.
            try? history.notifier?.post()
        }
        try report(plan, dryRun: false)
    }

    private func report(_ plan: LoadPlan, dryRun: Bool) throws {
        if plan.skippedEntries > 0 {
            Dump.note("skipped \(plan.skippedEntries) entries of internal collections (\(plan.skippedDatabases.joined(separator: ", "))): a merge does not load history or sync state; --replace restores a container whole, and --force merges sync state")
        }
        let announced = plan.document.header.databases.reduce(0) { $0 + $1.entries }
        let missing = announced - plan.document.entries.count
        if global.json {
            try Output.json(["entries": .integer(plan.entryCount), "databases": .integer(plan.databaseCount),
                             "skipped": .integer(plan.skippedEntries), "dryRun": .bool(dryRun), "replace": .bool(replace),
                             "format": .string(plan.document.format.rawValue), "announced": .integer(announced),
                             "missing": .integer(missing)])
        } else {
            let counts = "\(plan.entryCount) \(plan.entryCount == 1 ? "entry" : "entries") into \(plan.databaseCount) \(plan.databaseCount == 1 ? "database" : "databases")"
            let partialNote = missing > 0 ? " (--partial: the dump held \(plan.document.entries.count) of the \(announced) entries its header announces)" : ""
            print((dryRun ? "would load \(counts) (dry run: nothing written)" : "loaded \(counts)") + partialNote)
        }
    }

    /// The whole input, refused past `limit` bytes.
    private func readInput(limit: Int) throws -> [UInt8] {
        let handle: FileHandle
        if file == "-" {
            handle = FileHandle.standardInput
        } else {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory) else {
                throw CLIError(.notFound, "no such file: \(file)")
            }
            guard !isDirectory.boolValue, let opened = FileHandle(forReadingAtPath: file) else {
                throw CLIError(.failure, "cannot read \(file)")
            }
            handle = opened
        }
        var bytes: [UInt8] = []
        while true {
            let chunk: Data?
            do {
                chunk = try handle.read(upToCount: 1 << 20)
            } catch {
                throw CLIError(.failure, "cannot read \(file == "-" ? "standard input" : file): \(error.localizedDescription)")
            }
            guard let chunk, !chunk.isEmpty else { break }
            bytes.append(contentsOf: chunk)
            guard bytes.count <= limit else {
                throw CLIError(.badInput, "the input is over the \(limit)-byte limit of a dump")
            }
        }
        return bytes
    }
}

/// What a load does with a validated dump, and the checks that need the target.
struct LoadPlan {
    let document: DumpDocument
    let replace: Bool
    /// Whether a merge loads the internal collections other than history (`--force`).
    let mergesInternal: Bool

    init(document: DumpDocument, replace: Bool, mergesInternal: Bool = false) {
        self.document = document
        self.replace = replace
        self.mergesInternal = mergesInternal
    }

    /// Whether a database of the dump is left alone: in a merge, the history, and the other internal
    /// collections (and their indexes) unless `--force`.
    func skips(_ name: String) -> Bool {
        guard !replace, let role = document.roles[name] else { return false }
        return role.isHistory || (!mergesInternal && role.isInternal)
    }

    /// Whether puts and deletes are recorded as changes of their collection or suite, which history
    /// records where it is enabled: always, except when `--replace` restores the history itself from
    /// the dump. Then the restored history already describes the restored data, and recording the
    /// restore would append one entry per loaded key to it.
    var recordsMutations: Bool {
        !(replace && document.header.databases.contains { document.roles[$0.name]?.isHistory == true })
    }

    var loadedDatabases: [DumpDatabase] { document.header.databases.filter { !skips($0.name) } }
    var databaseCount: Int { loadedDatabases.count }
    var entryCount: Int { document.entries.count - skippedEntries }
    var skippedDatabases: [String] { document.header.databases.filter { skips($0.name) && $0.entries > 0 }.map(\.name) }
    var skippedEntries: Int { document.entries.filter { skips($0.database) }.count }

    /// Throws if loading would open more named databases than a process may (LMDB's `maxdbs`): the
    /// dump's, plus the catalog, the requirements, the container's suite and the history.
    func checkDatabaseCount(group: String, limit: Int) throws {
        let own = [DumpDatabaseRole.catalogDatabase, DumpDatabaseRole.requirementsDatabase, Catalog.defaultsDatabase(group)]
            + History.collectionNames.map(Catalog.collectionDatabase)
        let needed = Set(own + document.header.databases.map(\.name)).count
        guard needed <= limit else {
            throw DumpError.at(document.header.line, "the dump holds \(document.header.databases.count) databases; with the container's own that is \(needed), over the \(limit) named databases a store can open")
        }
    }

    /// Opens `_catalog` and every database of the dump that exists in the target (outside any
    /// transaction), for the checks before writing.
    func openTargetDatabases(_ store: Store) throws -> [String: RawDatabase] {
        var handles: [String: RawDatabase] = [:]
        for name in databaseNames {
            if let handle = try store.rawDatabase(named: name) { handles[name] = handle }
        }
        return handles
    }

    /// Opens `_catalog` and every database of the dump inside the load's transaction, creating those
    /// the target lacks.
    func openTargetDatabases(in tx: WriteTransaction) throws -> [String: RawDatabase] {
        var handles: [String: RawDatabase] = [:]
        for name in databaseNames {
            if let handle = try tx.rawDatabase(named: name, create: true) { handles[name] = handle }
        }
        return handles
    }

    private var databaseNames: [String] { [DumpDatabaseRole.catalogDatabase] + loadedDatabases.map(\.name) }

    /// Checks the dump against the target's catalog: in a merge, each collection and suite the
    /// target has must be described the same way.
    func check(againstCatalog target: [CatalogEntry]) throws {
        guard !replace else { return }
        try DumpCatalog.checkConsistent(document.header.catalog, lines: document.header.catalogLines, with: target)
    }

    /// Every check against the target as `tx` sees it: the catalog, and (in a merge) that no entry of
    /// a collection with indexes or derived collections would change an existing one, whose index
    /// and derived entries the dump cannot know to remove.
    func check(against tx: ReadTransaction, handles: [String: RawDatabase]) throws {
        let catalog = try Dump.catalog(in: tx, handles: handles)
        try check(againstCatalog: catalog)
        guard !replace else { return }
        let maintained = Set(catalog.filter { $0.kind == .collection && $0.hasMaintainedData }.map(\.database))
        for entry in document.entries where maintained.contains(entry.database) {
            guard let handle = handles[entry.database], let current = try tx.rawGet(handle, entry.key), current != entry.value else { continue }
            let encoding = document.roles[entry.database]?.keyEncoding()
            throw DumpError.at(entry.line, "merging would change the existing entry at key \(DumpError.describeKey(entry.key, encoding: encoding)) in '\(entry.database)', whose index or derived entries only the app maintains; use --replace")
        }
    }

    /// Writes the catalog entries and every entry, in `tx`.
    func apply(in tx: WriteTransaction, handles: [String: RawDatabase], progress: ProgressBar) throws {
        guard let catalogDatabase = handles[DumpDatabaseRole.catalogDatabase] else {
            throw CLIError(.failure, "the target has no catalog database")
        }
        for entry in document.header.catalog {
            let key = CatalogEntry.catalogKey(name: entry.name, kind: entry.kind)
            // A merge keeps the target's own entries (checked to agree); new ones are added.
            if !replace, try tx.rawGet(catalogDatabase, key) != nil { continue }
            try tx.rawPut(catalogDatabase, key, try CBOREncoder().encode(entry))
        }
        var byDatabase: [String: [DumpEntry]] = [:]
        for entry in document.entries { byDatabase[entry.database, default: []].append(entry) }
        for database in loadedDatabases {
            guard let handle = handles[database.name], let role = document.roles[database.name] else {
                throw CLIError(.failure, "cannot open the database '\(database.name)' in the target")
            }
            let entries = byDatabase[database.name] ?? []
            let target = recordsMutations ? role.target : nil
            if replace {
                if let target {
                    // Delete what the dump does not have one by one, so that history records it.
                    let keep = Set(entries.map(\.key))
                    var stale: [[UInt8]] = []
                    try tx.rawScan(handle) { key, _ in
                        let key = Array(key)
                        if !keep.contains(key) { stale.append(key) }
                        return true
                    }
                    for key in stale { try tx.rawDelete(handle, key, recordingAs: target) }
                } else {
                    try tx.rawClear(handle)
                }
            }
            for entry in entries {
                try tx.rawPut(handle, entry.key, entry.value, recordingAs: target)
                progress.advance()
            }
        }
    }
}
