import Foundation
@testable import KVStore
import Testing

/// KVStore links FoundationEssentials, which cannot normalise; `SafePath` relies on a generated table
/// of the scalars whose NFKC form holds ASCII. These tests hold that table to Foundation's NFKC
/// (ICU), which the tests link.
@Suite("Compatibility fold against Foundation's NFKC")
struct CompatibilityFoldTests {
    /// Every scalar: where Foundation's NFKC form contains ASCII, the fold gives exactly that form, and
    /// where it does not, the fold leaves the scalar alone.
    @Test func everyScalarFoldsAsFoundationNormalises() {
        var checked = 0, withASCII = 0
        var mismatches: [String] = []
        for value in UInt32(0x80)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            checked += 1
            let nfkc = String(Character(scalar)).precomposedStringWithCompatibilityMapping
            let expected: String? = nfkc.unicodeScalars.contains(where: \.isASCII) && !nfkc.unicodeScalars.elementsEqual([scalar]) ? nfkc : nil
            if expected != nil { withASCII += 1 }
            let folded = CompatibilityFold.form(of: scalar)
            let same = folded.map { Array($0.unicodeScalars) } == expected.map { Array($0.unicodeScalars) }
            if !same, mismatches.count < 20 {
                mismatches.append("U+\(String(value, radix: 16, uppercase: true)): fold \(folded.map { Array($0.unicodeScalars) } as Any), NFKC \(expected.map { Array($0.unicodeScalars) } as Any)")
            }
        }
        print("compatibility fold: \(checked) scalars checked, \(withASCII) with ASCII in their NFKC form")
        #expect(mismatches.isEmpty, "\(mismatches.joined(separator: "; "))")
        #expect(withASCII > 1_500)
    }

    /// Whole names: every name that Foundation's NFKC turns into something SafePath forbids is refused.
    @Test func namesThatNormaliseToForbiddenOnesAreRefused() throws {
        let names = ["\u{2025}", "\u{FF0E}\u{FF0E}", "\u{FE52}", "a\u{FF0F}b", "x\u{FF3C}y", "\u{2100}",
                     "\u{FF0E}kvtmp-x", ".\u{FF4B}vtmp-1", "\u{FE30}"]
        for name in names {
            let nfkc = name.precomposedStringWithCompatibilityMapping
            let forbidden = nfkc == "." || nfkc == ".." || nfkc.utf8.contains(0x2F) || nfkc.utf8.contains(0x5C)
                || nfkc.utf8.starts(with: TemporaryFileName.prefix.utf8)
            #expect(forbidden, "\(Array(name.unicodeScalars)) normalises to \(nfkc)")
            #expect(SafePath.componentProblem(name) != nil, "\(Array(name.unicodeScalars)) was accepted")
        }
        #expect(SafePath.componentProblem("caf\u{E9}") == nil)
        #expect(SafePath.componentProblem("\u{30C8}\u{30EC}\u{30FC}\u{30CA}\u{30FC}.png") == nil)
        #expect(CompatibilityFold.fold("\u{FF21}b\u{2474}") == "Ab(1)")
        #expect(CompatibilityFold.fold("plain.txt") == "plain.txt")
    }
}
