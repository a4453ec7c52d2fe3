#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Writes a ``JSONValue`` as JSON text (RFC 8259), keeping the key order of its objects.
///
/// ```swift
/// let text = try JSONWriter().render(["schemaVersion": "1.0", "historyRange": ["pastMonths": 6]])
/// // {
/// //   "schemaVersion": "1.0",
/// //   "historyRange": {"pastMonths": 6}
/// // }
/// ```
///
/// The pretty layout indents by ``indent`` spaces and puts `": "` after keys. An array or object
/// whose members are all scalars is written on one line (`{"type": "monthly", "interval": 1}`) when
/// that line, indentation and key included, is at most ``lineWidth`` characters; otherwise each
/// member gets its own line. Empty arrays and objects are `[]` and `{}`. The compact layout has no
/// whitespace at all. Strings go through `JSONText.quoted(_:)`, so non-ASCII text stays as it is
/// (UTF-8) and control characters are escaped. Numbers are exact (``DecimalText``); floats are the
/// shortest text that reads back as the same `Double`.
///
/// A writer is a plain value: `Sendable`, usable from any thread.
public struct JSONWriter: Sendable, Hashable {
    /// Pretty (indented, on several lines) or compact (no whitespace).
    public enum Layout: Sendable, Hashable {
        case pretty
        case compact
    }

    public var layout: Layout
    /// Spaces per level in the pretty layout. Default 2.
    public var indent: Int
    /// The longest line on which the pretty layout puts a container of scalars. Default 80; `0`
    /// never does, so that every non-empty container gets a line per member.
    public var lineWidth: Int
    /// Whether the text ends with a line feed. Default `true`.
    public var trailingNewline: Bool
    /// Whether an object with a repeated key is refused (the default). CBOR shown as JSON turns it
    /// off: two map keys of different types may have the same JSON text (`1` and `"1"`), and both are
    /// shown.
    public var requiresUniqueKeys: Bool
    /// Whether each object's members are written in the order of their keys rather than the order
    /// given: case ignored first, then lower case first, as Foundation's `.sortedKeys` orders ASCII
    /// keys (it also compares runs of digits as numbers, and other letters by the locale; this writer
    /// compares them as `String`s). Default `false`. `kvtool`'s `--json` output sorts, as it always has.
    public var sortsKeys: Bool

    public init(layout: Layout = .pretty, indent: Int = 2, lineWidth: Int = 80, trailingNewline: Bool = true,
                requiresUniqueKeys: Bool = true, sortsKeys: Bool = false) {
        self.layout = layout
        self.indent = max(0, indent)
        self.lineWidth = lineWidth
        self.trailingNewline = trailingNewline
        self.requiresUniqueKeys = requiresUniqueKeys
        self.sortsKeys = sortsKeys
    }

    /// One line, no whitespace and no trailing line feed: JSON Lines, and `kvtool`'s `--json` output.
    public static let compact = JSONWriter(layout: .compact, trailingNewline: false)

    /// The JSON text of `value`.
    ///
    /// - Throws: ``ExportError/notANumber(path:)`` for a NaN number or a non-finite float, and
    ///   ``ExportError/duplicateKey(_:path:)`` for an object with a repeated key; each names the path
    ///   (such as `$.billingEvents[3].amount`).
    public func render(_ value: JSONValue) throws(ExportError) -> String {
        var renderer = Renderer(writer: self)
        switch layout {
        case .compact: try renderer.writeInline(value, separators: false)
        case .pretty: try renderer.writePretty(value, depth: 0, column: 0)
        }
        if trailingNewline { renderer.out += "\n" }
        return renderer.out
    }

    /// The bytes of ``render(_:)`` as UTF-8.
    public func data(_ value: JSONValue) throws(ExportError) -> Data {
        Data(try render(value).utf8)
    }

    /// The text of a float: an integral value below 10^15 as `3.0`, others as Swift's shortest
    /// round-tripping text (`1.5`, `1e+16`).
    static func floatText(_ d: Double) -> String {
        if d == d.rounded(), abs(d) < 1e15 {
            return (d.sign == .minus ? "-" : "") + String(Int64(abs(d))) + ".0"
        }
        return d.description
    }
}

/// One rendering: the text so far and the path to the value being written, which only an error
/// spells out (building it as text for every member cost more than the rest of a page's layout).
private struct Renderer {
    enum Step {
        case index(Int)
        case key(String)
    }

    let writer: JSONWriter
    var out = ""
    var steps: [Step] = []

    init(writer: JSONWriter) {
        self.writer = writer
    }

