import Foundation
import KVStore

/// Turns a header and raw lines (from any syntax) into a validated ``DumpDocument``.
struct DumpValidator {
    let limits: DumpLimits
    /// Whether fewer entries than the header announces are accepted (`load --partial`).
    var partial = false

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
        for database in header.databases where !partial && (found[database.name] ?? 0) < database.entries {
            throw DumpError.at(endLine, "the dump ends early: the header announces \(database.entries) entries for '\(database.name)', found \(found[database.name] ?? 0) (truncated? --partial loads a dump with lines removed by hand)")
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
            case .collection(let entry): plain = entry.valueEncoding == .cbor && !entry.hasMaintainedData && !role.isHistory
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
        guard !key.isEmpty, key.count <= Store.maxKeySize else {
            throw DumpError.at(line, "a key in '\(raw.database)' is \(key.count) bytes; keys must be 1 to \(Store.maxKeySize) bytes")
        }
        if let encoding {
            do {
                _ = try encoding.render(key)
            } catch {
                throw DumpError.at(line, "key 0x\(Hex.encode(key.prefix(40)))\(key.count > 40 ? "..." : "") in '\(raw.database)' does not decode as \(encoding): \(error)")
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
        try checkAgreement(raw, key: key, value: value, role: role)
        return DumpEntry(database: raw.database, key: key, value: value, line: line)
    }

    /// A line with both forms (the raw `k`/`v` and the readable `key`/`value`) must say the same thing
    /// in both: a readable field edited by hand would otherwise be ignored without a word, since the
    /// raw bytes are what is loaded.
    private func checkAgreement(_ raw: RawDumpLine, key: [UInt8], value: [UInt8], role: DumpDatabaseRole) throws {
        guard (raw.key != nil && raw.keyNode != nil) || (raw.value != nil && raw.valueNode != nil) else { return }
        let advice = "edited by hand? delete \"k\" and \"v\" from the line to load its readable form, or \"key\" and \"value\" to load the raw bytes"
        // What `dump` writes for these bytes now, against what the line says.
        let (keyJSON, valueJSON) = DumpRendering.render(key: key, value: value, role: role, database: raw.database, line: raw.line)
        func readable(_ node: JSONNode) -> JSONValue? { (try? node.cbor(depth: 0)).map { JSONValue(cbor: $0) } }
        let keyText = DumpError.describeKey(key, encoding: role.keyEncoding())
        if raw.key != nil, let node = raw.keyNode, keyJSON != .null {
            guard let typed = readable(node), Self.sameJSON(typed, keyJSON) else {
                throw DumpError.at(raw.line, "the readable \"key\" \(node.jsonText.prefix(80)) and the raw \"k\" (\(keyText)) disagree in '\(raw.database)': \(advice)")
            }
        }
        if raw.value != nil, let node = raw.valueNode, valueJSON != .null {
            guard let typed = readable(node), Self.sameJSON(typed, valueJSON) else {
                throw DumpError.at(raw.line, "the readable \"value\" and the raw \"v\" at key \(keyText) in '\(raw.database)' disagree: \(advice)")
            }
        }
    }

    private static let comparing = JSONWriter(layout: .compact, trailingNewline: false, sortsKeys: true)

    /// Whether two values print the same with members sorted (the readable form sorts nothing, and
    /// converting it sorts members; only what is printed can be compared).
    static func sameJSON(_ a: JSONValue, _ b: JSONValue) -> Bool {
        guard let left = try? comparing.render(a), let right = try? comparing.render(b) else { return false }
        return left == right
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
            switch entry.valueEncoding {
            case .cbor:
                do {
                    _ = try CBORValue.decode(value, limits: CBORLimits(maxInputSize: limits.maxLineBytes, maxDepth: 64))
                } catch {
                    throw DumpError.at(line, "the value at key \(keyText()) in '\(database)' is not valid CBOR: \(error)")
                }
            case .fixed(let size):
                guard value.count == size else {
                    throw DumpError.at(line, "the value at key \(keyText()) in '\(database)' is \(value.count) bytes; \(entry.valueEncoding) values are \(size)")
                }
            case .bytes, .other:   // (a dump's catalog holds no other: DumpCatalog.isLoadable)
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
                throw DumpError.at(line, "a key of '_requirements' is c/<collection> or d/<suite>, not 0x\(Hex.encode(key.prefix(40)))")
            }
            guard String(validating: value, as: UTF8.self) != nil, DumpCatalog.isValidName(String(decoding: value, as: UTF8.self)) else {
                throw DumpError.at(line, "the requirement for \(keyText) is not an observer kind name")
            }
        }
    }
}
