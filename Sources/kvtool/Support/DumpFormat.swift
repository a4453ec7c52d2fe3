import Foundation
import KVStore

// The model of a kvtool dump, shared by its three readable syntaxes (JSON Lines, JSON and LMDB's
// `mdb_dump` text), and the validation every dump goes through before `load` writes anything.
//
// Everything here is pure: bytes in, a validated ``DumpDocument`` or a ``CLIError`` naming the line
// out. It never traps on any input (no force unwraps, no unchecked conversions, bounded recursion),
// because it reads files from anywhere.

/// The caps on what `load` reads. A line (of any format) over `maxLineBytes`, or an input over
/// `maxInputBytes`, is rejected before anything else is looked at.
struct DumpLimits: Sendable {
    /// 64 MiB: enough for a 32 MiB value in hex (mdb format) or 48 MiB in base64 (JSON Lines).
    static let defaultMaxLineBytes = 64 << 20
    /// 1 GiB.
    static let defaultMaxInputBytes = 1 << 30
    /// Nesting of JSON arrays and objects: CBOR values nest at most 64 deep, plus the line's own.
    static let maxJSONDepth = 80

    var maxLineBytes = defaultMaxLineBytes
    var maxInputBytes = defaultMaxInputBytes

    static let `default` = DumpLimits()
}

/// The syntaxes `load` reads (it detects which).
enum DumpInputFormat: String, Sendable {
    case jsonLines = "JSON Lines"
    case json = "JSON"
    case mdb = "mdb_dump"
}

/// One named database listed in a dump's header, with its number of entries.
struct DumpDatabase: Hashable, Sendable {
    var name: String
    var entries: Int
}

/// The header of a dump: what it contains and the catalog that describes it.
struct DumpHeader: Sendable {
    static let formatName = "kvtool-dump"
    static let version = 1

    var version = DumpHeader.version
    /// The App Group the dump was taken from.
    var group: String?
    /// The LMDB transaction the dump was read in (`nil` for an mdb-format dump).
    var sourceTransactionID: Int?
    /// The catalog entries of the dumped collections and suites.
    var catalog: [CatalogEntry] = []
    /// The line each catalog entry is on.
    var catalogLines: [Int] = []
    /// Every dumped database, in the dump's order.
    var databases: [DumpDatabase] = []
    /// The line each database is listed on.
    var databaseLines: [Int] = []
    /// The line of the header (of the database list).
    var line = 1
}

/// One entry of a dump as read, before validation: the raw bytes (`k`, `v`) when present, or else
/// the rendered JSON (`key`, `value`) of a hand-written line.
struct RawDumpLine: Sendable {
    var line: Int
    var database: String
    var key: [UInt8]?
    var value: [UInt8]?
    var keyNode: JSONNode?
    var valueNode: JSONNode?
}

/// One validated entry: bytes ready to put.
struct DumpEntry: Hashable, Sendable {
    var database: String
    var key: [UInt8]
    var value: [UInt8]
    var line: Int
}

/// A dump that passed every check that needs no target container.
struct DumpDocument: Sendable {
    var format: DumpInputFormat
    var header: DumpHeader
    var entries: [DumpEntry]
    /// The database of each name the header lists.
    var roles: [String: DumpDatabaseRole]
}

/// What a named database is, according to a catalog.
enum DumpDatabaseRole: Sendable {
    case collection(CatalogEntry)
    case index(collection: CatalogEntry, index: CatalogEntry.IndexEntry)
    case suite(CatalogEntry)
    /// `_requirements`: observer requirements, keys `c/<name>` or `d/<name>`, values a kind name.
    case requirements

    static let requirementsDatabase = "_requirements"
    static let catalogDatabase = "_catalog"

    /// Every database a catalog describes, by name.
    static func roles(for catalog: [CatalogEntry]) -> [String: DumpDatabaseRole] {
        var roles: [String: DumpDatabaseRole] = [requirementsDatabase: .requirements]
        for entry in catalog {
            switch entry.kind {
            case .collection:
                roles[entry.database] = .collection(entry)
                for index in entry.indexes { roles[index.database] = .index(collection: entry, index: index) }
            case .defaults:
                roles[entry.database] = .suite(entry)
            }
        }
        return roles
    }

