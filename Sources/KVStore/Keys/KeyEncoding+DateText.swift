#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Date keys as text that reads back as the same key.
///
/// A date key holds the exact bits of `timeIntervalSinceReferenceDate`, and dates made by
/// `Date()` carry microseconds (or finer). Text rounded to the millisecond named a different key:
/// `kvtool get` and `delete` answered "no value" for a key `scan` had just printed. So a date key is
/// written with the fewest fraction digits (3 to 17) whose text reads back as exactly the same
/// bits, and read back in one correctly rounded step (an integral count of seconds since the
/// reference date and its decimal fraction, parsed together by `Double(String)`). A date no ISO 8601
/// text with a four-digit year can name exactly (before year 1 or after 9999, within a fraction of
/// a second of 2001-01-01 with more than 17 digits, infinite or NaN) is written as its eight key
/// bytes in hex, `0x…`, which ``KeyEncoding/parse(_:)`` also reads.
extension KeyEncoding {
    /// Seconds from 1970-01-01 to 2001-01-01, the reference date.
    private static let referenceOffset: Int64 = 978_307_200

    static func dateKeyText(_ date: Date) -> String {
        var key: [UInt8] = []
        date.encodeKey(into: &key, terminal: true)
        let seconds = date.timeIntervalSinceReferenceDate
        if seconds.isFinite, abs(seconds) < 1e14 {
            let whole = seconds.rounded(.down)
            let fraction = seconds - whole   // exact: both are doubles of the same binade or finer
            var scale: Double = 100
            for digits in 3...17 {
                scale *= 10
                var wholeSeconds = Int64(whole)
                var scaled = (fraction * scale).rounded()
                if scaled >= scale {
                    wholeSeconds += 1
                    scaled -= scale
                }
                guard let text = iso8601(sinceReference: wholeSeconds, fraction: UInt64(scaled), digits: digits) else { break }
                if let back = exactDateKey(text), back == key { return text }
            }
        }
        return "0x" + Hex.encode(key)
    }

    /// `YYYY-MM-DDTHH:MM:SS.fffZ` for whole seconds since the reference date and a fraction of
    /// `digits` digits, or `nil` outside years 1 to 9999.
    private static func iso8601(sinceReference seconds: Int64, fraction: UInt64, digits: Int) -> String? {
        let (unix, overflow) = seconds.addingReportingOverflow(referenceOffset)
        guard !overflow else { return nil }
        let days = unix >= 0 ? unix / 86_400 : -((-unix + 86_399) / 86_400)
        let inDay = Int(unix - days * 86_400)
        guard abs(days) < 4_000_000 else { return nil }
        let (year, month, day) = LogicalDay.civilFromDays(Int(days))
        guard (1...9999).contains(year) else { return nil }
        func pad(_ value: some BinaryInteger, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + "T" + pad(inDay / 3600, 2) + ":"
            + pad(inDay / 60 % 60, 2) + ":" + pad(inDay % 60, 2) + "." + pad(fraction, digits) + "Z"
    }

    /// The key of `YYYY-MM-DDTHH:MM:SS[.f…]Z` (UTC, `T` or `t`, `Z` or `z`), or of `0x` and eight
    /// key bytes in hex, converted exactly; `nil` for any other text.
    static func exactDateKey(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        if utf8.count == 18, utf8[0] == 0x30, utf8[1] == 0x78 || utf8[1] == 0x58 {
            return Hex.decode(utf8[2...])
        }
        var i = 0
        func number(_ count: Int) -> Int? {
            guard utf8.count - i >= count else { return nil }
            var value = 0
            for _ in 0..<count {
                let c = utf8[i]
                guard c >= 0x30 && c <= 0x39 else { return nil }
                value = value * 10 + Int(c - 0x30)
                i += 1
            }
            return value
        }
        func expect(_ options: UInt8...) -> Bool {
            guard i < utf8.count, options.contains(utf8[i]) else { return false }
            i += 1
            return true
        }
        guard let year = number(4), expect(0x2D), let month = number(2), expect(0x2D), let day = number(2),
              expect(0x54, 0x74), let hour = number(2), expect(0x3A), let minute = number(2), expect(0x3A),
              let second = number(2), year >= 1, (1...12).contains(month), hour <= 23, minute <= 59, second <= 59,
              let dayNumber = LogicalDay(year: year, month: month, day: day)?.dayNumber else { return nil }
        var fraction: [UInt8] = []
        if i < utf8.count, utf8[i] == 0x2E {
            i += 1
            while i < utf8.count, utf8[i] >= 0x30, utf8[i] <= 0x39 {
                fraction.append(utf8[i])
                i += 1
            }
            guard !fraction.isEmpty, fraction.count <= 18 else { return nil }
        }
        guard expect(0x5A, 0x7A), i == utf8.count else { return nil }
        let whole = Int64(dayNumber) * 86_400 + Int64(hour * 3600 + minute * 60 + second) - referenceOffset
        let decimal: String
        let digits = String(decoding: fraction, as: UTF8.self)
        if fraction.isEmpty || fraction.allSatisfy({ $0 == 0x30 }) {
            decimal = String(whole)
        } else if whole >= 0 {
            decimal = "\(whole).\(digits)"
        } else {
            // whole + 0.F = -((|whole| - 1) + (1 - 0.F)); 1 - 0.F has the same number of digits.
            let n = fraction.count
            var power: UInt64 = 1
            for _ in 0..<n { power *= 10 }
            let complement = String(power - UInt64(digits)!)
            decimal = "-\(-whole - 1)." + String(repeating: "0", count: n - complement.count) + complement
        }
        guard let seconds = Double(decimal) else { return nil }
        var key: [UInt8] = []
        Date(timeIntervalSinceReferenceDate: seconds).encodeKey(into: &key, terminal: true)
        return key
    }
}
