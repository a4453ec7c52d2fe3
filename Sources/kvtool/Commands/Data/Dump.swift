import ArgumentParser
import Foundation
import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// `kvtool dump`: a consistent dump of the container, or of some collections and suites.
struct Dump: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dump",
        abstract: "Write a consistent dump of the container, or of some collections and suites.",
        discussion: """
            Everything is read in one read transaction. Without --collection or --suite, the dump holds \
            every named database (the catalog in the header; each collection, index and defaults suite, \
            _requirements and the history). A --collection brings its index databases and derived \
            collections along, and what is derived from those (the month aggregates of its summaries).

            Formats (--format):
              jsonl  the default: a header line with the catalog, then one JSON line per
                     entry, {"db":…,"key":…,"value":…,"k":"<hex key>","v":"<base64 value>"}
              json   one JSON object, {"header":{…},"entries":[…]}, an entry a line
              csv    one --collection: a key column, one column per top-level field
              mdb    what mdb_dump -a prints, byte for byte, for mdb_load

            kvtool load reads jsonl, json and mdb dumps back.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case jsonl, json, csv, mdb
    }

    @OptionGroup var global: GlobalOptions
    @Option(help: "The output format (see above).") var format: Format = .jsonl
    @Option(name: .customLong("collection"), help: "Dump only this collection (repeatable).") var collections: [String] = []
    @Option(name: .customLong("suite"), help: "Dump only this defaults suite (repeatable).") var suites: [String] = []
    @Option(name: [.short, .long], help: "Write to this file (replaced atomically) instead of standard output.") var output: String?

    func validate() throws {
        if format == .csv && (collections.count != 1 || !suites.isEmpty) {
            throw ValidationError("--format csv dumps exactly one --collection")
        }
    }

    func run() throws {
        let container = try global.openContainer(readOnly: true)
        let store = container.store
        let sink = try DumpSink(path: output)
        do {
            try dump(store, group: container.groupIdentifier.rawValue, to: sink)
            try sink.finish()
        } catch {
            sink.abandon()
            throw error
        }
    }

    /// Opens every database, then reads them all in one transaction. If a database was created by
    /// another process between the two, the transaction is missing its handle: try again.
    private func dump(_ store: Store, group: String, to sink: DumpSink) throws {
        for attempt in 1...3 {
            let handles = Dictionary(try store.rawDatabases().map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
            let env = try store.environmentInfo()
            let figures = MDBHeaderFigures(
                mapSize: store.recordedMapSize ?? env.mapSize,
                maxReaders: env.maxReaders, pageSize: env.pageSize)
            let complete = try store.read { tx -> Bool in
                let catalog = try Self.catalog(in: tx, handles: handles)
                // Collections' databases exist from the moment they are declared; one missing here was
                // created after the handles were opened.
                let missing = catalog.filter { $0.kind == .collection }
                    .flatMap { [$0.database] + $0.indexes.map(\.database) }
                    .contains { handles[$0] == nil }
                if missing && attempt < 3 { return false }
                try write(tx, catalog: catalog, handles: handles, group: group, figures: figures, to: sink)
                return true
            }
            if complete { return }
        }
    }

    /// The catalog as `tx` sees it, read through the `_catalog` handle (`dump` and `load` read it in
    /// the transaction they work in, so that it matches the entries).
    static func catalog(in tx: ReadTransaction, handles: [String: RawDatabase]) throws -> [CatalogEntry] {
        guard let database = handles[DumpDatabaseRole.catalogDatabase] else { return [] }
        var entries: [CatalogEntry] = []
        try tx.rawScan(database) { key, value in
            do {
                // Validated as every reader of the catalog validates it (a hostile entry may point a
                // collection at `_catalog` itself), so that a dump never carries such an entry on.
                entries.append(try CatalogEntry.decode(value, key: key))
            } catch {
                throw CLIError(.failure, "the catalog entry \(String(decoding: key, as: UTF8.self)) does not decode: \(error)")
            }
            return true
        }
        return entries
    }

    /// The catalog entries and databases to dump, in LMDB's order.
    private func selection(_ catalog: [CatalogEntry], handles: [String: RawDatabase]) throws -> (catalog: [CatalogEntry], databases: [String]) {
        if collections.isEmpty && suites.isEmpty {
            let names = handles.keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
            return (catalog, format == .mdb ? names : names.filter { $0 != DumpDatabaseRole.catalogDatabase })
        }
        var chosen: [CatalogEntry] = []
        // A collection brings what is derived from it, and what is derived from that (a record's
        // summaries, then the summaries' month aggregates).
        func add(_ entry: CatalogEntry) {
            guard !chosen.contains(entry) else { return }
            chosen.append(entry)
            guard entry.kind == .collection else { return }
            for derived in entry.derived {
                if let target = catalog.first(where: { $0.kind == .collection && $0.name == derived }) { add(target) }
            }
        }
        for name in collections {
            guard let entry = catalog.first(where: { $0.kind == .collection && $0.name == name }) else {
                throw CLIError(.notFound, "no collection named '\(name)'")
            }
            add(entry)
        }
        for name in suites {
            guard let entry = catalog.first(where: { $0.kind == .defaults && $0.name == name }) else {
                throw CLIError(.notFound, "no defaults suite named '\(name)'")
            }
            add(entry)
        }
        chosen.sort { ($0.kind == .defaults ? "d/" : "c/") + $0.name < ($1.kind == .defaults ? "d/" : "c/") + $1.name }
        var names = chosen.flatMap { [$0.database] + $0.indexes.map(\.database) }.filter { handles[$0] != nil }
        if format == .mdb { names.append(DumpDatabaseRole.catalogDatabase) }
        names.sort { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        return (chosen, names)
    }

    private func write(_ tx: ReadTransaction, catalog: [CatalogEntry], handles: [String: RawDatabase], group: String,
                       figures: MDBHeaderFigures, to sink: DumpSink) throws {
        let (chosen, names) = try selection(catalog, handles: handles)
        let roles = DumpDatabaseRole.roles(for: catalog)
        var databases: [(DumpDatabase, RawDatabase, RawDatabaseStat)] = []
        for name in names {
            guard let handle = handles[name] else { continue }
            let stat = try tx.rawStat(handle)
            databases.append((DumpDatabase(name: name, entries: stat.entries), handle, stat))
        }
        let progress = ProgressBar(total: databases.reduce(0) { $0 + $1.0.entries }, label: "dumping")
        defer { progress.finish() }

        switch format {
        case .jsonl, .json:
            var header = DumpHeader()
            header.group = group
            header.sourceTransactionID = tx.transactionID
            header.catalog = chosen
            header.databases = databases.map(\.0)
            let headerText = try DumpJSON.headerText(header)
            try sink.write(format == .json ? "{\"header\":\(headerText),\"entries\":[\n" : headerText + "\n")
            var first = true
            var line = 1
            for (database, handle, _) in databases {
                let role = roles[database.name]
                try tx.rawScan(handle) { key, value in
                    line += 1
                    try Self.checkSize(key: key, value: value, role: role, database: database.name)
                    let (keyJSON, valueJSON) = Self.render(key: Array(key), value: Array(value), role: role, database: database.name, line: line)
                    let text = try DumpJSON.entryText(database: database.name, key: keyJSON, value: valueJSON, key: Array(key), value: Array(value))
                    if format == .json {
                        try sink.write((first ? "" : ",\n") + text)
                    } else {
                        try sink.write(text + "\n")
                    }
                    first = false
                    progress.advance()
                    return true
                }
            }
            if format == .json { try sink.write((first ? "" : "\n") + "]}\n") }
        case .mdb:
            let catalogKeys = Set(chosen.map { CatalogEntry.catalogKey(name: $0.name, kind: $0.kind) })
            let everything = collections.isEmpty && suites.isEmpty
            for (database, handle, stat) in databases {
                let onlyChosen = !everything && database.name == DumpDatabaseRole.catalogDatabase
                try sink.write(DumpMDB.sectionHeader(database: database.name, flags: stat.flags, figures: figures))
                var buffer: [UInt8] = []
                try tx.rawScan(handle) { key, value in
                    progress.advance()
                    if onlyChosen && !catalogKeys.contains(Array(key)) { return true }
                    try Self.checkSize(key: key, value: value, role: roles[database.name], database: database.name)
                    DumpMDB.dataLine(key, into: &buffer)
                    DumpMDB.dataLine(value, into: &buffer)
                    if buffer.count >= 1 << 20 {
                        try sink.write(buffer)
                        buffer.removeAll(keepingCapacity: true)
                    }
                    return true
                }
                try sink.write(buffer)
                try sink.write(DumpMDB.sectionEnd)
            }
        case .csv:
            // The collection asked for, not what it brought along (its derived collections).
            guard let entry = chosen.first(where: { $0.kind == .collection && $0.name == collections.first }),
                  let handle = handles[entry.database] else { return }
            guard entry.valueEncoding == .cbor else {
                throw CLIError(.badInput, "--format csv needs cbor values; collection '\(entry.name)' stores \(entry.valueEncoding)")
            }
            var builder = DumpCSV.Builder()
            try tx.rawScan(handle) { key, value in
                let keyText = (try? ValueText.renderKey(Array(key), entry: entry)) ?? "0x" + Hex.encode(Array(key))
                var decoded: CBORValue?
                do {
                    decoded = try CBORValue.decode(value)
                } catch {
                    Self.note("the value at key \(keyText) in '\(entry.database)' is not valid CBOR (\(error)); its fields are left empty")
                }
                builder.add(key: keyText, value: decoded)
                progress.advance()
                return true
            }
            try sink.write(try builder.render())
        }
    }

    /// The largest value a dump holds: what reading refuses (``CBORLimits/maxInputSize``,
    /// ``RawBytesCodec/maxSize``), which also keeps every line within what `kvtool load` reads
    /// (``DumpLimits/defaultMaxLineBytes``, in hex or base64 and rendered).
    static let maxValueBytes = CBORLimits.default.maxInputSize

    /// Refuses an entry whose value is over ``maxValueBytes`` (another process may have stored one raw),
    /// before any of it is copied or encoded, naming the collection or suite and the key.
    static func checkSize(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, role: DumpDatabaseRole?, database: String) throws {
        guard value.count > maxValueBytes else { return }
        let owner: String
        switch role {
        case .collection(let entry)?: owner = "collection '\(entry.name)'"
        case .suite(let entry)?: owner = "defaults suite '\(entry.name)'"
        default: owner = "database '\(database)'"
        }
        throw CLIError(.failure, "the value at key \(DumpError.describeKey(Array(key), encoding: role?.keyEncoding())) in \(owner) is \(value.count) bytes, "
                       + "over the \(maxValueBytes)-byte limit of a value; the dump stops there (kvtool check lists such values)")
    }

    /// The rendered key and value of an entry, as JSON; `null` where they cannot be rendered (with a note).
    static func render(key: [UInt8], value: [UInt8], role: DumpDatabaseRole?, database: String, line: Int) -> (JSONValue, JSONValue) {
        DumpRendering.render(key: key, value: value, role: role, database: database, line: line, note: note)
    }

    static func note(_ message: String) {
        FileHandle.standardError.write(Data("kvtool: note: \(message)\n".utf8))
    }
}

/// Where a dump goes: standard output, or a temporary file renamed over `path` once complete.
/// Writes are buffered (1 MiB) and go straight to the file descriptor.
final class DumpSink {
    private let fd: Int32
    private let path: String?
    private let temporary: String?
    private var buffer: [UInt8] = []
    private var closed = false

    init(path: String?) throws {
        self.path = path
        buffer.reserveCapacity(1 << 20)
        guard let path else {
            fd = STDOUT_FILENO
            temporary = nil
            return
        }
        // Next to the target, under the package's one temporary-name scheme, created afresh (never
        // through a link planted at that name).
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { String(path[...$0]) } ?? ""
        let temporary = directory + TemporaryFileName.make(for: String(path[(slash.map { path.index(after: $0) } ?? path.startIndex)...]))
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let reason = String(cString: strerror(errno))
            throw CLIError(errno == ENOENT ? .notFound : .failure, "cannot write \(path): \(reason)")
        }
        self.fd = fd
        self.temporary = temporary
    }

    func write(_ text: String) throws {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= 1 << 20 { try flush() }
    }

    func write(_ bytes: [UInt8]) throws {
        buffer.append(contentsOf: bytes)
        if buffer.count >= 1 << 20 { try flush() }
    }

    private func flush() throws {
        do {
            try buffer.withUnsafeBytes { try SystemCall.writeAll(fd, $0, path: path ?? "standard output") }
        } catch KVStoreError.io(_, _, let code) {
            throw failure(code)
        }
        buffer.removeAll(keepingCapacity: true)
    }

    private func failure(_ code: Int32 = errno) -> CLIError {
        CLIError(.failure, "cannot write \(path ?? "standard output"): \(String(cString: strerror(code)))")
    }

    /// Writes what is buffered; for a file, syncs it and renames it into place.
    func finish() throws {
        try flush()
        guard let path, let temporary else { return }
        guard fsync(fd) == 0 else { throw failure() }
        closed = true
        guard close(fd) == 0 else { throw failure() }
        guard rename(temporary, path) == 0 else { throw failure() }
    }

    /// Removes the temporary file after a failure.
    func abandon() {
        guard let temporary else { return }
        if !closed { close(fd) }
        closed = true
        unlink(temporary)
    }
}
