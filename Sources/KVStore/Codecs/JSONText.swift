/// Small helpers for writing JSON text by hand, shared by CBOR's diagnostic notation, `kvtool` and the
/// exports.
public enum JSONText {
    /// `s` as a JSON string literal (RFC 8259): quotes, backslashes and control characters escaped,
    /// everything else as it is.
    ///
    /// ```swift
    /// JSONText.quoted("a\"b\n")   // "\"a\\\"b\\n\""
    /// ```
    public static func quoted(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
