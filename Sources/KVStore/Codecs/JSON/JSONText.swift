/// Small helpers for writing JSON text by hand, shared by CBOR's diagnostic notation, `kvtool` and the
/// exports: the one place that escapes strings and joins compact objects and arrays. (SyncKit's
/// `JSONWriter` lays out whole documents, pretty or compact, on top of ``quoted(_:)``.)
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

    /// A compact JSON object (no whitespace) of members whose values are JSON text already, in the
    /// order given.
    ///
    /// ```swift
    /// JSONText.object([("key", JSONText.quoted("a")), ("value", "1")])   // {"key":"a","value":1}
    /// ```
    package static func object(_ members: some Sequence<(String, String)>) -> String {
        "{" + members.map { quoted($0.0) + ":" + $0.1 }.joined(separator: ",") + "}"
    }

    /// A compact JSON array (no whitespace) of elements that are JSON text already.
    ///
    /// ```swift
    /// JSONText.array(["1", JSONText.quoted("a")])   // [1,"a"]
    /// ```
    package static func array(_ elements: some Sequence<String>) -> String {
        "[" + elements.joined(separator: ",") + "]"
    }
}
