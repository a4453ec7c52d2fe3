import Foundation
import KVStore
import SyncKit
import Testing

private func zone(_ id: String) -> TimeZone { TimeZone(identifier: id)! }

/// 2026-02-06T03:34:56Z, which is 12:34:56 in Tokyo.
private let instant = Date(timeIntervalSince1970: 1_770_348_896)

@Suite struct ExportTimeFormatTests {
    @Test func timestampsCarryTheZonesNumericOffset() throws {
        #expect(try ExportTimeFormat(timeZone: zone("Asia/Tokyo")).timestamp(instant) == "2026-02-06T12:34:56+09:00")
        #expect(try ExportTimeFormat(timeZone: zone("UTC")).timestamp(instant) == "2026-02-06T03:34:56+00:00")
        #expect(try ExportTimeFormat(timeZone: zone("Asia/Kolkata")).timestamp(instant) == "2026-02-06T09:04:56+05:30")
        #expect(try ExportTimeFormat(timeZone: zone("Asia/Kathmandu")).timestamp(instant) == "2026-02-06T09:19:56+05:45")
        // Across midnight backwards.
        #expect(try ExportTimeFormat(timeZone: zone("America/New_York")).timestamp(instant) == "2026-02-05T22:34:56-05:00")
    }

    @Test func daylightSavingTimeIsFollowed() throws {
        let newYork = ExportTimeFormat(timeZone: zone("America/New_York"))
        let july = Date(timeIntervalSince1970: 1_783_308_896)  // 2026-07-06T03:34:56Z
        #expect(try newYork.timestamp(july) == "2026-07-05T23:34:56-04:00")
    }

    @Test func fractionsOfASecondAreDroppedTowardsThePast() throws {
        let utc = ExportTimeFormat(timeZone: zone("UTC"))
        #expect(try utc.timestamp(instant.addingTimeInterval(0.999)) == "2026-02-06T03:34:56+00:00")
        #expect(try utc.timestamp(Date(timeIntervalSince1970: -0.5)) == "1969-12-31T23:59:59+00:00")
        #expect(try utc.timestamp(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00+00:00")
    }

    @Test func anOffsetWithSecondsIsRoundedToTheMinuteConsistently() throws {
        // Tokyo's local mean time before 1888 was +09:18:59.
        let tokyo = ExportTimeFormat(timeZone: zone("Asia/Tokyo"))
        let old = Date(timeIntervalSince1970: -3_000_000_000)  // 1874-12-07T18:40:00Z
        let text = try tokyo.timestamp(old)
        #expect(text == "1874-12-08T03:59:00+09:19")
        // The text names the same instant (ISO8601DateFormatter reads it back).
        #expect(ISO8601DateFormatter().date(from: text) == old)
    }

    @Test func fileNameStampsAreLocalToTheSecond() throws {
        #expect(try ExportTimeFormat(timeZone: zone("Asia/Tokyo")).fileNameTimestamp(instant) == "20260206_123456")
        #expect(try ExportTimeFormat(timeZone: zone("America/New_York")).fileNameTimestamp(instant) == "20260205_223456")
        #expect(try ExportTimeFormat(timeZone: zone("UTC")).day(of: instant) == LogicalDay("2026-02-06"))
    }

    @Test func daysAreYYYYMMDD() throws {
        #expect(try ExportTimeFormat.day(LogicalDay(year: 2026, month: 2, day: 10)!) == "2026-02-10")
        #expect(try ExportTimeFormat.day(LogicalDay(year: 1, month: 1, day: 1)!) == "0001-01-01")
        #expect(try ExportTimeFormat.day(LogicalDay(year: 9999, month: 12, day: 31)!) == "9999-12-31")
    }

    @Test func datesOutsideTheYears0000To9999AreClearErrors() throws {
        let utc = ExportTimeFormat(timeZone: zone("UTC"))
        #expect(throws: ExportError.self) { try utc.timestamp(Date(timeIntervalSince1970: .infinity)) }
        #expect(throws: ExportError.self) { try utc.timestamp(Date(timeIntervalSince1970: .nan)) }
        #expect(throws: ExportError.self) { try utc.timestamp(Date(timeIntervalSince1970: 253_402_300_800)) }  // 10000-01-01
        #expect(try utc.timestamp(Date(timeIntervalSince1970: 253_402_300_799)) == "9999-12-31T23:59:59+00:00")
        #expect(throws: ExportError.self) { try utc.fileNameTimestamp(Date(timeIntervalSince1970: -1e12)) }
        let late = LogicalDay(dayNumber: LogicalDay(year: 9999, month: 12, day: 31)!.dayNumber + 1)
        #expect(throws: ExportError.dateOutOfRange("the day 10000-01-01")) { try ExportTimeFormat.day(late) }
        #expect(ExportError.dateOutOfRange("the day 10000-01-01").description
                == "the day 10000-01-01 is outside the years 0000-9999 that an export can write")
    }
}