    /// SyncKit's history collections (`_history`, `_history.state`, `_history.consumers`), which
    /// `load` restores only with `--replace`.
    var isHistory: Bool {
        if case .collection(let entry) = self { return DumpCatalog.isHistory(entry.name) }
        return false
    }

    /// The collection or suite a put is recorded as, so that write observers (history) see it; `nil`
    /// for databases whose changes are not mutations of a collection or suite.
    var target: Mutation.Target? {
        switch self {
        case .collection(let entry): DumpCatalog.isHistory(entry.name) ? nil : .collection(entry.name)
        case .suite(let entry): .defaults(entry.name)
        case .index, .requirements: nil
        }
    }

    /// Human words for messages: `collection 'scores'`.
    var what: String {
        switch self {
        case .collection(let entry): "collection '\(entry.name)'"
        case .index(let collection, let index): "index '\(index.name)' of '\(collection.name)'"
        case .suite(let entry): "defaults suite '\(entry.name)'"
        case .requirements: "'_requirements'"
        }
    }

    /// How keys of this database decode: the catalog's encoding; for an index, the index key then
    /// the primary key.
    func keyEncoding() -> KeyEncoding? {
        switch self {
        case .collection(let entry): return KeyEncoding(entry.keyEncoding)
        case .suite: return .string
        case .index(let collection, let index):
            guard let primary = KeyEncoding(collection.keyEncoding), let indexKey = KeyEncoding(index.keyEncoding) else { return nil }
            return .tuple(Self.parts(indexKey) + Self.parts(primary))
        case .requirements: return nil
        }
    }

    static func parts(_ encoding: KeyEncoding) -> [KeyEncoding] {
        if case .tuple(let parts) = encoding { return parts }
        return [encoding]
    }
}

/// Checks on catalog entries: well-formed, not repeated, consistent with a target's.
enum DumpCatalog {
    /// SyncKit's history collections (`History` keeps its entries, state and consumers in them).
    static let historyCollections: Set<String> = ["_history", "_history.state", "_history.consumers"]

    static func isHistory(_ name: String) -> Bool { historyCollections.contains(name) }

    /// Collection, index and suite names, as the library checks them.
    static func isValidName(_ name: String) -> Bool { CatalogEntry.isValidName(name) }

    /// What a value encoding requires of a stored value: `cbor`, `bytes`, or `fixed(N)`.
    enum ValueRule: Equatable {
        case cbor, bytes, fixed(Int)
    }

    static func valueRule(_ encoding: String) -> ValueRule? {
        switch encoding {
        case "cbor": return .cbor
        case "bytes": return .bytes
        default:
            guard encoding.hasPrefix("fixed("), encoding.hasSuffix(")"), encoding.utf8.count <= 20 else { return nil }
            let digits = encoding.dropFirst(6).dropLast()
            guard !digits.isEmpty, digits.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
                  let size = Int(digits), size >= 1, size <= DumpLimits.defaultMaxLineBytes,
                  "fixed(\(size))" == encoding else { return nil }
            return .fixed(size)
        }
    }

