import KVStore

// Calendar arithmetic the billing dates need, in the proleptic Gregorian calendar of `LogicalDay`.
extension LogicalDay {
    /// The last representable billing day, 9999-12-31: later dates are never generated.
    static let lastSupported = LogicalDay(year: 9999, month: 12, day: 31)!
    /// The earliest day `LogicalDay(year:month:day:)` accepts, -9999-01-01.
    static let firstRepresentable = LogicalDay(year: -9999, month: 1, day: 1)!

    /// The number of days in `month` (1...12) of `year`.
    static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: isLeapYear(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    static func isLeapYear(_ year: Int) -> Bool {
        year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
    }

    /// This day moved by `months` calendar months, keeping the day of the month, or the month's last
    /// day when that day does not exist there (2025-01-31 + 1 month = 2025-02-28). `nil` when the
    /// result is outside the years -9999...9999 that `LogicalDay(year:month:day:)` accepts.
    func adding(months: Int) -> LogicalDay? {
        let (year, month, day) = components
        let (base, overflow1) = year.multipliedReportingOverflow(by: 12)
        let (start, overflow2) = base.addingReportingOverflow(month - 1)
        let (total, overflow3) = start.addingReportingOverflow(months)
        guard !overflow1, !overflow2, !overflow3 else { return nil }
        let newYear = total >= 0 ? total / 12 : -((-total + 11) / 12)
        let newMonth = total - newYear * 12 + 1
        guard (-9999...9999).contains(newYear) else { return nil }
        return LogicalDay(year: newYear, month: newMonth,
                          day: Swift.min(day, Self.daysInMonth(year: newYear, month: newMonth)))
    }

    /// This day moved by `days` days, or `nil` past 9999-12-31 or before -9999-01-01.
    func adding(days: Int) -> LogicalDay? {
        let (number, overflow) = Int(dayNumber).addingReportingOverflow(days)
        guard !overflow, number <= Int(Self.lastSupported.dayNumber),
              number >= Int(Self.firstRepresentable.dayNumber) else { return nil }
        return LogicalDay(dayNumber: Int32(number))
    }

    /// Calendar months from this day's month to `other`'s month (days ignored).
    func months(to other: LogicalDay) -> Int {
        let a = components, b = other.components
        return (b.year - a.year) * 12 + (b.month - a.month)
    }
}
