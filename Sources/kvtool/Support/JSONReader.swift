import KVStore

/// A strict RFC 8259 JSON parser that produces CBOR directly, with errors that say what was wrong
/// and at which byte, and a nesting limit equal to the CBOR decoder's (so that nothing `kvtool`
/// stores is too deep to read back). It never traps, whatever the input.
///
/// Integers stay integers (`Int64`, then `UInt64`); other numbers become floats. Object members are
/// stored sorted by key, and a key given twice is an error.
struct JSONReader {
    static let maxDepth = CBORLimits.default.maxDepth

    private let bytes: [UInt8]
    private var index = 0
    private var depth = 0

    /// Parses one JSON text; whitespace may surround it, nothing else may follow it.
    static func parse(_ text: String) throws -> CBORValue {
        var reader = JSONReader(bytes: Array(text.utf8))
        reader.skipWhitespace()
        guard reader.index < reader.bytes.count else { throw CLIError(.badInput, "invalid JSON: the input is empty") }
        let value = try reader.value()
        reader.skipWhitespace()
        guard reader.index == reader.bytes.count else { throw reader.failure("unexpected text after the JSON value") }
        return value
    }

    private init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    private func failure(_ message: String) -> CLIError {
        index < bytes.count
            ? CLIError(.badInput, "invalid JSON at byte \(index + 1): \(message)")
            : CLIError(.badInput, "invalid JSON: \(message) (the input ends too soon)")
    }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
    }

    private mutating func expect(_ literal: String, _ value: CBORValue) throws -> CBORValue {
        let expected = Array(literal.utf8)
        guard index + expected.count <= bytes.count, Array(bytes[index ..< index + expected.count]) == expected else {
            throw failure("expected a value")
        }
        index += expected.count
        return value
    }

    private mutating func value() throws -> CBORValue {
        skipWhitespace()
        guard let byte = current else { throw failure("expected a value") }
        switch byte {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .text(try string())
        case UInt8(ascii: "t"): return try expect("true", .bool(true))
        case UInt8(ascii: "f"): return try expect("false", .bool(false))
        case UInt8(ascii: "n"): return try expect("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0") ... UInt8(ascii: "9"): return try number()
        default: throw failure("expected a value")
        }
    }

    private mutating func enter() throws {
        depth += 1
        guard depth <= Self.maxDepth else { throw failure("nesting is deeper than \(Self.maxDepth) levels") }
    }

    private mutating func array() throws -> CBORValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var items: [CBORValue] = []
        skipWhitespace()
        if current == UInt8(ascii: "]") { index += 1; return .array(items) }
        while true {
            items.append(try value())
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"): index += 1; return .array(items)
            default: throw failure("expected ',' or ']' in an array")
            }
        }
    }

    private mutating func object() throws -> CBORValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var members: [String: CBORValue] = [:]
        skipWhitespace()
        if current == UInt8(ascii: "}") { index += 1; return .map([]) }
        while true {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else { throw failure("expected a string key in an object") }
            let keyStart = index
            let key = try string()
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { throw failure("expected ':' after an object key") }
            index += 1
            let member = try value()
            guard members.updateValue(member, forKey: key) == nil else {
                index = keyStart
                throw failure("the key \(JSONText.quoted(key)) appears twice in one object")
            }
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return .map(members.sorted { $0.key < $1.key }.map { CBORMapEntry(key: .text($0.key), value: $0.value) })
            default: throw failure("expected ',' or '}' in an object")
            }
        }
    }

    private mutating func string() throws -> String {
        index += 1  // the opening quote
        var scalars = String.UnicodeScalarView()
        var runStart = index
        func flush(_ end: Int) { scalars.append(contentsOf: String(decoding: bytes[runStart ..< end], as: UTF8.self).unicodeScalars) }
        while true {
            guard let byte = current else { throw failure("unterminated string") }
            switch byte {
            case UInt8(ascii: "\""):
                flush(index)
                index += 1
                return String(scalars)
            case UInt8(ascii: "\\"):
                flush(index)
                index += 1
                guard let escape = current else { throw failure("unterminated escape") }
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"): scalars.append(try unicodeEscape())
                default:
                    index -= 1
                    throw failure("unknown escape '\\\(Character(Unicode.Scalar(escape)))'")
                }
                runStart = index
            case 0x00 ..< 0x20:
                throw failure("a control character must be escaped inside a string")
            default:
                index += 1
            }
        }
    }

    private mutating func hex4() throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw failure("a \\u escape needs 4 hex digits") }
        var value: UInt32 = 0
        for byte in bytes[index ..< index + 4] {
            guard let digit = Self.hexDigit(byte) else { throw failure("a \\u escape needs 4 hex digits") }
            value = value << 4 | digit
        }
        index += 4
        return value
    }

    private mutating func unicodeEscape() throws -> Unicode.Scalar {
        let first = try hex4()
        if (0xDC00 ... 0xDFFF).contains(first) { throw failure("a lone low surrogate in a \\u escape") }
        if (0xD800 ... 0xDBFF).contains(first) {
            guard index + 2 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                throw failure("a high surrogate must be followed by a low surrogate escape")
            }
            index += 2
            let second = try hex4()
            guard (0xDC00 ... 0xDFFF).contains(second) else { throw failure("a high surrogate must be followed by a low surrogate escape") }
            let combined = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            guard let scalar = Unicode.Scalar(combined) else { throw failure("an invalid surrogate pair") }
            return scalar
        }
        guard let scalar = Unicode.Scalar(first) else { throw failure("an invalid \\u escape") }
        return scalar
    }

    private mutating func number() throws -> CBORValue {
        let start = index
        var isInteger = true
        if current == UInt8(ascii: "-") { index += 1 }
        func digits() -> Int {
            let from = index
            while let byte = current, (UInt8(ascii: "0") ... UInt8(ascii: "9")).contains(byte) { index += 1 }
            return index - from
        }
        let integerStart = index
        let integerDigits = digits()
        guard integerDigits > 0 else { throw failure("a number needs digits") }
        if integerDigits > 1 && bytes[integerStart] == UInt8(ascii: "0") {
            index = integerStart
            throw failure("a number must not have leading zeros")
        }
        if current == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard digits() > 0 else { throw failure("a number needs digits after '.'") }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { throw failure("a number needs digits in its exponent") }
        }
        let text = String(decoding: bytes[start ..< index], as: UTF8.self)
        if isInteger {
            if let value = Int64(text) { return value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-(value + 1))) }
            if let value = UInt64(text) { return .unsigned(value) }
        }
        guard let value = Double(text), value.isFinite else {
            index = start
            throw failure("the number \(text.count > 40 ? String(text.prefix(40)) + "…" : text) is out of range")
        }
        return .float(value)
    }

    private static func hexDigit(_ byte: UInt8) -> UInt32? {
        switch byte {
        case UInt8(ascii: "0") ... UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a") ... UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A") ... UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }
}
