#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

/// How exports write days, timestamps and file-name stamps, in one time zone.
///
/// ```swift
/// let format = ExportTimeFormat(timeZone: TimeZone(identifier: "Asia/Tokyo")!)
/// try format.timestamp(date)             // "2026-02-06T12:34:56+09:00"
/// try format.fileNameTimestamp(date)     // "20260206_123456"
/// try ExportTimeFormat.day(billedAt)     // "2026-02-10"
/// ```
///
/// - Timestamps are ISO 8601 / RFC 3339 with whole seconds (a fraction is dropped, rounding towards
///   the past) and a numeric offset, `+00:00` for UTC, never `Z`. The offset is the zone's offset at
///   that instant, so daylight-saving time is followed.
/// - A zone offset with seconds (local mean time before 1900 in some zones) is rounded to the minute,
///   and the local time is computed with that rounded offset, so the text still names the same
///   instant.
/// - Years outside 0000-9999 throw ``ExportError/dateOutOfRange(_:)``.
///
/// A plain value: `Sendable`, usable from any thread.
public struct ExportTimeFormat: Sendable, Hashable {
    /// The zone in which timestamps and file-name stamps are written.
    public var timeZone: TimeZone

    public init(timeZone: TimeZone) {
        self.timeZone = timeZone
    }

    /// `"YYYY-MM-DD"`.
    ///
    /// - Throws: ``ExportError/dateOutOfRange(_:)`` for a year outside 0000-9999.
    public static func day(_ day: LogicalDay) throws(ExportError) -> String {
        let year = day.components.year
        guard (0...9999).contains(year) else { throw .dateOutOfRange("the day \(day)") }
        return day.description
    }

    /// `"YYYY-MM-DDThh:mm:ss±hh:mm"` in ``timeZone``.
    ///
    /// - Throws: ``ExportError/dateOutOfRange(_:)`` for an instant outside the years 0000-9999.
    public func timestamp(_ date: Date) throws(ExportError) -> String {
        let parts = try local(date)
        let sign = parts.offsetMinutes < 0 ? "-" : "+"
        let offset = abs(parts.offsetMinutes)
        return "\(parts.day)T\(Self.two(parts.hour)):\(Self.two(parts.minute)):\(Self.two(parts.second))"
            + "\(sign)\(Self.two(offset / 60)):\(Self.two(offset % 60))"
    }

    /// `"YYYYMMDD_hhmmss"` in ``timeZone``, for file names.
    ///
    /// - Throws: ``ExportError/dateOutOfRange(_:)`` for an instant outside the years 0000-9999.
    public func fileNameTimestamp(_ date: Date) throws(ExportError) -> String {
        let parts = try local(date)
        let (y, m, d) = parts.day.components
        let year = String(y)
        return String(repeating: "0", count: max(0, 4 - year.count)) + year + Self.two(m) + Self.two(d)
            + "_" + Self.two(parts.hour) + Self.two(parts.minute) + Self.two(parts.second)
    }

    /// The calendar day on which `date` falls in ``timeZone``.
    ///
    /// - Throws: ``ExportError/dateOutOfRange(_:)`` for an instant outside the years 0000-9999.
    public func day(of date: Date) throws(ExportError) -> LogicalDay {
        try local(date).day
    }

    private func local(_ date: Date) throws(ExportError) -> (day: LogicalDay, hour: Int, minute: Int, second: Int, offsetMinutes: Int) {
        let interval = date.timeIntervalSince1970
        // ±400,000 years of seconds keeps every step below in range; the year check is exact.
        guard interval.isFinite, abs(interval) < 1.3e13 else { throw .dateOutOfRange("the instant \(interval) s since 1970") }
        let offsetSeconds = timeZone.secondsFromGMT(for: date)
        let offsetMinutes = Int((Double(offsetSeconds) / 60).rounded())
        let seconds = Int(interval.rounded(.down)) + offsetMinutes * 60
        let dayNumber = seconds >= 0 ? seconds / 86_400 : -((-seconds + 86_399) / 86_400)
        let secondOfDay = seconds - dayNumber * 86_400
        let day = LogicalDay(dayNumber: Int32(dayNumber))
        guard (0...9999).contains(day.components.year) else {
            throw .dateOutOfRange("the instant \(interval) s since 1970")
        }
        return (day, secondOfDay / 3600, secondOfDay % 3600 / 60, secondOfDay % 60, offsetMinutes)
    }

    private static func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
}
