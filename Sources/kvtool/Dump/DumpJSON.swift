import Foundation
import KVStore

// The JSON Lines and JSON syntaxes of a kvtool dump: a small JSON parser that knows line numbers and
// never traps (bounded nesting, checked bytes), the readers of both syntaxes, and the writers `dump`
// uses.
//
// JSON Lines (the default):
//
//     {"catalog":[…],"databases":[{"entries":3,"name":"c/scores"}],"format":"kvtool-dump","group":"…","sourceTransactionID":12,"version":1}
//     {"db":"c/scores","key":"alice","value":42,"k":"616c696365","v":"GCo="}
//
// JSON: `{"header":{…the same…},"entries":[` then one entry object a line, then `]}`.

/// Reading and writing the JSON syntaxes of a dump.
enum DumpJSON {
    // MARK: - Reading

    static func syntaxError(_ error: JSONParser.SyntaxError) -> CLIError {
        DumpError.at(error.line, "invalid JSON at column \(error.column): \(error.message)")
    }

    /// Parses one whole line as one JSON value.
    static func parseLine(_ bytes: [UInt8], _ range: Range<Int>, line: Int) throws -> JSONNode {
        var parser = JSONParser(bytes, range: range, firstLine: line, maxDepth: DumpLimits.maxJSONDepth)
        do throws(JSONParser.SyntaxError) {
            let node = try parser.parseValue()
            parser.skipWhitespace()
            guard parser.isAtEnd else { throw parser.unexpected("the end of the line") }
            return node
        } catch {
            throw syntaxError(error)
        }
    }

    /// A JSON Lines dump: the header on line 1, then one entry a line.
    static func readLines(_ bytes: [UInt8], lines: [Range<Int>]) throws -> (DumpHeader, [RawDumpLine], endLine: Int) {
        guard let first = lines.first else { throw DumpError.at(1, "the input is empty; expected a kvtool dump") }
        let header = try self.header(parseLine(bytes, first, line: 1))
        var raw: [RawDumpLine] = []
        raw.reserveCapacity(lines.count)
        for (i, range) in lines.enumerated().dropFirst() {
            let number = i + 1
            guard range.contains(where: { !(bytes[$0] == 0x20 || bytes[$0] == 0x09 || bytes[$0] == 0x0D) }) else {
                throw DumpError.at(number, "empty line; every line after the header is one entry")
            }
            raw.append(try entry(parseLine(bytes, range, line: number)))
        }
        return (header, raw, lines.count + 1)
    }

    /// A JSON dump: `{"header":{…},"entries":[…]}`, the header and entries in any order.
    static func readDocument(_ bytes: [UInt8]) throws -> (DumpHeader, [RawDumpLine], endLine: Int) {
        var parser = JSONParser(bytes, range: 0..<bytes.count, firstLine: 1, maxDepth: DumpLimits.maxJSONDepth)
        var header: DumpHeader?
        var raw: [RawDumpLine]?
        var endLine = 1
        do {
            try parser.expect(UInt8(ascii: "{"), "'{'")
            var first = true
            while true {
                parser.skipWhitespace()
                if first, parser.peek() == UInt8(ascii: "}") { break }
                first = false
                let nameLine = parser.line
                let name = try parser.parseString()
                try parser.expect(UInt8(ascii: ":"), "':'")
                switch name {
                case "header":
                    guard header == nil else { throw DumpError.at(nameLine, "the JSON dump has two \"header\" members") }
                    header = try self.header(parser.parseValue(depth: 1))
                case "entries":
                    guard raw == nil else { throw DumpError.at(nameLine, "the JSON dump has two \"entries\" members") }
                    var entries: [RawDumpLine] = []
                    try parser.expect(UInt8(ascii: "["), "'['")
                    parser.skipWhitespace()
                    if parser.peek() == UInt8(ascii: "]") {
                        endLine = parser.line
                        try parser.expect(UInt8(ascii: "]"), "']'")
                    } else {
                        while true {
                            entries.append(try entry(parser.parseValue(depth: 2)))
                            parser.skipWhitespace()
                            endLine = parser.line
                            if parser.peek() == UInt8(ascii: "]") {
                                try parser.expect(UInt8(ascii: "]"), "']'")
                                break
                            }
                            try parser.expect(UInt8(ascii: ","), "',' or ']'")
                        }
                    }
                    raw = entries
                default:
                    throw DumpError.at(nameLine, "unknown member \(JSONText.quoted(name)) in a JSON dump (expected \"header\" and \"entries\")")
                }
                parser.skipWhitespace()
                if parser.peek() == UInt8(ascii: "}") { break }
                try parser.expect(UInt8(ascii: ","), "',' or '}'")
            }
            try parser.expect(UInt8(ascii: "}"), "'}'")
            parser.skipWhitespace()
            guard parser.isAtEnd else { throw parser.unexpected("the end of the JSON dump") }
        } catch let error as JSONParser.SyntaxError {
            throw syntaxError(error)
        }
        guard let header else { throw DumpError.at(1, "not a kvtool dump: the JSON dump has no \"header\"") }
        guard let raw else { throw DumpError.at(header.line, "the JSON dump has no \"entries\"") }
        return (header, raw, endLine)
    }

