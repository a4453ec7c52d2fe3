import KVStore
import Testing

/// The names of collections, defaults suites and indexes. The check goes byte by byte (issue 51: the
/// Unicode property it looked up per character was most of the cost of reading a history entry); it
/// must judge every name as the rule written with Unicode's properties does, which these compare.
@Suite struct CatalogNameTests {
    /// The rule as the check first wrote it: 1 to 200 bytes of ASCII scalars that Unicode calls
    /// alphabetic, ASCII digits, `.`, `_` and `-`.
    static func byUnicodeProperties(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 200 && name.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)
                               || scalar == "." || scalar == "_" || scalar == "-")
        }
    }

    static func name(_ scalars: [Unicode.Scalar]) -> String {
        var view = String.UnicodeScalarView()
        view.append(contentsOf: scalars)
        return String(view)
    }

    @Test func everyScalarOfTheFirstPlanesIsJudgedAsTheUnicodeRuleJudgesIt() {
        var accepted = 0
        for value in UInt32(0)...0x2FFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            for name in [Self.name([scalar]), Self.name(["a", scalar, "b"])] {
                #expect(CatalogEntry.isValidName(name) == Self.byUnicodeProperties(name), "U+\(String(value, radix: 16))")
            }
            if CatalogEntry.isValidName(Self.name([scalar])) { accepted += 1 }
        }
        // 26 + 26 letters, 10 digits, and the three marks; not U+00AA or U+00B5, alphabetic past ASCII.
        #expect(accepted == 65)
    }

    @Test func randomNamesAreJudgedAsTheUnicodeRuleJudgesThem() {
        var generator = SystemRandomNumberGenerator()
        let allowed = Array("abcxyzABCXYZ0189._-".unicodeScalars)
        let others: [Unicode.Scalar] = [" ", "/", "\0", "~", "é", "ª", "µ", "日", "\u{301}", "😀", "\u{7F}", "@", "[", "`", "{"]
        for _ in 0..<5_000 {
            let length = Int.random(in: 0...205, using: &generator)
            let scalars = (0..<length).map { _ -> Unicode.Scalar in
                Int.random(in: 0..<50, using: &generator) == 0 ? others.randomElement(using: &generator)!
                    : allowed.randomElement(using: &generator)!
            }
            let name = Self.name(scalars)
            #expect(CatalogEntry.isValidName(name) == Self.byUnicodeProperties(name), "\(name.debugDescription)")
        }
        // The edges, named.
        #expect(!CatalogEntry.isValidName(""))
        #expect(CatalogEntry.isValidName(String(repeating: "a", count: 200)))
        #expect(!CatalogEntry.isValidName(String(repeating: "a", count: 201)))
        #expect(!CatalogEntry.isValidName("caf\u{E9}") && !CatalogEntry.isValidName("cafe\u{301}"))
        #expect(CatalogEntry.isValidName("group.com.example_app-1"))
    }
}
