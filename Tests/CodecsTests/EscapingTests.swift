@testable import Codecs
import KVStore
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

    /// The escaper works on UTF-8 bytes; the scalar-by-scalar version it replaced is the reference,
    /// over every combination of its options and strings mixing every ASCII byte with 2-, 3- and 4-byte
    /// scalars (including C1 controls, which neither escapes).
    @Test func escapingBytesMatchesEscapingScalars() {
        var generator = SystemRandomNumberGenerator()
        let pool: [Unicode.Scalar] = (0...0x7F).compactMap(Unicode.Scalar.init) + ["é", "\u{85}", "\u{9F}", "日", "\u{2028}", "😀", "\u{10FFFF}"]
        var samples = ["", "plain", text, String(pool.map(Character.init))]
        for _ in 0..<2_000 {
            samples.append(String(String.UnicodeScalarView((0..<Int.random(in: 0...24, using: &generator)).map { _ in pool.randomElement(using: &generator)! })))
        }
        for sample in samples {
            for quoting in [false, true] {
                for shortForms in [false, true] {
                    for style in [Escaping.Style.json, .swift] {
                        #expect(Escaping.escape(sample, quoting: quoting, shortForms: shortForms, style: style)
                                == Self.reference(sample, quoting: quoting, shortForms: shortForms, style: style), "\(Array(sample.utf8))")
                    }
                }
            }
        }
    }

    static func reference(_ text: String, quoting: Bool, shortForms: Bool, style: Escaping.Style) -> String {
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