    private static func members(_ node: JSONNode, _ what: String) throws -> [(key: String, value: JSONNode)] {
        guard case .object(let members) = node.kind else {
            throw DumpError.at(node.line, "\(what) must be an object, not \(node.typeName)")
        }
        return members
    }

    private static func string(_ node: JSONNode, _ what: String) throws -> String {
        guard case .string(let s) = node.kind else { throw DumpError.at(node.line, "\(what) must be a string, not \(node.typeName)") }
        return s
    }

    private static func integer(_ node: JSONNode, _ what: String) throws -> Int {
        guard case .number(let text) = node.kind, let n = Int(text) else {
            throw DumpError.at(node.line, "\(what) must be an integer, not \(node.kind.isNumber ? (node.jsonText.count > 40 ? "a number out of range" : node.jsonText) : node.typeName)")
        }
        return n
    }

    private static func array(_ node: JSONNode, _ what: String) throws -> [JSONNode] {
        guard case .array(let items) = node.kind else { throw DumpError.at(node.line, "\(what) must be an array, not \(node.typeName)") }
        return items
    }

    /// The header object of either JSON syntax.
    static func header(_ node: JSONNode) throws -> DumpHeader {
        let notADump = "not a kvtool dump: the first line must be the header, {\"format\":\"kvtool-dump\",\"version\":1,…}"
        guard case .object(let members) = node.kind else { throw DumpError.at(node.line, notADump) }
        guard let format = members.first(where: { $0.key == "format" })?.value, case .string(let name) = format.kind,
              name == DumpHeader.formatName else {
            throw DumpError.at(node.line, notADump)
        }
        guard let versionNode = members.first(where: { $0.key == "version" })?.value else {
            throw DumpError.at(node.line, "the header has no \"version\"")
        }
        guard case .number(let versionText) = versionNode.kind, Int(versionText) == DumpHeader.version else {
            throw DumpError.at(versionNode.line, "unsupported dump version \(versionNode.jsonText.prefix(40)); this kvtool reads version \(DumpHeader.version)")
        }
        var header = DumpHeader()
        header.line = node.line
        var sawCatalog = false, sawDatabases = false
        for (key, value) in members {
            switch key {
            case "format", "version":
                break
            case "group":
                if case .null = value.kind { break }
                header.group = try string(value, "the header's \"group\"")
            case "sourceTransactionID":
                if case .null = value.kind { break }
                let id = try integer(value, "the header's \"sourceTransactionID\"")
                guard id >= 0 else { throw DumpError.at(value.line, "the header's \"sourceTransactionID\" is negative") }
                header.sourceTransactionID = id
            case "catalog":
                sawCatalog = true
                for (i, item) in try array(value, "the header's \"catalog\"").enumerated() {
                    header.catalog.append(try catalogEntry(item, number: i + 1))
                    header.catalogLines.append(item.line)
                }
            case "databases":
                sawDatabases = true
                for (i, item) in try array(value, "the header's \"databases\"").enumerated() {
                    let what = "database \(i + 1) of the header"
                    var name: String?, entries: Int?
                    for (k, v) in try Self.members(item, what) {
                        switch k {
                        case "name": name = try string(v, "the name of \(what)")
                        case "entries": entries = try integer(v, "the entries of \(what)")
                        default: throw DumpError.at(v.line, "unknown member \(JSONText.quoted(k)) in \(what)")
                        }
                    }
                    guard let name, let entries else {
                        throw DumpError.at(item.line, "\(what) needs \"name\" and \"entries\"")
                    }
                    header.databases.append(DumpDatabase(name: name, entries: entries))
                    header.databaseLines.append(item.line)
                }
            default:
                throw DumpError.at(value.line, "unknown member \(JSONText.quoted(key)) in the header")
            }
        }
        guard sawCatalog else { throw DumpError.at(node.line, "the header has no \"catalog\"") }
        guard sawDatabases else { throw DumpError.at(node.line, "the header has no \"databases\"") }
        return header
    }

    /// A catalog entry of the header: decoded by `CatalogEntry`'s own `Codable`, the one definition of
    /// its members. A member it does not have, or one that does not decode, is refused with its line
    /// and what was expected.
    static func catalogEntry(_ node: JSONNode, number: Int) throws -> CatalogEntry {
        let what = "catalog entry \(number)"
        for (key, value) in try members(node, what) {
            guard CatalogEntry.jsonMembers.contains(key) else {
                throw DumpError.at(node.line, "unknown member \(JSONText.quoted(key)) in \(what)")
            }
            guard key == "indexes", case .array(let indexes) = value.kind else { continue }
            for index in indexes {
                for (key, member) in try members(index, "an index of \(what)") where !CatalogEntry.IndexEntry.jsonMembers.contains(key) {
                    throw DumpError.at(member.line, "unknown member \(JSONText.quoted(key)) in an index of \(what)")
                }
            }
        }
        do {
            return try JSONDecoder().decode(CatalogEntry.self, from: Data(node.jsonText.utf8))
        } catch let error as DecodingError {
            throw catalogProblem(error, in: node, what: what)
        }
    }