    /// Throws if `entry` is not a catalog entry the library could have written.
    static func checkWellFormed(_ entry: CatalogEntry, line: Int) throws {
        let what = "\(entry.kind == .defaults ? "defaults suite" : "collection") '\(entry.name)'"
        func fail(_ problem: String) -> CLIError { DumpError.at(line, "bad catalog entry for \(what): \(problem)") }
        guard isValidName(entry.name) else {
            throw DumpError.at(line, "bad catalog entry: \(JSONText.quoted(entry.name)) is not a valid name (1 to 200 ASCII letters, digits, '.', '_' or '-')")
        }
        guard let keyEncoding = KeyEncoding(entry.keyEncoding), keyEncoding.description == entry.keyEncoding else {
            throw fail("unknown key encoding \(JSONText.quoted(entry.keyEncoding))")
        }
        guard valueRule(entry.valueEncoding) != nil else { throw fail("unknown value encoding \(JSONText.quoted(entry.valueEncoding))") }
        guard entry.schemaVersion >= 1 else { throw fail("schema version \(entry.schemaVersion) is below 1") }
        switch entry.kind {
        case .collection:
            guard entry.database == "c/" + entry.name else { throw fail("its database is \(JSONText.quoted(entry.database)), not \"c/\(entry.name)\"") }
        case .defaults:
            guard entry.database == "d/" + entry.name else { throw fail("its database is \(JSONText.quoted(entry.database)), not \"d/\(entry.name)\"") }
            guard keyEncoding == .string, entry.valueEncoding == "cbor", entry.indexes.isEmpty, entry.derived.isEmpty,
                  entry.derivedFrom == nil else {
                throw fail("a defaults suite has string keys, cbor values and no indexes or derived collections")
            }
        }
        var indexNames = Set<String>()
        for index in entry.indexes {
            guard isValidName(index.name) else { throw fail("index name \(JSONText.quoted(index.name)) is not valid") }
            guard indexNames.insert(index.name).inserted else { throw fail("index '\(index.name)' is listed twice") }
            guard let encoding = KeyEncoding(index.keyEncoding), encoding.description == index.keyEncoding else {
                throw fail("index '\(index.name)' has an unknown key encoding \(JSONText.quoted(index.keyEncoding))")
            }
            guard index.database == "i/\(entry.name)/\(index.name)" else {
                throw fail("index '\(index.name)' has the database \(JSONText.quoted(index.database)), not \"i/\(entry.name)/\(index.name)\"")
            }
        }
        for name in entry.derived + (entry.derivedFrom.map { [$0] } ?? []) where !isValidName(name) {
            throw fail("derived collection name \(JSONText.quoted(name)) is not valid")
        }
    }

    /// Throws if two entries describe the same collection or suite.
    static func checkUnique(_ catalog: [CatalogEntry], lines: [Int]) throws {
        var seen: [String: CatalogEntry] = [:]
        for (i, entry) in catalog.enumerated() {
            let key = entry.kind.rawValue + "/" + entry.name
            let line = i < lines.count ? lines[i] : 1
            let what = "\(entry.kind == .defaults ? "defaults suite" : "collection") '\(entry.name)'"
            if let earlier = seen[key] {
                throw DumpError.at(line, earlier == entry ? "duplicate catalog entry for \(what)"
                                                          : "contradicting catalog entries for \(what)")
            }
            seen[key] = entry
        }
    }

    /// Throws if an entry of `catalog` describes a collection or suite of `target` differently
    /// (keys, values, schema version or indexes): merging would mix two layouts in one database.
    static func checkConsistent(_ catalog: [CatalogEntry], lines: [Int], with target: [CatalogEntry]) throws {
        let existing = Dictionary(target.map { ($0.kind.rawValue + "/" + $0.name, $0) }, uniquingKeysWith: { first, _ in first })
        for (i, entry) in catalog.enumerated() {
            guard let current = existing[entry.kind.rawValue + "/" + entry.name] else { continue }
            let line = i < lines.count ? lines[i] : 1
            let what = "\(entry.kind == .defaults ? "defaults suite" : "collection") '\(entry.name)'"
            var detail: String?
            if current.keyEncoding != entry.keyEncoding {
                detail = "keys are \(entry.keyEncoding) in the dump, \(current.keyEncoding) in the target"
            } else if current.valueEncoding != entry.valueEncoding {
                detail = "values are \(entry.valueEncoding) in the dump, \(current.valueEncoding) in the target"
            } else if current.schemaVersion != entry.schemaVersion {
                detail = "schema version \(entry.schemaVersion) in the dump, \(current.schemaVersion) in the target"
            } else if Set(current.indexes) != Set(entry.indexes) {
                let describe = { (indexes: [CatalogEntry.IndexEntry]) in
                    indexes.isEmpty ? "none" : indexes.map { "\($0.name)(\($0.keyEncoding))" }.sorted().joined(separator: ", ")
                }
                detail = "indexes are \(describe(entry.indexes)) in the dump, \(describe(current.indexes)) in the target"
            }
            if let detail {
                throw DumpError.at(line, "catalog mismatch for \(what): \(detail); use --replace to load over it")
            }
        }
    }
}

/// The errors of reading a dump.
enum DumpError {
    /// A bad-input error naming the line. Control characters that came from the input (in a key or
    /// a database name) are escaped, so that the message stays one printable line.
    static func at(_ line: Int, _ message: String) -> CLIError {
        CLIError(.badInput, "line \(line): \(printable(message))")
    }