    /// The path of the value being written, as `$.billingEvents[3].amount`.
    var path: String {
        var text = "$"
        for step in steps {
            switch step {
            case .index(let i): text += "[\(i)]"
            case .key(let key):
                let plain = !key.isEmpty && key.unicodeScalars.allSatisfy {
                    ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_"
                }
                text += plain ? ".\(key)" : "[\(JSONText.quoted(key))]"
            }
        }
        return text
    }

    /// Writes `value` whose first character lands at `column` of a line indented `depth` levels.
    mutating func writePretty(_ value: JSONValue, depth: Int, column: Int) throws(ExportError) {
        switch value {
        case .array(let elements):
            if elements.isEmpty { out += "[]"; return }
            if try fitsInline(value, column: column) { return }
            let inner = String(repeating: " ", count: (depth + 1) * writer.indent)
            out += "[\n"
            for (i, element) in elements.enumerated() {
                out += inner
                steps.append(.index(i))
                try writePretty(element, depth: depth + 1, column: inner.count)
                steps.removeLast()
                out += i + 1 < elements.count ? ",\n" : "\n"
            }
            out += String(repeating: " ", count: depth * writer.indent) + "]"
        case .object(let given):
            if given.isEmpty { out += "{}"; return }
            let members = ordered(given)
            try checkUnique(members)
            if try fitsInline(value, column: column) { return }
            let inner = String(repeating: " ", count: (depth + 1) * writer.indent)
            out += "{\n"
            for (i, member) in members.enumerated() {
                let key = JSONText.quoted(member.key) + ": "
                out += inner + key
                steps.append(.key(member.key))
                try writePretty(member.value, depth: depth + 1, column: inner.count + key.count)
                steps.removeLast()
                out += i + 1 < members.count ? ",\n" : "\n"
            }
            out += String(repeating: " ", count: depth * writer.indent) + "}"
        default:
            try writeInline(value, separators: true)
        }
    }

    /// Appends the one-line form of a container of scalars and returns `true` when it fits.
    private mutating func fitsInline(_ value: JSONValue, column: Int) throws(ExportError) -> Bool {
        guard writer.lineWidth > 0 else { return false }
        let allScalars = switch value {
        case .array(let elements): elements.allSatisfy(\.isScalar)
        case .object(let members): members.allSatisfy(\.value.isScalar)
        default: false
        }
        guard allScalars else { return false }
        let before = out
        out = ""
        try writeInline(value, separators: true)
        let line = out
        out = before
        // The trailing "," the line may still get counts too.
        guard column + line.count + 1 <= writer.lineWidth else { return false }
        out += line
        return true
    }

    mutating func writeInline(_ value: JSONValue, separators: Bool) throws(ExportError) {
        switch value {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n):
            guard !n.isNaN else { throw .notANumber(path: path) }
            out += try DecimalText.exact(n)
        case .float(let d):
            guard d.isFinite else { throw .notANumber(path: path) }
            out += JSONWriter.floatText(d)
        case .string(let s): out += JSONText.quoted(s)
        case .array(let elements):
            out += "["
            for (i, element) in elements.enumerated() {
                if i > 0 { out += separators ? ", " : "," }
                steps.append(.index(i))
                try writeInline(element, separators: separators)
                steps.removeLast()
            }
            out += "]"
        case .object(let given):
            let members = ordered(given)
            try checkUnique(members)
            out += "{"
            for (i, member) in members.enumerated() {
                if i > 0 { out += separators ? ", " : "," }
                out += JSONText.quoted(member.key) + (separators ? ": " : ":")
                steps.append(.key(member.key))
                try writeInline(member.value, separators: separators)
                steps.removeLast()
            }
            out += "}"
        }
    }

    private func ordered(_ members: [JSONValue.Member]) -> [JSONValue.Member] {
        guard writer.sortsKeys else { return members }
        return members.map { ($0.key.lowercased(), $0) }
            .sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1.key > $1.1.key }
            .map(\.1)
    }

    private func checkUnique(_ members: [JSONValue.Member]) throws(ExportError) {
        guard writer.requiresUniqueKeys, members.count > 1 else { return }
        if members.count <= 8 {
            for i in 1 ..< members.count where members[..<i].contains(where: { $0.key == members[i].key }) {
                throw .duplicateKey(members[i].key, path: path)
            }
            return
        }
        var seen = Set<String>()
        for member in members where !seen.insert(member.key).inserted {
            throw .duplicateKey(member.key, path: path)
        }
    }
}
