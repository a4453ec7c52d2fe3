/// The one escaper of text shown to people or written as JSON: quotes and backslashes (when quoting),
/// then control characters, which never reach a message or a document raw.
///
/// ```swift
/// Escaping.escape("a\"b\n", quoting: true, shortForms: true, style: .json)    // a\"b\n
/// Escaping.escape("a\u{1}", quoting: false, shortForms: false, style: .swift) // a\u{1}
/// ```
package enum Escaping {
    /// How a control character without a short form is written.
    package enum Style {
        /// `\u00XX`, as JSON requires.
        case json
        /// `\u{x}`, as Swift writes it: for messages.
        case swift
    }

    /// `text` with control characters escaped, and with `quoting`, `"` and `\` too. `shortForms`
    /// writes newline, carriage return and tab as `\n`, `\r`, `\t`.
    ///
    /// Works on the UTF-8 bytes: every byte it escapes is ASCII, which never occurs inside a
    /// multi-byte sequence, and text with nothing to escape (the common case) is returned as it is.
    /// (Measured: escaping scalar by scalar was a fifth of `kvtool serve`'s time on a page of records.)
    package static func escape(_ text: String, quoting: Bool, shortForms: Bool, style: Style) -> String {
        let utf8 = text.utf8
        guard utf8.contains(where: { needsEscape($0, quoting: quoting) }) else { return text }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count + 16)
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "\"") where quoting: out += [UInt8(ascii: "\\"), byte]
            case UInt8(ascii: "\\") where quoting: out += [UInt8(ascii: "\\"), byte]
            case UInt8(ascii: "\n") where shortForms: out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case UInt8(ascii: "\r") where shortForms: out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case UInt8(ascii: "\t") where shortForms: out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case _ where byte < 0x20 || byte == 0x7F:
                let hex = Array(String(byte, radix: 16).utf8)
                switch style {
                case .json: out += Array("\\u".utf8) + Array(repeating: UInt8(ascii: "0"), count: 4 - hex.count) + hex
                case .swift: out += Array("\\u{".utf8) + hex + [UInt8(ascii: "}")]
                }
            default:
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `text` quoted for an error message, control characters and NULs kept visible, cut at 120 bytes:
    /// what `KVStoreError.quote` returns (here, so that the codecs' own errors, such as
    /// ``ExportError``, quote names the same way without knowing the store).
    package static func messageQuote(_ text: String) -> String {
        var out = "\"" + escape(text, quoting: true, shortForms: false, style: .swift)
        if out.utf8.count > 120 { out = String(out.prefix(117)) + "…" }
        return out + "\""
    }

    @inline(__always)
    private static func needsEscape(_ byte: UInt8, quoting: Bool) -> Bool {
        byte < 0x20 || byte == 0x7F || (quoting && (byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")))
    }
}

package extension StringProtocol {
    /// The text with each line feed replaced by a space, for one-line error messages that keep the
    /// rest of a message (``Escaping`` escapes instead).
    var singleLine: String {
        String(decoding: utf8.map { $0 == 0x0A ? 0x20 : $0 }, as: UTF8.self)
    }
}
