/// What a name's Unicode compatibility normalisation (NFKC) holds in ASCII, without Foundation.
///
/// `SafePath` refuses a component whose NFKC form is `.` or `..`, holds `/`, `\` or a control
/// character, or starts with the temporary-file prefix: a file system or a later tool that
/// normalises names must not turn an accepted name into one of those. KVStore links
/// FoundationEssentials, which has no normalisation, so ``fold(_:)`` replaces each scalar whose NFKC
/// form contains ASCII by that form (a generated table, `CompatibilityFold+Table.swift`), and leaves
/// every other scalar as it is.
///
/// For these checks the fold is never more lenient than NFKC. The ASCII of NFKC(s) is the ASCII of the
/// fold, in the same order, except where canonical composition merges an ASCII letter with a
/// combining mark that follows it (`e` + U+0301 is `é`); the fold keeps that letter, so it can only
/// see more of a forbidden name. No composition involves `.`, `/`, `\` or a control character.
/// A test compares every scalar's fold with Foundation's NFKC.
enum CompatibilityFold {
    /// `name` with each scalar replaced by its NFKC form when that form contains ASCII.
    static func fold(_ name: String) -> String {
        if name.utf8.allSatisfy({ $0 < 0x80 }) { return name }
        var result = String.UnicodeScalarView()
        for scalar in name.unicodeScalars {
            if let form = form(of: scalar) { result.append(contentsOf: form.unicodeScalars) }
            else { result.append(scalar) }
        }
        return String(result)
    }

    /// The NFKC form of a non-ASCII scalar when it contains ASCII, otherwise `nil`.
    static func form(of scalar: Unicode.Scalar) -> String? {
        let value = scalar.value
        guard value >= 0x80 else { return nil }
        if let ascii = runValue(of: value) { return String(Unicode.Scalar(ascii)) }
        if let i = index(of: value, in: multiScalars) { return multiForms[i] }
        return nil
    }

    /// The single ASCII character that `value` normalises to, from ``runs``.
    private static func runValue(of value: UInt32) -> UInt8? {
        var low = 0, high = runs.count
        while low < high {
            let mid = (low + high) / 2
            if UInt32(truncatingIfNeeded: runs[mid] >> 24) <= value { low = mid + 1 } else { high = mid }
        }
        guard low > 0 else { return nil }
        let run = runs[low - 1]
        let first = UInt32(truncatingIfNeeded: run >> 24)
        let count = UInt32(truncatingIfNeeded: (run >> 8) & 0xFFFF)
        guard value - first < count else { return nil }
        return UInt8(truncatingIfNeeded: run) &+ UInt8(truncatingIfNeeded: value - first)
    }

    private static func index(of value: UInt32, in sorted: [UInt32]) -> Int? {
        var low = 0, high = sorted.count
        while low < high {
            let mid = (low + high) / 2
            if sorted[mid] < value { low = mid + 1 } else { high = mid }
        }
        return low < sorted.count && sorted[low] == value ? low : nil
    }
}
