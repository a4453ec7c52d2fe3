@testable import KVStore
import Testing

/// The one escaper behind JSON strings, error-message quotes and CBOR's one-line errors: each caller's
/// output is pinned, byte for byte, so that merging them changed no message and no document.
@Suite struct EscapingTests {
    let text = "a\"b\\c\nd\re\tf\u{1}g\u{7F}h é"

    @Test func jsonStringsUseShortFormsAndFourDigitEscapes() {
        #expect(JSONText.quoted(text) == #""a\"b\\c\nd\re\tf\u0001g\u007fh é""#)
    }

    @Test func messageQuotesEscapeEveryControlCharacterTheSwiftWayAndCutAt120Bytes() {
        #expect(KVStoreError.quote(text) == #""a\"b\\c\u{a}d\u{d}e\u{9}f\u{1}g\u{7f}h é""#)
        let long = KVStoreError.quote(String(repeating: "x", count: 200))
        #expect(long == "\"" + String(repeating: "x", count: 116) + "…\"")
    }

    @Test func cborErrorsStayOnOneLineWithoutQuoting() {
        #expect(CBORError.oneLine(text) == #"a"b\c\nd\re\tf\u{1}g\u{7f}h é"#)
        #expect(CBORError.oneLine("plain") == "plain")
    }
}
