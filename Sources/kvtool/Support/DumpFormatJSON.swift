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

/// A parsed JSON value with the line it starts on. Numbers keep their text, so that integers and
/// floats convert exactly; object members keep their order.
struct JSONNode: Sendable {
    indirect enum Kind: Sendable {
        case null
        case bool(Bool)
        case number(String)
        case string(String)
        case array([JSONNode])
        case object([(key: String, value: JSONNode)])
    }

    var line: Int
    var kind: Kind

    /// Compact JSON text for the node.
    var jsonText: String {
        var out = ""
        write(to: &out)
        return out
    }

    private func write(to out: inout String) {
        switch kind {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n): out += n
        case .string(let s): out += JSONText.quoted(s)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                item.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (i, member) in members.enumerated() {
                if i > 0 { out += "," }
                out += JSONText.quoted(member.key) + ":"
                member.value.write(to: &out)
            }
            out += "}"
        }
    }

    struct ConversionError: Error {
        var message: String
    }

    /// The value as CBOR, as `kvtool put` converts JSON: integers stay integers (if they fit 64 bits),
    /// other numbers become floats, object members are sorted by key.
    func cbor(depth: Int) throws -> CBORValue {
        guard depth <= DumpLimits.maxJSONDepth else { throw ConversionError(message: "nested too deeply") }
        switch kind {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .number(let text):
            if !text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) {
                if let v = Int64(text) { return v >= 0 ? .unsigned(UInt64(v)) : .negative(UInt64(~v)) }
                if let v = UInt64(text) { return .unsigned(v) }
            }
            guard let v = Double(text), v.isFinite else { throw ConversionError(message: "the number \(text.prefix(40)) is out of range") }
            return .float(v)
        case .string(let s): return .text(s)
        case .array(let items): return .array(try items.map { try $0.cbor(depth: depth + 1) })
        case .object(let members):
            return .map(try members.sorted { $0.key < $1.key }.map {
                CBORMapEntry(key: .text($0.key), value: try $0.value.cbor(depth: depth + 1))
            })
        }
    }

    var typeName: String {
        switch kind {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// A JSON parser over a range of bytes that tracks lines: RFC 8259, UTF-8, nesting at most
/// ``DumpLimits/maxJSONDepth`` deep, duplicate object keys rejected. Every byte access is checked
/// against the range; errors carry the line and column.
struct JSONParser {
    struct SyntaxError: Error {
        var line: Int
        var column: Int
        var message: String
    }

    private let bytes: [UInt8]
    private(set) var position: Int
    private let end: Int
    private(set) var line: Int
    private var lineStart: Int

    init(_ bytes: [UInt8], range: Range<Int>, firstLine: Int) {
        self.bytes = bytes
        position = max(0, min(range.lowerBound, bytes.count))
        end = max(position, min(range.upperBound, bytes.count))
        line = firstLine
        lineStart = position
    }

    var isAtEnd: Bool { position >= end }

    func peek() -> UInt8? { position < end ? bytes[position] : nil }

    func error(_ message: String) -> SyntaxError {
        SyntaxError(line: line, column: position - lineStart + 1, message: message)
    }

    mutating func skipWhitespace() {
        while position < end {
            let byte = bytes[position]
            if byte == 0x0A {
                line += 1
                position += 1
                lineStart = position
            } else if byte == 0x20 || byte == 0x09 || byte == 0x0D {
                position += 1
            } else {
                return
            }
        }
    }

    static func describe(_ byte: UInt8) -> String {
        (0x21...0x7E).contains(byte) ? "'\(Character(UnicodeScalar(byte)))'" : "byte 0x" + DumpError.hex([byte])
    }

    func unexpected(_ expected: String) -> SyntaxError {
        guard let byte = peek() else { return error("the text ends where \(expected) should be") }
        return error("unexpected \(Self.describe(byte)); expected \(expected)")
    }

    mutating func expect(_ byte: UInt8, _ what: String) throws(SyntaxError) {
        skipWhitespace()
        guard peek() == byte else { throw unexpected(what) }
        position += 1
    }

    /// Parses one value, skipping whitespace before it.
    mutating func parseValue(depth: Int = 0) throws(SyntaxError) -> JSONNode {
        skipWhitespace()
        guard depth <= DumpLimits.maxJSONDepth else { throw error("arrays and objects nest deeper than \(DumpLimits.maxJSONDepth) levels") }
        guard let byte = peek() else { throw error("the text ends where a value should be") }
        let startLine = line
        switch byte {
        case UInt8(ascii: "{"):
            position += 1
            var members: [(key: String, value: JSONNode)] = []
            var keys = Set<String>()
            skipWhitespace()
            if peek() == UInt8(ascii: "}") {
                position += 1
                return JSONNode(line: startLine, kind: .object(members))
            }
            while true {
                skipWhitespace()
                guard peek() == UInt8(ascii: "\"") else { throw unexpected("a member name in double quotes") }
                let keyColumn = position - lineStart + 1
                let key = try parseString()
                guard keys.insert(key).inserted else {
                    throw SyntaxError(line: line, column: keyColumn, message: "duplicate member \(JSONText.quoted(key)) in an object")
                }
                try expect(UInt8(ascii: ":"), "':'")
                let value = try parseValue(depth: depth + 1)
                members.append((key, value))
                skipWhitespace()
                guard let next = peek() else { throw error("the text ends inside an object") }
                position += 1
                if next == UInt8(ascii: "}") { break }
                guard next == UInt8(ascii: ",") else {
                    position -= 1
                    throw unexpected("',' or '}'")
                }
            }
            return JSONNode(line: startLine, kind: .object(members))
        case UInt8(ascii: "["):
            position += 1
            var items: [JSONNode] = []
            skipWhitespace()
            if peek() == UInt8(ascii: "]") {
                position += 1
                return JSONNode(line: startLine, kind: .array(items))
            }
            while true {
                items.append(try parseValue(depth: depth + 1))
                skipWhitespace()
                guard let next = peek() else { throw error("the text ends inside an array") }
                position += 1
                if next == UInt8(ascii: "]") { break }
                guard next == UInt8(ascii: ",") else {
                    position -= 1
                    throw unexpected("',' or ']'")
                }
            }
            return JSONNode(line: startLine, kind: .array(items))
        case UInt8(ascii: "\""):
            return JSONNode(line: startLine, kind: .string(try parseString()))
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return JSONNode(line: startLine, kind: .number(try parseNumber()))
        case UInt8(ascii: "t"):
            try literal("true")
            return JSONNode(line: startLine, kind: .bool(true))
        case UInt8(ascii: "f"):
            try literal("false")
            return JSONNode(line: startLine, kind: .bool(false))
        case UInt8(ascii: "n"):
            try literal("null")
            return JSONNode(line: startLine, kind: .null)
        default:
            throw unexpected("a value")
        }
    }

    private mutating func literal(_ word: StaticString) throws(SyntaxError) {
        let text = word.withUTF8Buffer { Array($0) }
        guard end - position >= text.count, Array(bytes[position..<(position + text.count)]) == text else {
            throw unexpected("a value")
        }
        position += text.count
    }

    private mutating func digits() -> Int {
        let start = position
        while let byte = peek(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { position += 1 }
        return position - start
    }

    private mutating func parseNumber() throws(SyntaxError) -> String {
        let start = position
        if peek() == UInt8(ascii: "-") { position += 1 }
        if peek() == UInt8(ascii: "0") {
            position += 1
        } else {
            guard digits() > 0 else { throw unexpected("a digit") }
        }
        if peek() == UInt8(ascii: ".") {
            position += 1
            guard digits() > 0 else { throw unexpected("a digit after '.'") }
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            position += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { position += 1 }
            guard digits() > 0 else { throw unexpected("a digit in the exponent") }
        }
        guard position - start <= 400 else { throw error("a number of \(position - start) characters is too long") }
        return String(decoding: bytes[start..<position], as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt32? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }

    private mutating func hex4() throws(SyntaxError) -> UInt32 {
        guard end - position >= 4 else { throw error("the text ends inside a \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = Self.hexValue(bytes[position]) else { throw unexpected("a hex digit in a \\u escape") }
            value = value << 4 | digit
            position += 1
        }
        return value
    }

    /// Parses a string at a double quote.
    mutating func parseString() throws(SyntaxError) -> String {
        guard peek() == UInt8(ascii: "\"") else { throw unexpected("a string") }
        position += 1
        let start = position
        // Fast path: no escapes.
        while position < end {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                guard let text = String(validating: bytes[start..<position], as: UTF8.self) else {
                    throw error("a string is not valid UTF-8")
                }
                position += 1
                return text
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 { break }
            position += 1
        }
        var buffer = Array(bytes[start..<position])
        while true {
            guard let byte = peek() else { throw error("the text ends inside a string") }
            position += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: buffer, as: UTF8.self) else { throw error("a string is not valid UTF-8") }
                return text
            case UInt8(ascii: "\\"):
                guard let escape = peek() else { throw error("the text ends inside a string") }
                position += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): buffer.append(escape)
                case UInt8(ascii: "b"): buffer.append(0x08)
                case UInt8(ascii: "f"): buffer.append(0x0C)
                case UInt8(ascii: "n"): buffer.append(0x0A)
                case UInt8(ascii: "r"): buffer.append(0x0D)
                case UInt8(ascii: "t"): buffer.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard end - position >= 2, bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u") else {
                            throw error("a \\u escape is an unpaired surrogate")
                        }
                        position += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw error("a \\u escape is an unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw error("a \\u escape is an unpaired surrogate")
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw error("a \\u escape is not a Unicode scalar") }
                    buffer.append(contentsOf: Array(String(Character(unicode)).utf8))
                default:
                    position -= 1
                    throw error("\\\(Self.describe(escape)) is not a JSON escape")
                }
            default:
                guard byte >= 0x20 else {
                    position -= 1
                    throw error("a control character (\(Self.describe(byte))) inside a string must be escaped")
                }
                buffer.append(byte)
            }
        }
    }
}

