/// A validated App Group identifier such as `group.com.example.app`.
///
/// An identifier names one container directory (`<root>/<identifier>/`), so it is checked strictly
/// before it is ever used to build a path: it must be `group.` followed by at least two reverse-DNS
/// labels separated by `.`. A label is 1–63 ASCII letters, digits and `-`, and does not start or end
/// with `-`. The whole identifier is at most 255 bytes. Anything else — path separators, `..`,
/// whitespace, control characters, NULs, and every non-ASCII character (including look-alikes such as
/// the fullwidth full stop U+FF0E or the division slash U+2215) — is rejected.
///
/// ```swift
/// let group = try GroupIdentifier("group.com.example.app")
/// print(group.rawValue)              // group.com.example.app
/// _ = try GroupIdentifier("../etc")  // throws KVStoreError.invalidGroupIdentifier
/// ```
///
/// Validation is purely lexical: creating a `GroupIdentifier` never touches the file system.
///
/// Thread safety: the value is immutable and `Sendable`; share it freely.
public struct GroupIdentifier: Hashable, Sendable, CustomStringConvertible {
    /// The identifier exactly as it was given, for example `group.com.example.app`.
    public let rawValue: String

    /// The prefix every App Group identifier starts with.
    public static let prefix = "group."

    /// The longest identifier accepted, in UTF-8 bytes.
    public static let maxLength = 255

    /// The longest label accepted, in bytes (the DNS limit).
    public static let maxLabelLength = 63

    /// Validates `raw` and wraps it.
    ///
    /// ```swift
    /// let group = try GroupIdentifier("group.com.yourcompany.VirtualTrainer")
    /// ```
    ///
    /// - Parameter raw: The identifier, such as `group.com.example.app`. It is not trimmed or
    ///   normalised; it must already be valid.
    /// - Throws: ``KVStoreError/invalidGroupIdentifier(_:reason:)`` with a reason that names the
    ///   problem (for example `contains '/'` or `label 'a-' ends with '-'`). Nothing on disk is
    ///   consulted or changed.
    public init(_ raw: String) throws {
        if let reason = Self.problem(with: raw) {
            throw KVStoreError.invalidGroupIdentifier(raw, reason: reason)
        }
        rawValue = raw
    }

    /// The identifier itself, so that `"\(group)"` can be used as a directory name.
    public var description: String { rawValue }

    /// Returns why `raw` is not a valid identifier, or `nil` when it is.
    static func problem(with raw: String) -> String? {
        if raw.isEmpty { return "the identifier is empty" }
        let byteCount = raw.utf8.count
        if byteCount > maxLength {
            return "the identifier is \(byteCount) bytes, over the \(maxLength)-byte limit"
        }
        for scalar in raw.unicodeScalars {
            switch scalar {
            case "\u{0}": return "contains a NUL character"
            case "/": return "contains '/', a path separator"
            case "\\": return "contains '\\', a path separator"
            case _ where scalar.properties.isWhitespace:
                return "contains whitespace (U+\(hex(scalar)))"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                return "contains control character U+\(hex(scalar))"
            case _ where !scalar.isASCII:
                return "contains non-ASCII character U+\(hex(scalar))" + lookAlikeNote(scalar)
            default: continue
            }
        }
        guard raw.hasPrefix(prefix) else {
            return "does not start with '\(prefix)'"
        }
        if raw.contains("..") { return "contains '..'" }
        let rest = raw.dropFirst(prefix.count)
        if rest.isEmpty { return "has no labels after '\(prefix)'" }
        let labels = rest.split(separator: ".", omittingEmptySubsequences: false)
        for label in labels {
            if label.isEmpty {
                return "has an empty label (a leading or trailing '.')"
            }
            if label.utf8.count > maxLabelLength {
                return "label '\(label.prefix(20))…' is \(label.utf8.count) bytes, over the \(maxLabelLength)-byte limit"
            }
            if let bad = label.unicodeScalars.first(where: { !isLabelCharacter($0) }) {
                return "label '\(label)' contains '\(bad)'; only ASCII letters, digits and '-' are allowed"
            }
            if label.hasPrefix("-") { return "label '\(label)' starts with '-'" }
            if label.hasSuffix("-") { return "label '\(label)' ends with '-'" }
        }
        if labels.count < 2 {
            return "needs at least two labels after '\(prefix)' (for example group.com.example), found only '\(rest)'"
        }
        return nil
    }

    private static func isLabelCharacter(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "a"..."z", "A"..."Z", "0"..."9", "-": true
        default: false
        }
    }

    private static func hex(_ scalar: Unicode.Scalar) -> String {
        let digits = String(scalar.value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    private static func lookAlikeNote(_ scalar: Unicode.Scalar) -> String {
        if let ascii = SafePath.lookAlike(of: scalar) { return " (a look-alike of '\(ascii)')" }
        return ""
    }
}
