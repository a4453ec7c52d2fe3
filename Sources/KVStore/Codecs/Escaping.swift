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
    package static func escape(_ text: String, quoting: Bool, shortForms: Bool, style: Style) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"" where quoting: out += "\\\""
            case "\\" where quoting: out += "\\\\"
            case "\n" where shortForms: out += "\\n"
            case "\r" where shortForms: out += "\\r"
            case "\t" where shortForms: out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16)
                switch style {
                case .json: out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                case .swift: out += "\\u{" + hex + "}"
                }
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}

package extension StringProtocol {
    /// The text with each line feed replaced by a space, for one-line error messages that keep the
    /// rest of a message (``Escaping`` escapes instead).
    var singleLine: String {
        String(decoding: utf8.map { $0 == 0x0A ? 0x20 : $0 }, as: UTF8.self)
    }
}