    static func printable(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if scalar.value < 0x20 || scalar.value == 0x7F {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A key for messages: rendered if it decodes, else hex; long ones shortened.
    static func describeKey(_ bytes: [UInt8], encoding: KeyEncoding?) -> String {
        if let encoding, let rendered = try? encoding.render(bytes) {
            let text = rendered.description
            return text.count > 80 ? String(text.prefix(77)) + "..." : text
        }
        let text = "0x" + hex(Array(bytes.prefix(40)))
        return bytes.count > 40 ? text + "..." : text
    }
}

/// Turns a header and raw lines (from any syntax) into a validated ``DumpDocument``.
struct DumpValidator {
    let limits: DumpLimits

    func validate(format: DumpInputFormat, header: DumpHeader, lines: [RawDumpLine], endLine: Int,
                  progress: (_ done: Int, _ total: Int) -> Void = { _, _ in }) throws -> DumpDocument {
        for (i, entry) in header.catalog.enumerated() {
            try DumpCatalog.checkWellFormed(entry, line: i < header.catalogLines.count ? header.catalogLines[i] : header.line)
        }
        try DumpCatalog.checkUnique(header.catalog, lines: header.catalogLines)
        let described = DumpDatabaseRole.roles(for: header.catalog)
        var roles: [String: DumpDatabaseRole] = [:]
        var expected: [String: Int] = [:]
        for (i, database) in header.databases.enumerated() {
            let line = i < header.databaseLines.count ? header.databaseLines[i] : header.line
            guard database.name != DumpDatabaseRole.catalogDatabase else {
                throw DumpError.at(line, "'_catalog' cannot be loaded as a database: the catalog goes in the header")
            }
            guard let role = described[database.name] else {
                throw DumpError.at(line, "unknown database \(JSONText.quoted(database.name)): the dump's catalog does not describe it")
            }
            guard expected[database.name] == nil else {
                throw DumpError.at(line, "the header lists the database '\(database.name)' twice")
            }
            guard database.entries >= 0 else {
                throw DumpError.at(line, "the header gives '\(database.name)' a negative number of entries")
            }
            roles[database.name] = role
            expected[database.name] = database.entries
        }

        var entries: [DumpEntry] = []
        entries.reserveCapacity(lines.count)
        var seen: [String: [[UInt8]: Int]] = [:]
        var found: [String: Int] = [:]
        for raw in lines {
            guard let role = roles[raw.database] else {
                throw DumpError.at(raw.line, "unknown database \(JSONText.quoted(raw.database)): the header does not list it")
            }
            let count = (found[raw.database] ?? 0) + 1
            guard count <= expected[raw.database] ?? 0 else {
                throw DumpError.at(raw.line, "more entries for '\(raw.database)' than the \(expected[raw.database] ?? 0) the header announces")
            }
            found[raw.database] = count
            let entry = try self.entry(raw, role: role)
            if let earlier = seen[raw.database]?[entry.key] {
                throw DumpError.at(raw.line, "duplicate key \(DumpError.describeKey(entry.key, encoding: role.keyEncoding())) in '\(raw.database)' (first on line \(earlier))")
            }
            seen[raw.database, default: [:]][entry.key] = raw.line
            entries.append(entry)
            progress(entries.count, lines.count)
        }
        for database in header.databases where (found[database.name] ?? 0) < database.entries {
            throw DumpError.at(endLine, "the dump ends early: the header announces \(database.entries) entries for '\(database.name)', found \(found[database.name] ?? 0) (truncated?)")
        }
        return DumpDocument(format: format, header: header, entries: entries, roles: roles)
    }

    /// The bytes of one line, converted if hand-written, and checked against its database's catalog.
    private func entry(_ raw: RawDumpLine, role: DumpDatabaseRole) throws -> DumpEntry {
        let line = raw.line
        let encoding = role.keyEncoding()

        // Hand-written lines (rendered key or value, no raw bytes) only for plain cbor collections and suites.
        if raw.key == nil || raw.value == nil {
            let plain: Bool
            switch role {
            case .collection(let entry): plain = entry.valueEncoding == "cbor" && !entry.hasMaintainedData && !role.isHistory
            case .suite: plain = true
            case .index, .requirements: plain = false
            }
            guard plain else {
                throw DumpError.at(line, "\(role.what) can be loaded only from raw bytes (\"k\" and \"v\"), not from a rendered key or value")
            }
        }

        let key: [UInt8]
        if let bytes = raw.key {
            key = bytes
        } else if let node = raw.keyNode, let encoding {
            key = try parseKey(node, encoding: encoding, role: role, line: line)
        } else {
            throw DumpError.at(line, "the entry has no key (\"k\" or \"key\")")
        }
        guard !key.isEmpty, key.count <= 511 else {
            throw DumpError.at(line, "a key in '\(raw.database)' is \(key.count) bytes; keys must be 1 to 511 bytes")
        }
        if let encoding {
            do {
                _ = try encoding.render(key)
            } catch {
                throw DumpError.at(line, "key 0x\(DumpError.hex(Array(key.prefix(40))))\(key.count > 40 ? "..." : "") in '\(raw.database)' does not decode as \(encoding): \(error)")
            }
        }

        let value: [UInt8]
        if let bytes = raw.value {
            value = bytes
        } else if let node = raw.valueNode {
            do {
                value = try node.cbor(depth: 0).encoded()
            } catch let error as JSONNode.ConversionError {
                throw DumpError.at(line, "the value at key \(DumpError.describeKey(key, encoding: encoding)) in '\(raw.database)' cannot be stored: \(error.message)")
            }
        } else {
            throw DumpError.at(line, "the entry has no value (\"v\" or \"value\")")
        }
        try checkValue(value, key: key, role: role, database: raw.database, line: line)
        return DumpEntry(database: raw.database, key: key, value: value, line: line)
    }

    private func parseKey(_ node: JSONNode, encoding: KeyEncoding, role: DumpDatabaseRole, line: Int) throws -> [UInt8] {
        let text: String
        switch node.kind {
        case .string(let s): text = s
        case .number(let n): text = n
        case .array: text = node.jsonText
        default: throw DumpError.at(line, "the key must be a string, a number or (for tuple keys) an array")
        }
        do {
            return try encoding.parse(text)
        } catch {
            throw DumpError.at(line, "key \(node.jsonText.prefix(80)) does not parse as \(encoding) for \(role.what): \(error)")
        }
    }

    private func checkValue(_ value: [UInt8], key: [UInt8], role: DumpDatabaseRole, database: String, line: Int) throws {
        let keyText = { DumpError.describeKey(key, encoding: role.keyEncoding()) }
        switch role {
        case .collection(let entry), .suite(let entry):
            switch DumpCatalog.valueRule(entry.valueEncoding) {
            case .cbor?:
                do {
                    _ = try CBORValue.decode(value, limits: CBORLimits(maxInputSize: limits.maxLineBytes, maxDepth: 64))
                } catch {
                    throw DumpError.at(line, "the value at key \(keyText()) in '\(database)' is not valid CBOR: \(error)")
                }
            case .fixed(let size)?:
                guard value.count == size else {
                    throw DumpError.at(line, "the value at key \(keyText()) in '\(database)' is \(value.count) bytes; \(entry.valueEncoding) values are \(size)")
                }
            case .bytes?, nil:
                break
            }
            if entry.kind == .defaults, value.count > SharedDefaults.maxValueSize {
                throw DumpError.at(line, "the value at key \(keyText()) in '\(database)' is \(value.count) bytes, over the \(SharedDefaults.maxValueSize)-byte limit of a defaults value")
            }
        case .index:
            guard value.isEmpty else {
                throw DumpError.at(line, "index entries have empty values; the one at key \(keyText()) in '\(database)' has \(value.count) bytes")
            }
        case .requirements:
            let keyText = String(decoding: key, as: UTF8.self)
            guard String(validating: key, as: UTF8.self) != nil,
                  keyText.hasPrefix("c/") || keyText.hasPrefix("d/"), DumpCatalog.isValidName(String(keyText.dropFirst(2))) else {
                throw DumpError.at(line, "a key of '_requirements' is c/<collection> or d/<suite>, not 0x\(DumpError.hex(Array(key.prefix(40))))")
            }
            guard String(validating: value, as: UTF8.self) != nil, DumpCatalog.isValidName(String(decoding: value, as: UTF8.self)) else {
                throw DumpError.at(line, "the requirement for \(keyText) is not an observer kind name")
            }
        }
    }
}

/// Reads a dump in any of the syntaxes `load` accepts: the entry point of the pure parser.
enum DumpReader {
    /// Checks the caps, detects the syntax, parses and validates.
    ///
    /// - Throws: a ``CLIError`` of kind `badInput` naming the line at fault.
    /// - Parameter progress: called as entries are validated, with the count so far and the total.
    static func read(_ bytes: [UInt8], limits: DumpLimits = .default,
                     progress: (_ done: Int, _ total: Int) -> Void = { _, _ in }) throws -> DumpDocument {
        guard bytes.count <= limits.maxInputBytes else {
            throw CLIError(.badInput, "the input is over the \(limits.maxInputBytes)-byte limit of a dump")
        }
        let lines = try lineRanges(bytes, maxLineBytes: limits.maxLineBytes)
        guard let first = lines.first, !bytes.isEmpty else {
            throw DumpError.at(1, "the input is empty; expected a kvtool dump")
        }
        let validator = DumpValidator(limits: limits)
        switch try detect(bytes, firstLine: first) {
        case .mdb:
            let (header, raw, end) = try DumpMDB.read(bytes, lines: lines)
            return try validator.validate(format: .mdb, header: header, lines: raw, endLine: end, progress: progress)
        case .json:
            let (header, raw, end) = try DumpJSON.readDocument(bytes)
            return try validator.validate(format: .json, header: header, lines: raw, endLine: end, progress: progress)
        case .jsonLines:
            let (header, raw, end) = try DumpJSON.readLines(bytes, lines: lines)
            return try validator.validate(format: .jsonLines, header: header, lines: raw, endLine: end, progress: progress)
        }
    }

    /// The byte ranges of the lines (without their `\n`); a last line without `\n` counts.
    static func lineRanges(_ bytes: [UInt8], maxLineBytes: Int) throws -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        var start = 0
        try bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            while start < buffer.count, let found = memchr(base + start, 0x0A, buffer.count - start) {
                let end = UnsafeRawPointer(base).distance(to: UnsafeRawPointer(found))
                guard end - start <= maxLineBytes else {
                    throw DumpError.at(ranges.count + 1, "the line is over the \(maxLineBytes)-byte limit")
                }
                ranges.append(start..<end)
                start = end + 1
            }
        }
        if start < bytes.count {
            guard bytes.count - start <= maxLineBytes else {
                throw DumpError.at(ranges.count + 1, "the line is over the \(maxLineBytes)-byte limit")
            }
            ranges.append(start..<bytes.count)
        }
        return ranges
    }

