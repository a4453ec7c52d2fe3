import Foundation
import KVStore

/// Converts stored CBOR values to JSON text for people and scripts, and JSON typed on the command
/// line to CBOR.
enum JSONBridge {
    /// JSON text for a CBOR value, as RFC 8949 §6.1 converts: byte strings become base64url without
    /// padding (or, inside tag 22 or 23, base64 or base16, as those tags ask; tag 21 is base64url), a
    /// bignum the base64url of its magnitude, with `~` before a negative one (tags 2 and 3), non-finite
    /// floats and simple values other than true, false and null become null. Dates become ISO 8601
    /// strings, UUIDs strings, decimal fractions exact JSON numbers; map entries keep their stored order.
    static func json(_ value: CBORValue) -> String {
        var out = ""
        write(value, bytesAs: .base64url, to: &out)
        return out
    }

    /// How byte strings are written: RFC 8949's expected conversions (tags 21–23).
    private enum BytesText { case base64url, base64, base16 }

    private static func text(_ bytes: [UInt8], _ encoding: BytesText) -> String {
        switch encoding {
        case .base64url: Base64.url(bytes)
        case .base64: Base64.standard(bytes)
        case .base16: Hex.encode(bytes).uppercased()
        }
    }

    private static func write(_ value: CBORValue, bytesAs encoding: BytesText, to out: inout String) {
        switch value {
        case .unsigned(let n): out += String(n)
        case .negative(let n): out += n == .max ? "-18446744073709551616" : "-\(n + 1)"
        case .float(let d): out += d.isFinite ? (d == d.rounded() && abs(d) < 1e15 ? String(format: "%.1f", d) : "\(d)") : "null"
        case .text(let s): out += JSONText.quoted(s)
        case .bytes(let b): out += JSONText.quoted(text(b, encoding))
        case .bool(let b): out += b ? "true" : "false"
        case .null, .undefined, .simple: out += "null"
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                write(item, bytesAs: encoding, to: &out)
            }
            out += "]"
        case .map(let entries):
            out += "{"
            for (i, entry) in entries.enumerated() {
                if i > 0 { out += "," }
                switch entry.key {
                case .text(let s): out += JSONText.quoted(s)
                default: out += JSONText.quoted(json(entry.key))
                }
                out += ":"
                write(entry.value, bytesAs: encoding, to: &out)
            }
            out += "}"
        case .tagged(let tag, let content):
            switch (tag, content) {
            case (CBORTag.positiveBignum, .bytes(let magnitude)):
                out += JSONText.quoted(Base64.url(magnitude))
            case (CBORTag.negativeBignum, .bytes(let magnitude)):
                out += JSONText.quoted("~" + Base64.url(magnitude))
            case (21, _): write(content, bytesAs: .base64url, to: &out)
            case (22, _): write(content, bytesAs: .base64, to: &out)
            case (23, _): write(content, bytesAs: .base16, to: &out)
            case (CBORTag.epochDate, _), (CBORTag.referenceDate, _), (CBORTag.uuid, _), (CBORTag.decimalFraction, _):
                if let text = try? special(value) {
                    out += tag == CBORTag.decimalFraction ? text : JSONText.quoted(text)
                } else {
                    write(content, bytesAs: encoding, to: &out)
                }
            default:
                write(content, bytesAs: encoding, to: &out)
            }
        }
    }

    private static func special(_ value: CBORValue) throws -> String {
        guard case .tagged(let tag, _) = value else { return "" }
        let bytes = value.encoded()
        switch tag {
        case CBORTag.uuid: return try CBORDecoder().decode(UUID.self, from: bytes).uuidString
        case CBORTag.decimalFraction: return "\(try CBORDecoder().decode(Decimal.self, from: bytes))"
        default:
            let date = try CBORDecoder().decode(Date.self, from: bytes)
            return date.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true))
        }
    }

    /// Parses JSON text typed by people (strict RFC 8259, as dumps are read: duplicate keys refused,
    /// errors naming the column) into CBOR: integers stay integers, other numbers become floats,
    /// object members are sorted by key. A value the store could not read back (nested deeper than
    /// CBOR's depth limit) is refused.
    static func cbor(fromJSON text: String) throws -> CBORValue {
        let bytes = Array(text.utf8)
        var parser = JSONParser(bytes, range: 0 ..< bytes.count, firstLine: 1)
        let node: JSONNode
        do throws(JSONParser.SyntaxError) {
            node = try parser.parseValue()
            parser.skipWhitespace()
            guard parser.isAtEnd else { throw parser.unexpected("the end of the input") }
        } catch {
            let place = error.line > 1 ? "line \(error.line), column \(error.column)" : "column \(error.column)"
            throw CLIError(.badInput, "invalid JSON at \(place): \(error.message)")
        }
        let value: CBORValue
        do {
            value = try node.cbor(depth: 0)
        } catch let error as JSONNode.ConversionError {
            throw CLIError(.badInput, "invalid JSON: \(error.message)")
        }
        do {
            _ = try CBORValue.decode(value.encoded())
        } catch {
            throw CLIError(.badInput, "the value cannot be stored: \(error)")
        }
        return value
    }
}
