#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

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
/// (UTF-8) and control characters are escaped. Numbers are exact (``DecimalText``).
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
    /// never does.
    public var lineWidth: Int
    /// Whether the text ends with a line feed. Default `true`.
    public var trailingNewline: Bool

    public init(layout: Layout = .pretty, indent: Int = 2, lineWidth: Int = 80, trailingNewline: Bool = true) {
        self.layout = layout
        self.indent = max(0, indent)
        self.lineWidth = lineWidth
        self.trailingNewline = trailingNewline
    }

    /// The JSON text of `value`.
    ///
    /// - Throws: ``ExportError/notANumber(path:)`` for a NaN number, and
    ///   ``ExportError/duplicateKey(_:path:)`` for an object with a repeated key; each names the path
    ///   (such as `$.billingEvents[3].amount`).
    public func render(_ value: JSONValue) throws(ExportError) -> String {
        var out = ""
        switch layout {
        case .compact: try Self.writeInline(value, path: "$", separators: false, into: &out)
        case .pretty: try writePretty(value, path: "$", depth: 0, column: 0, into: &out)
        }
        if trailingNewline { out += "\n" }
        return out
    }

    /// The bytes of ``render(_:)`` as UTF-8.
    public func data(_ value: JSONValue) throws(ExportError) -> Data {
        Data(try render(value).utf8)
    }

    // MARK: - Layout

    /// Writes `value` whose first character lands at `column` of a line indented `depth` levels.
    private func writePretty(_ value: JSONValue, path: String, depth: Int, column: Int, into out: inout String) throws(ExportError) {
        switch value {
        case .array(let elements):
            if elements.isEmpty { out += "[]"; return }
            if try fitsInline(value, path: path, column: column, into: &out) { return }
            let inner = String(repeating: " ", count: (depth + 1) * indent)
            out += "[\n"
            for (i, element) in elements.enumerated() {
                out += inner
                try writePretty(element, path: "\(path)[\(i)]", depth: depth + 1, column: inner.count, into: &out)
                out += i + 1 < elements.count ? ",\n" : "\n"
            }
            out += String(repeating: " ", count: depth * indent) + "]"
        case .object(let members):
            if members.isEmpty { out += "{}"; return }
            try Self.checkUnique(members, path: path)
            if try fitsInline(value, path: path, column: column, into: &out) { return }
            let inner = String(repeating: " ", count: (depth + 1) * indent)
            out += "{\n"
            for (i, member) in members.enumerated() {
                let key = JSONText.quoted(member.key) + ": "
                out += inner + key
                try writePretty(member.value, path: Self.memberPath(path, member.key), depth: depth + 1,
                                column: inner.count + key.count, into: &out)
                out += i + 1 < members.count ? ",\n" : "\n"
            }
            out += String(repeating: " ", count: depth * indent) + "}"
        default:
            try Self.writeInline(value, path: path, separators: true, into: &out)
        }
    }

    /// Appends the one-line form of a container of scalars and returns `true` when it fits.
    private func fitsInline(_ value: JSONValue, path: String, column: Int, into out: inout String) throws(ExportError) -> Bool {
        let members: [JSONValue] = switch value {
        case .array(let elements): elements
        case .object(let members): members.map(\.value)
        default: []
        }
        guard lineWidth > 0, members.allSatisfy(\.isScalar) else { return false }
        var line = ""
        try Self.writeInline(value, path: path, separators: true, into: &line)
        // The trailing "," the line may still get counts too.
        guard column + line.count + 1 <= lineWidth else { return false }
        out += line
        return true
    }

    private static func writeInline(_ value: JSONValue, path: String, separators: Bool, into out: inout String) throws(ExportError) {
        switch value {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n): out += try DecimalText.exact(n, path: path)
        case .string(let s): out += JSONText.quoted(s)
        case .array(let elements):
            out += "["
            for (i, element) in elements.enumerated() {
                if i > 0 { out += separators ? ", " : "," }
                try writeInline(element, path: "\(path)[\(i)]", separators: separators, into: &out)
            }
            out += "]"
        case .object(let members):
            try checkUnique(members, path: path)
            out += "{"
            for (i, member) in members.enumerated() {
                if i > 0 { out += separators ? ", " : "," }
                out += JSONText.quoted(member.key) + (separators ? ": " : ":")
                try writeInline(member.value, path: memberPath(path, member.key), separators: separators, into: &out)
            }
            out += "}"
        }
    }

    private static func checkUnique(_ members: [JSONValue.Member], path: String) throws(ExportError) {
        var seen = Set<String>()
        for member in members where !seen.insert(member.key).inserted {
            throw .duplicateKey(member.key, path: path)
        }
    }

    private static func memberPath(_ path: String, _ key: String) -> String {
        let plain = !key.isEmpty && key.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_"
        }
        return plain ? "\(path).\(key)" : "\(path)[\(JSONText.quoted(key))]"
    }
}