/// Reading and writing the JSON syntaxes of a dump.
enum DumpJSON {
    // MARK: - Reading

    static func syntaxError(_ error: JSONParser.SyntaxError) -> CLIError {
        DumpError.at(error.line, "invalid JSON at column \(error.column): \(error.message)")
    }

    /// Parses one whole line as one JSON value.
    static func parseLine(_ bytes: [UInt8], _ range: Range<Int>, line: Int) throws -> JSONNode {
        var parser = JSONParser(bytes, range: range, firstLine: line)
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
        var parser = JSONParser(bytes, range: 0..<bytes.count, firstLine: 1)
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

    /// A catalog entry of the header, checked member by member.
    static func catalogEntry(_ node: JSONNode, number: Int) throws -> CatalogEntry {
        let what = "catalog entry \(number)"
        var fields: [String: JSONNode] = [:]
        for (key, value) in try members(node, what) { fields[key] = value }
        let required = ["name", "kind", "keyEncoding", "valueEncoding", "schemaVersion", "indexes", "derived", "database"]
        for key in fields.keys where !required.contains(key) && key != "derivedFrom" {
            throw DumpError.at(node.line, "unknown member \(JSONText.quoted(key)) in \(what)")
        }
        for key in required where fields[key] == nil {
            throw DumpError.at(node.line, "\(what) has no \(JSONText.quoted(key))")
        }
        // Check every type here, so that decoding below cannot fail on well-typed members.
        for key in ["name", "kind", "keyEncoding", "valueEncoding", "database"] {
            if let value = fields[key] { _ = try string(value, "\(JSONText.quoted(key)) of \(what)") }
        }
        if let kindNode = fields["kind"], case .string(let kind) = kindNode.kind, CatalogEntry.Kind(rawValue: kind) == nil {
            throw DumpError.at(kindNode.line, "the kind of \(what) is \(JSONText.quoted(kind)), not \"collection\" or \"defaults\"")
        }
        if let version = fields["schemaVersion"] { _ = try integer(version, "\"schemaVersion\" of \(what)") }
        if let derived = fields["derived"] {
            for item in try array(derived, "\"derived\" of \(what)") { _ = try string(item, "a derived collection of \(what)") }
        }
        if let from = fields["derivedFrom"], !from.kind.isNull { _ = try string(from, "\"derivedFrom\" of \(what)") }
        if let indexes = fields["indexes"] {
            for item in try array(indexes, "\"indexes\" of \(what)") {
                var names = Set<String>()
                for (key, value) in try members(item, "an index of \(what)") {
                    guard ["name", "keyEncoding", "database"].contains(key) else {
                        throw DumpError.at(value.line, "unknown member \(JSONText.quoted(key)) in an index of \(what)")
                    }
                    _ = try string(value, "\(JSONText.quoted(key)) of an index of \(what)")
                    names.insert(key)
                }
                guard names.count == 3 else { throw DumpError.at(item.line, "an index of \(what) needs \"name\", \"keyEncoding\" and \"database\"") }
            }
        }
        do {
            return try JSONDecoder().decode(CatalogEntry.self, from: Data(node.jsonText.utf8))
        } catch {
            throw DumpError.at(node.line, "\(what) does not decode: \(error)")
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
                guard let bytes = DumpHex.decode(Array(text.utf8)) else {
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
        // Keep the rendered forms only where they are needed.
        if raw.key != nil { raw.keyNode = nil }
        if raw.value != nil { raw.valueNode = nil }
        return raw
    }

    // MARK: - Writing

    /// The header as one JSON object, keys sorted.
    static func headerText(_ header: DumpHeader) -> String {
        var fields: [(String, String)] = [
            ("catalog", "[" + header.catalog.map(catalogText).joined(separator: ",") + "]"),
            ("databases", "[" + header.databases.map { "{\"entries\":\($0.entries),\"name\":\(JSONText.quoted($0.name))}" }.joined(separator: ",") + "]"),
            ("format", JSONText.quoted(DumpHeader.formatName)),
        ]
        if let group = header.group { fields.append(("group", JSONText.quoted(group))) }
        if let id = header.sourceTransactionID { fields.append(("sourceTransactionID", String(id))) }
        fields.append(("version", String(header.version)))
        return "{" + fields.map { "\(JSONText.quoted($0.0)):\($0.1)" }.joined(separator: ",") + "}"
    }

    /// A catalog entry as JSON, keys sorted.
    static func catalogText(_ entry: CatalogEntry) -> String {
        var fields: [(String, String)] = [
            ("database", JSONText.quoted(entry.database)),
            ("derived", "[" + entry.derived.map(JSONText.quoted).joined(separator: ",") + "]"),
        ]
        if let from = entry.derivedFrom { fields.append(("derivedFrom", JSONText.quoted(from))) }
        fields += [
            ("indexes", "[" + entry.indexes.map {
                "{\"database\":\(JSONText.quoted($0.database)),\"keyEncoding\":\(JSONText.quoted($0.keyEncoding)),\"name\":\(JSONText.quoted($0.name))}"
            }.joined(separator: ",") + "]"),
            ("keyEncoding", JSONText.quoted(entry.keyEncoding)),
            ("kind", JSONText.quoted(entry.kind.rawValue)),
            ("name", JSONText.quoted(entry.name)),
            ("schemaVersion", String(entry.schemaVersion)),
            ("valueEncoding", JSONText.quoted(entry.valueEncoding)),
        ]
        return "{" + fields.map { "\(JSONText.quoted($0.0)):\($0.1)" }.joined(separator: ",") + "}"
    }

    /// One entry line: `{"db":…,"key":…,"value":…,"k":"<hex>","v":"<base64>"}`.
    static func entryText(database: String, keyJSON: String, valueJSON: String, key: [UInt8], value: [UInt8]) -> String {
        "{\"db\":\(JSONText.quoted(database)),\"key\":\(keyJSON),\"value\":\(valueJSON),\"k\":\"\(DumpHex.encode(key))\",\"v\":\"\(Data(value).base64EncodedString())\"}"
    }

    /// A key as JSON: numbers for integers, strings, arrays for tuples.
    static func keyJSON(_ key: KeyValue) -> String {
        switch key {
        case .integer(let v): String(v)
        case .unsigned(let v): String(v)
        case .text(let s): JSONText.quoted(s)
        case .array(let parts): "[" + parts.map(keyJSON).joined(separator: ",") + "]"
        }
    }
}

extension JSONNode.Kind {
    var isNull: Bool { if case .null = self { return true } else { return false } }
    var isNumber: Bool { if case .number = self { return true } else { return false } }
}

/// Lower-case hex, as `mdb_dump` writes it and `"k"` holds it.
enum DumpHex {
    static func encode(_ bytes: [UInt8]) -> String { DumpError.hex(bytes) }

    static func value(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Decodes hex digits (either case); `nil` for an odd count or a non-digit.
    static func decode<C: Collection<UInt8>>(_ digits: C) -> [UInt8]? {
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var high: UInt8?
        for digit in digits {
            guard let v = value(digit) else { return nil }
            if let h = high {
                out.append(h << 4 | v)
                high = nil
            } else {
                high = v
            }
        }
        return out
    }
}