    private static func detect(_ bytes: [UInt8], firstLine: Range<Int>) throws -> DumpInputFormat {
        if bytes.starts(with: Array("VERSION=".utf8)) { return .mdb }
        let line = bytes[firstLine]
        var index = line.startIndex
        while index < line.endIndex, [0x20, 0x09, 0x0D].contains(line[index]) { index += 1 }
        if index < line.endIndex, line[index] == UInt8(ascii: "{") {
            // A JSON dump's first member is "header" (or "entries"); a JSON Lines header's is not.
            var next = bytes.index(after: index)
            while next < bytes.count, [0x20, 0x09, 0x0D, 0x0A].contains(bytes[next]) { next += 1 }
            let rest = bytes[next..<min(bytes.count, next + 10)]
            if rest.starts(with: Array("\"header\"".utf8)) || rest.starts(with: Array("\"entries\"".utf8)) { return .json }
            return .jsonLines
        }
        if String(validating: line, as: UTF8.self) == nil || line.contains(where: { $0 < 0x20 && $0 != 0x09 && $0 != 0x0D }) {
            throw DumpError.at(1, "not a kvtool dump: binary data, not text")
        }
        if line.starts(with: Array("key,".utf8)) || Array(line) == Array("key".utf8) || Array(line) == Array("key\r".utf8) {
            throw DumpError.at(1, "this looks like a CSV dump, which load does not read: use a JSON Lines, JSON or mdb dump")
        }
        throw DumpError.at(1, "not a kvtool dump: expected a JSON Lines or JSON header, or an mdb_dump VERSION=3 line")
    }
}
