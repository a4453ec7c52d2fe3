/// The package's one JSON reader (what `kvtool put`, `kvtool load` and the sync gateway's JWTs are
/// read with), over a range of bytes, tracking lines: RFC 8259, UTF-8, nesting at most `maxDepth`
/// deep, duplicate object keys rejected (two members of one name are refused, never read as the first
/// or the last). Every byte access is checked against the range; errors carry the line and column.
package struct JSONParser {
    package struct SyntaxError: Error, CustomStringConvertible {
        package var line: Int
        package var column: Int
        package var message: String

        package var description: String { "line \(line), column \(column): \(message)" }
    }

    private let bytes: [UInt8]
    package private(set) var position: Int
    private let end: Int
    package private(set) var line: Int
    private var lineStart: Int
    /// Arrays and objects nest at most this deep.
    package let maxDepth: Int

    package init(_ bytes: [UInt8], range: Range<Int>, firstLine: Int = 1, maxDepth: Int = 80) {
        self.bytes = bytes
        self.maxDepth = maxDepth
        position = max(0, min(range.lowerBound, bytes.count))
        end = max(position, min(range.upperBound, bytes.count))
        line = firstLine
        lineStart = position
    }

    package var isAtEnd: Bool { position >= end }

    package func peek() -> UInt8? { position < end ? bytes[position] : nil }

    package func error(_ message: String) -> SyntaxError {
        SyntaxError(line: line, column: position - lineStart + 1, message: message)
    }

    package mutating func skipWhitespace() {
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

    package static func describe(_ byte: UInt8) -> String {
        (0x21...0x7E).contains(byte) ? "'\(Character(UnicodeScalar(byte)))'" : "byte 0x" + Hex.encode([byte])
    }

    package func unexpected(_ expected: String) -> SyntaxError {
        guard let byte = peek() else { return error("the text ends where \(expected) should be") }
        return error("unexpected \(Self.describe(byte)); expected \(expected)")
    }

    package mutating func expect(_ byte: UInt8, _ what: String) throws(SyntaxError) {
        skipWhitespace()
        guard peek() == byte else { throw unexpected(what) }
        position += 1
    }

    /// Parses one value, skipping whitespace before it.
    package mutating func parseValue(depth: Int = 0) throws(SyntaxError) -> JSONNode {
        skipWhitespace()
        guard depth <= maxDepth else { throw error("arrays and objects nest deeper than \(maxDepth) levels") }
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

    private mutating func hex4() throws(SyntaxError) -> UInt32 {
        guard end - position >= 4 else { throw error("the text ends inside a \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = Hex.value(bytes[position]).map(UInt32.init) else { throw unexpected("a hex digit in a \\u escape") }
            value = value << 4 | digit
            position += 1
        }
        return value
    }

    /// Parses a string at a double quote.
    package mutating func parseString() throws(SyntaxError) -> String {
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