    /// A decoding error of a catalog entry as one line: the member, its line, what it must be.
    private static func catalogProblem(_ error: DecodingError, in entry: JSONNode, what: String) -> CLIError {
        func node(at path: [any CodingKey]) -> JSONNode {
            var node = entry
            for key in path {
                switch node.kind {
                case .object(let members): node = members.last { $0.key == key.stringValue }?.value ?? node
                case .array(let items): if let i = key.intValue, items.indices.contains(i) { node = items[i] }
                default: break
                }
            }
            return node
        }
        func owner(_ path: [any CodingKey]) -> String {
            path.contains { $0.stringValue == "indexes" } ? "an index of \(what)" : what
        }
        func expected(_ type: Any.Type) -> String {
            switch type {
            case is String.Type: "a string"
            case is Bool.Type: "true or false"
            case is Int.Type: "an integer"
            case is [Any].Type, is [String].Type, is [CatalogEntry.IndexEntry].Type: "an array"
            default: "\(type)"
            }
        }
        switch error {
        case .keyNotFound(let key, let context):
            return DumpError.at(node(at: context.codingPath).line, "\(owner(context.codingPath)) has no \(JSONText.quoted(key.stringValue))")
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            let found = node(at: context.codingPath)
            let name = context.codingPath.last { $0.intValue == nil }?.stringValue ?? "?"
            return DumpError.at(found.line, "\(JSONText.quoted(name)) of \(owner(context.codingPath)) must be \(expected(type)), not \(found.typeName)")
        case .dataCorrupted(let context):
            let found = node(at: context.codingPath)
            if context.codingPath.last?.stringValue == "kind", case .string(let kind) = found.kind {
                let kinds = CatalogEntry.Kind.allCases.map { JSONText.quoted($0.rawValue) }.joined(separator: " or ")
                return DumpError.at(found.line, "the kind of \(what) is \(JSONText.quoted(kind)), not \(kinds)")
            }
            return DumpError.at(found.line, "\(what) does not decode: \(context.debugDescription)")
        @unknown default:
            return DumpError.at(entry.line, "\(what) does not decode: \(error)")
        }
    }

    /// One entry object: `db`, and `k`/`v` (hex and base64 bytes) or `key`/`value` (rendered JSON).
    static func entry(_ node: JSONNode) throws -> RawDumpLine {
        guard case .object(let members) = node.kind else {
            throw DumpError.at(node.line, "an entry must be a JSON object, not \(node.typeName)")
        }
        var raw = RawDumpLine(line: node.line, database: "")
        var database: String?
        for (key, value) in members {
            switch key {
            case "db": database = try string(value, "\"db\"")
            case "key": raw.keyNode = value
            case "value": raw.valueNode = value
            case "k":
                let text = try string(value, "\"k\"")
                guard let bytes = Hex.decode(Array(text.utf8)) else {
                    throw DumpError.at(node.line, "\"k\" is not an even number of hex digits")
                }
                raw.key = bytes
            case "v":
                let text = try string(value, "\"v\"")
                guard let data = Data(base64Encoded: text) else { throw DumpError.at(node.line, "\"v\" is not base64") }
                raw.value = Array(data)
            default:
                throw DumpError.at(node.line, "unknown member \(JSONText.quoted(key)) in an entry (expected db, key, value, k, v)")
            }
        }
        guard let database else { throw DumpError.at(node.line, "the entry has no \"db\"") }
        raw.database = database
        // Both forms are kept: the validator checks that they agree.
        return raw
    }

    // MARK: - Writing

    /// The header as one JSON object, keys sorted.
    static func headerText(_ header: DumpHeader) throws -> String {
        var fields: [JSONValue.Member] = [
            .init("catalog", .array(try header.catalog.map { try $0.json })),
            .init("databases", .array(header.databases.map { ["entries": .integer($0.entries), "name": .string($0.name)] })),
            .init("format", .string(DumpHeader.formatName)),
        ]
        if let group = header.group { fields.append(.init("group", .string(group))) }
        if let id = header.sourceTransactionID { fields.append(.init("sourceTransactionID", .integer(id))) }
        fields.append(.init("version", .integer(header.version)))
        return try JSONWriter.compact.render(.object(fields))
    }

    /// One entry line: `{"db":…,"key":…,"value":…,"k":"<hex>","v":"<base64>"}`. A value's map keys
    /// that convert alike are both written, as everywhere CBOR is shown as JSON.
    static func entryText(database: String, key keyJSON: JSONValue, value valueJSON: JSONValue, key: [UInt8], value: [UInt8]) throws -> String {
        try JSONWriter.cborCompact.render([
            "db": .string(database), "key": keyJSON, "value": valueJSON,
            "k": .string(Hex.encode(key)), "v": .string(Data(value).base64EncodedString()),
        ])
    }
}
