#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Exact decimal text for money in exports: plain digits, a `.` only when there is a fraction, never
/// an exponent, so that `1200` stays `1200` and `12.50` becomes `12.5`.
///
/// ```swift
/// try DecimalText.exact(Decimal(string: "1200.00")!)   // "1200"
/// try DecimalText.exact(Decimal(string: "-12.50")!)    // "-12.5"
/// ```
///
/// The text is valid as a JSON number and parses back to the same `Decimal`.
public enum DecimalText {
    /// The exact text of `value`.
    ///
    /// - Throws: ``ExportError/notANumber(path:)`` (with `path`) when `value` is NaN.
    public static func exact(_ value: Decimal, path: String = "$") throws(ExportError) -> String {
        if value.isNaN { throw .notANumber(path: path) }
        // Foundation prints a Decimal in plain positional notation; normalise what it may vary on.
        var text = value.description
        var negative = false
        if text.hasPrefix("-") {
            negative = true
            text.removeFirst()
        }
        if text.contains(".") {
            while text.hasSuffix("0") { text.removeLast() }
            if text.hasSuffix(".") { text.removeLast() }
        }
        if text.hasPrefix(".") { text = "0" + text }
        if text.isEmpty || text.allSatisfy({ $0 == "0" || $0 == "." }) { return "0" }
        return negative ? "-" + text : text
    }
}
