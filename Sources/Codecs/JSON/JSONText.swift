/// The one JSON string escaper, behind ``JSONWriter`` (which writes every JSON document of the
/// package), CBOR's diagnostic notation and the quotes of error messages.
package enum JSONText {
    /// `s` as a JSON string literal (RFC 8259): quotes, backslashes and control characters escaped,
    /// everything else as it is.
    ///
    /// ```swift
    /// JSONText.quoted("a\"b\n")   // "\"a\\\"b\\n\""
    /// ```
    package static func quoted(_ s: String) -> String {
        "\"" + Escaping.escape(s, quoting: true, shortForms: true, style: .json) + "\""
    }
}
