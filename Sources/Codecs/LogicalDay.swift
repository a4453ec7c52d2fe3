#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A calendar day with no time or time zone: the day number counted from 1970-01-01 (day 0).
///
/// Use it for records that belong to a day, such as a checklist's daily record: it sorts as a key,
/// encodes as `"YYYY-MM-DD"` in values and exports, and a range of days is one cursor scan.
///
/// ```swift
/// let today = LogicalDay(year: 2026, month: 11, day: 21)!
/// let lastWeek = (today - 6)...today
/// ```
public struct LogicalDay: Hashable, Sendable, Strideable, Codable, CustomStringConvertible {
    /// Days since 1970-01-01.
    public var dayNumber: Int32

    public init(dayNumber: Int32) { self.dayNumber = dayNumber }

    /// The day of a proleptic Gregorian date, or `nil` if the date does not exist or its day number
    /// does not fit in an `Int32` (years from about -5,877,000 to 5,881,000).
    public init?(year: Int, month: Int, day: Int) {
        guard (1...12).contains(month), (1...31).contains(day), (-6_000_000...6_000_000).contains(year) else { return nil }
        let number = Self.daysFromCivil(year: year, month: month, day: day)
        let check = Self.civilFromDays(number)
        guard check.year == year, check.month == month, check.day == day, let dayNumber = Int32(exactly: number) else { return nil }
        self.dayNumber = dayNumber
    }

    /// Parses `"YYYY-MM-DD"`, and whatever ``description`` gives for any day number: a `-` before the
    /// year for years before 1, more than four digits for years after 9999.
    public init?(_ text: String) {
        var text = text
        guard let day = text.withUTF8({ LogicalDay(utf8: UnsafeRawBufferPointer($0)) }) else { return nil }
        self = day
    }

    /// Parses the UTF-8 bytes of `"YYYY-MM-DD"` (see ``init(_:)-(String)``) without making a String.
    init?(utf8 bytes: UnsafeRawBufferPointer) {
        var i = 0
        let negative = bytes.first == UInt8(ascii: "-")
        if negative { i = 1 }
        // The year: 4 to 7 digits, no leading zero beyond four; then "-MM-DD".
        let yearDigits = bytes.count - i - 6
        guard (4...7).contains(yearDigits), yearDigits == 4 || bytes[i] != UInt8(ascii: "0"),
              bytes[i + yearDigits] == UInt8(ascii: "-"), bytes[i + yearDigits + 3] == UInt8(ascii: "-") else { return nil }
        func digits(_ from: Int, _ count: Int) -> Int? {
            var value = 0
            for j in from ..< from + count {
                let byte = bytes[j]
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let y = digits(i, yearDigits), let m = digits(i + yearDigits + 1, 2), let d = digits(i + yearDigits + 4, 2) else { return nil }
        self.init(year: negative ? -y : y, month: m, day: d)
    }

    /// The day on which `date` falls in `timeZone`.
    public init(_ date: Date, in timeZone: TimeZone = .current) {
        let seconds = date.timeIntervalSince1970 + Double(timeZone.secondsFromGMT(for: date))
        dayNumber = Int32(clamping: Int((seconds / 86_400).rounded(.down)))
    }

    /// (year, month, day) in the proleptic Gregorian calendar.
    public var components: (year: Int, month: Int, day: Int) { Self.civilFromDays(Int(dayNumber)) }

    /// The first day of this day's month: the bucket of a month in an ``Aggregation``.
    ///
    /// ```swift
    /// LogicalDay("2026-11-24")!.firstOfMonth   // 2026-11-01
    /// ```
    ///
    /// At the ends of the `Int32` range the month is cut to the days that fit.
    public var firstOfMonth: LogicalDay {
        LogicalDay(dayNumber: Int32(clamping: Int(dayNumber) - (components.day - 1)))
    }

    /// The days of this day's month, from its first to its last (cut at the ends of the `Int32` range):
    /// the keys a month's bucket covers in an ``Aggregation``.
    public var daysOfMonth: ClosedRange<LogicalDay> {
        let (year, month, day) = components
        let next = month == 12 ? Self.daysFromCivil(year: year + 1, month: 1, day: 1) : Self.daysFromCivil(year: year, month: month + 1, day: 1)
        let first = Int(dayNumber) - (day - 1)
        return LogicalDay(dayNumber: Int32(clamping: first))...LogicalDay(dayNumber: Int32(clamping: next - 1))
    }

    /// `"YYYY-MM-DD"`.
    public var description: String {
        let (y, m, d) = components
        // At most "-5881580-07-11": 14 bytes, written backwards from the end.
        var bytes: (UInt64, UInt64) = (0, 0)
        return withUnsafeMutableBytes(of: &bytes) { buffer in
            var i = 16
            func put(_ value: Int, width: Int) {
                var value = value
                var written = 0
                while written < width || value > 0 {
                    i -= 1
                    buffer[i] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                    written += 1
                }
            }
            put(d, width: 2)
            i -= 1; buffer[i] = UInt8(ascii: "-")
            put(m, width: 2)
            i -= 1; buffer[i] = UInt8(ascii: "-")
            put(abs(y), width: 4)
            if y < 0 { i -= 1; buffer[i] = UInt8(ascii: "-") }
            return String(decoding: UnsafeRawBufferPointer(rebasing: buffer[i...]), as: UTF8.self)
        }
    }

    public static func < (lhs: LogicalDay, rhs: LogicalDay) -> Bool { lhs.dayNumber < rhs.dayNumber }
    public func distance(to other: LogicalDay) -> Int { Int(other.dayNumber) - Int(dayNumber) }
    public func advanced(by n: Int) -> LogicalDay { LogicalDay(dayNumber: Int32(Int(dayNumber) + n)) }
    public static func + (day: LogicalDay, n: Int) -> LogicalDay { day.advanced(by: n) }
    public static func - (day: LogicalDay, n: Int) -> LogicalDay { day.advanced(by: -n) }

    // MARK: Codable, as "YYYY-MM-DD"

    public init(from decoder: any Decoder) throws {
        // Text first: it is what `encode(to:)` writes, so the usual case throws nothing away. (The
        // CBOR decoder does not come here: it reads a day straight from the bytes.)
        let container = try decoder.singleValueContainer()
        guard let text = try? container.decode(String.self) else {
            dayNumber = try container.decode(Int32.self)
            return
        }
        guard let day = LogicalDay(text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a YYYY-MM-DD day: \(text)")
        }
        self = day
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    // Howard Hinnant's days_from_civil / civil_from_days.
    package static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    package static func civilFromDays(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }
}
