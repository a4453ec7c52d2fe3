/// A parsed JSON value (``JSONParser``) with the line it starts on. Numbers keep their text, so that integers and
/// floats convert exactly; object members keep their order.
package struct JSONNode: Sendable {
    package indirect enum Kind: Sendable {
        case null
        case bool(Bool)
        case number(String)
        case string(String)
        case array([JSONNode])
        case object([(key: String, value: JSONNode)])
    }

    package var line: Int
    package var kind: Kind

    package init(line: Int, kind: Kind) { (self.line, self.kind) = (line, kind) }

    /// Compact JSON text for the node.
    package var jsonText: String {
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

    package var typeName: String {
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

extension JSONNode.Kind {
    package var isNull: Bool { if case .null = self { return true } else { return false } }
    package var isNumber: Bool { if case .number = self { return true } else { return false } }
}
