#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// Reading Swift values (integers, floats, strings, `Data`, `Date`, `Decimal`, `UUID`, `URL`) for
// ``CBORDecoder``.

extension CBORReader {
    /// A type mismatch (or, for null and undefined, a missing value) for the item with head `h` at `p`.
    func mismatch(_ expected: String, _ h: Head, at p: Int) -> CBORError {
        let isNil = h.major == 7 && (h.info == 22 || h.info == 23)
        return CBORError(isNil ? .valueNotFound : .typeMismatch, "expected \(expected), found \(describe(h))", offset: p)
    }

    func readInteger<T: FixedWidthInteger>(_ type: T.Type, at p: Int) throws(CBORError) -> (value: T, next: Int) {
        var q = p
        var h = try head(at: q)
        while h.major == 6 {
            if h.argument == CBORTag.positiveBignum || h.argument == CBORTag.negativeBignum {
                return try bignum(T.self, negative: h.argument == CBORTag.negativeBignum, at: h.next)
            }
            q = h.next
            h = try head(at: q)
        }
        switch h.major {
        case 0:
            if let value = T(exactly: h.argument) { return (value, h.next) }
            throw CBORError(.outOfRange, "\(h.argument) does not fit in \(T.self)", offset: q)
        case 1:
            if h.argument <= UInt64(Int64.max), let value = T(exactly: ~Int64(h.argument)) { return (value, h.next) }
            throw CBORError(.outOfRange, "\(Self.negativeString(h.argument)) does not fit in \(T.self)", offset: q)
        case 7:
            guard let d = Self.floatValue(h) else { break }
            if let value = T(exactly: d) { return (value, h.next) }
            if d.isFinite && d.rounded(.towardZero) == d {
                throw CBORError(.outOfRange, "\(d) does not fit in \(T.self)", offset: q)
            }
            throw CBORError(.typeMismatch, "expected \(T.self), found float \(d), which is not an integer", offset: q)
        default:
            break
        }
        throw mismatch("\(T.self)", h, at: q)
    }

    /// An array whose items `element` reads.
    func readArray<E>(at p: Int, _ element: (Int) throws(CBORError) -> (value: E, next: Int)) throws(CBORError) -> (value: [E], next: Int) {
        let (h, q0) = try untagged(at: p)
        guard h.major == 4 else { throw mismatch("an array", h, at: q0) }
        var items: [E] = []
        var q = h.next
        if h.isIndefinite {
            while q < end, byte(q) != 0xFF {
                let (item, next) = try element(q)
                items.append(item)
                q = next
            }
            guard q < end else { throw CBORError(.truncated, "indefinite-length array has no break (0xFF)", offset: q) }
            return (items, q + 1)
        }
        items.reserveCapacity(Int(min(h.argument, UInt64(end - q))))
        var i: UInt64 = 0
        while i < h.argument {
            let (item, next) = try element(q)
            items.append(item)
            q = next
            i += 1
        }
        return (items, q)
    }

    /// The integer in a bignum's byte string at `p`.
    private func bignum<T: FixedWidthInteger>(_ type: T.Type, negative: Bool, at p: Int) throws(CBORError) -> (value: T, next: Int) {
        let h = try head(at: p)
        guard h.major == 2 else {
            throw CBORError(.invalidValue, "a bignum must hold a byte string, found \(describe(h))", offset: p)
        }
        let (magnitude, next) = try withStringBytes(h, at: p) { CBORMagnitude(bigEndian: $0) }
        if let magnitude, magnitude.high == 0 {
            if !negative, let value = T(exactly: magnitude.low) { return (value, next) }
            if negative, magnitude.low <= UInt64(Int64.max), let value = T(exactly: ~Int64(magnitude.low)) { return (value, next) }
        }
        throw CBORError(.outOfRange, "\(negative ? "negative " : "")bignum does not fit in \(T.self)", offset: p)
    }

    func readDouble(at p: Int) throws(CBORError) -> (value: Double, next: Int) {
        let (h, q) = try untagged(at: p)
        if let d = Self.floatValue(h) { return (d, h.next) }
        switch h.major {
        case 0:
            if let d = Double(exactly: h.argument) { return (d, h.next) }
            throw CBORError(.outOfRange, "integer \(h.argument) has no exact Double", offset: q)
        case 1:
            let d: Double? = h.argument == .max ? -0x1p64 : Double(exactly: h.argument + 1).map { -$0 }
            if let d { return (d, h.next) }
            throw CBORError(.outOfRange, "integer \(Self.negativeString(h.argument)) has no exact Double", offset: q)
        default:
            throw mismatch("Double", h, at: q)
        }
    }

    func readFloat(at p: Int) throws(CBORError) -> (value: Float, next: Int) {
        let (h, q) = try untagged(at: p)
        if let d = Self.floatValue(h) {
            let f = Float(d)
            if f.isInfinite && d.isFinite {
                throw CBORError(.outOfRange, "\(d) is too large for Float", offset: q)
            }
            return (f, h.next)
        }
        guard h.major == 0 || h.major == 1 else { throw mismatch("Float", h, at: q) }
        let (d, next) = try readDouble(at: q)
        guard let f = Float(exactly: d) else {
            throw CBORError(.outOfRange, "integer \(h.major == 0 ? String(h.argument) : Self.negativeString(h.argument)) has no exact Float", offset: q)
        }
        return (f, next)
    }

    func readBool(at p: Int) throws(CBORError) -> (value: Bool, next: Int) {
        let (h, q) = try untagged(at: p)
        if h.major == 7 && (h.info == 20 || h.info == 21) { return (h.info == 21, h.next) }
        throw mismatch("Bool", h, at: q)
    }

    /// A ``LogicalDay``: its `"YYYY-MM-DD"` text (parsed from the bytes, no String made) or a day number.
    func readDay(at p: Int) throws(CBORError) -> (value: LogicalDay, next: Int) {
        let (h, q) = try untagged(at: p)
        switch h.major {
        case 0, 1:
            let r = try readInteger(Int32.self, at: q)
            return (LogicalDay(dayNumber: r.value), r.next)
        case 3:
            let (day, next) = try withStringBytes(h, at: q) { LogicalDay(utf8: $0) }
            if let day { return (day, next) }
            let text = try self.text(h, at: q).value
            throw CBORError(.invalidValue, "not a YYYY-MM-DD day: \(CBORError.oneLine(String(text.prefix(64))))", offset: q)
        default:
            throw mismatch("LogicalDay (text or an integer)", h, at: q)
        }
    }

    func readString(at p: Int) throws(CBORError) -> (value: String, next: Int) {
        let (h, q) = try untagged(at: p)
        guard h.major == 3 else { throw mismatch("String", h, at: q) }
        return try text(h, at: q)
    }

    func readData(at p: Int) throws(CBORError) -> (value: Data, next: Int) {
        let (h, q) = try untagged(at: p)
        guard h.major == 2 else { throw mismatch("Data (a byte string)", h, at: q) }
        return try withStringBytes(h, at: q) { Data($0) }
    }

    func readDate(at p: Int) throws(CBORError) -> (value: Date, next: Int) {
        var q = p
        var h = try head(at: q)
        while h.major == 6 {
            switch h.argument {
            case CBORTag.epochDate:
                let (seconds, next) = try readDouble(at: h.next)
                return (Date(timeIntervalSince1970: seconds), next)
            case CBORTag.referenceDate:
                let (seconds, next) = try readDouble(at: h.next)
                return (Date(timeIntervalSinceReferenceDate: seconds), next)
            case CBORTag.dateString:
                let th = try head(at: h.next)
                guard th.major == 3 else { throw mismatch("an RFC 3339 date string in tag 0", th, at: h.next) }
                let (seconds, next) = try withStringBytes(th, at: h.next) { Self.parseRFC3339($0) }
                guard let seconds else {
                    let (string, _) = try text(th, at: h.next)
                    throw CBORError(.invalidValue, "\"\(string.prefix(64))\" is not an RFC 3339 date", offset: h.next)
                }
                return (Date(timeIntervalSince1970: seconds), next)
            case CBORTag.selfDescribed:
                q = h.next
                h = try head(at: q)
            default:
                throw CBORError(.typeMismatch, "expected Date (tag 1, tag 0 or tag \(CBORTag.referenceDate)), found tag \(h.argument)", offset: q)
            }
        }
        throw mismatch("Date (tag 1, tag 0 or tag \(CBORTag.referenceDate))", h, at: q)
    }

    func readDecimal(at p: Int) throws(CBORError) -> (value: Decimal, next: Int) {
        var q = p
        while true {
            let h = try head(at: q)
            switch h.major {
            case 6:
                switch h.argument {
                case CBORTag.decimalFraction:
                    return try decimalFraction(at: h.next)
                case CBORTag.positiveBignum, CBORTag.negativeBignum:
                    let (mantissa, negative, next) = try mantissa(at: q)
                    return (try Self.makeDecimal(mantissa, negative: negative, exponent: 0, at: q), next)
                default:
                    q = h.next
                }
            case 0, 1:
                let (mantissa, negative, next) = try mantissa(at: q)
                return (try Self.makeDecimal(mantissa, negative: negative, exponent: 0, at: q), next)
            case 7:
                guard let d = Self.floatValue(h) else { throw mismatch("Decimal", h, at: q) }
                if d.isNaN { return (.nan, h.next) }
                // The shortest text that reads back as `d`: 0.1 gives Decimal 0.1, not 0.1000000000000000055…
                guard d.isFinite, let value = Decimal(string: "\(d)", locale: nil), !value.isNaN else {
                    throw CBORError(.outOfRange, "float \(d) cannot be a Decimal", offset: q)
                }
                return (value, h.next)
            default:
                throw mismatch("Decimal", h, at: q)
            }
        }
    }

    /// Tag 4's content at `p`: `[exponent, mantissa]`.
    private func decimalFraction(at p: Int) throws(CBORError) -> (value: Decimal, next: Int) {
        let h = try head(at: p)
        guard h.major == 4, h.isIndefinite || h.argument == 2 else {
            throw CBORError(.invalidValue, "a decimal fraction (tag 4) must hold an array of two integers, found \(describe(h))", offset: p)
        }
        let exponentHead = try head(at: h.next)
        guard exponentHead.major == 0 || exponentHead.major == 1 else {
            throw CBORError(.invalidValue, "the exponent of a decimal fraction must be an integer, found \(describe(exponentHead))", offset: h.next)
        }
        let exponent: Int64
        if exponentHead.major == 0 {
            exponent = Int64(clamping: exponentHead.argument)
        } else {
            exponent = exponentHead.argument <= UInt64(Int64.max) ? ~Int64(exponentHead.argument) : .min
        }
        let (mantissa, negative, afterMantissa) = try mantissa(at: exponentHead.next)
        var next = afterMantissa
        if h.isIndefinite {
            guard next < end, byte(next) == 0xFF else {
                throw CBORError(.invalidValue, "a decimal fraction (tag 4) must hold an array of two integers", offset: p)
            }
            next += 1
        }
        return (try Self.makeDecimal(mantissa, negative: negative, exponent: exponent, at: p), next)
    }

    /// An integer or bignum at `p` as a magnitude and sign.
    private func mantissa(at p: Int) throws(CBORError) -> (magnitude: CBORMagnitude, negative: Bool, next: Int) {
        let h = try head(at: p)
        switch h.major {
        case 0:
            return (CBORMagnitude(high: 0, low: h.argument), false, h.next)
        case 1:
            return (CBORMagnitude(high: 0, low: h.argument).plusOne() ?? .zero, true, h.next)
        case 6 where h.argument == CBORTag.positiveBignum || h.argument == CBORTag.negativeBignum:
            let negative = h.argument == CBORTag.negativeBignum
            let bytesHead = try head(at: h.next)
            guard bytesHead.major == 2 else {
                throw CBORError(.invalidValue, "a bignum must hold a byte string, found \(describe(bytesHead))", offset: h.next)
            }
            let (magnitude, next) = try withStringBytes(bytesHead, at: h.next) { CBORMagnitude(bigEndian: $0) }
            guard let magnitude, let value = negative ? magnitude.plusOne() : magnitude else {
                throw CBORError(.outOfRange, "bignum has more than 128 bits, too many for Decimal", offset: p)
            }
            return (value, negative, next)
        default:
            throw CBORError(.invalidValue, "the mantissa of a decimal fraction must be an integer or a bignum, found \(describe(h))", offset: p)
        }
    }

    /// mantissa × 10^exponent as a `Decimal`, exactly, or an error when `Decimal` cannot hold it.
    static func makeDecimal(_ mantissa: CBORMagnitude, negative: Bool, exponent: Int64, at p: Int) throws(CBORError) -> Decimal {
        if mantissa.isZero { return Decimal(0) }
        var m = mantissa
        var e = exponent
        // Decimal's exponent is -128…127; move powers of ten between it and the mantissa, exactly.
        while e > 127 {
            guard m.multiplyBy10(adding: 0) else {
                throw CBORError(.outOfRange, "decimal fraction with exponent \(exponent) is too large for Decimal", offset: p)
            }
            e -= 1
        }
        while e < -128 {
            var reduced = m
            guard reduced.divideBy10() == 0 else {
                throw CBORError(.outOfRange, "decimal fraction with exponent \(exponent) is too small for Decimal", offset: p)
            }
            m = reduced
            e += 1
        }
        if m.high == 0 {
            let value = Decimal(sign: negative ? .minus : .plus, exponent: Int(e), significand: Decimal(m.low))
            // NaN when Decimal compacts trailing zeros of the significand into an exponent over 127.
            if !value.isNaN { return value }
        }
        // Decimal reads up to 128-bit mantissas exactly from text.
        let text = (negative ? "-" : "") + m.decimalString + "e" + String(e)
        guard let value = Decimal(string: text, locale: nil), !value.isNaN else {
            throw CBORError(.outOfRange, "decimal fraction does not fit in Decimal", offset: p)
        }
        return value
    }

    func readUUID(at p: Int) throws(CBORError) -> (value: UUID, next: Int) {
        let (h, q) = try untagged(at: p)
        switch h.major {
        case 2:
            let (uuid, next) = try withStringBytes(h, at: q) { bytes -> UUID? in
                bytes.count == 16 ? UUID(uuid: bytes.loadUnaligned(as: uuid_t.self)) : nil
            }
            guard let uuid else {
                throw CBORError(.invalidValue, "a UUID needs 16 bytes, found \(describe(h))", offset: q)
            }
            return (uuid, next)
        case 3:
            let (string, next) = try text(h, at: q)
            guard let uuid = UUID(uuidString: string) else {
                throw CBORError(.invalidValue, "\"\(string.prefix(64))\" is not a UUID", offset: q)
            }
            return (uuid, next)
        default:
            throw mismatch("UUID (tag 37)", h, at: q)
        }
    }

    func readURL(at p: Int) throws(CBORError) -> (value: URL, next: Int) {
        let (h, q) = try untagged(at: p)
        guard h.major == 3 else { throw mismatch("URL (tag 32)", h, at: q) }
        let (string, next) = try text(h, at: q)
        guard let url = URL(string: string) else {
            throw CBORError(.invalidValue, "\"\(string.prefix(64))\" is not a URL", offset: q)
        }
        return (url, next)
    }

    /// Seconds since 1970 for an RFC 3339 date-time such as `2013-03-21T20:04:00Z` or
    /// `2024-03-01T12:30:15.250000+09:00`; nil when the text is not one.
    package static func parseRFC3339(_ text: UnsafeRawBufferPointer) -> Double? {
        var i = 0
        func number(_ digits: Int) -> Int? {
            guard text.count - i >= digits else { return nil }
            var value = 0
            for _ in 0 ..< digits {
                let c = text[i]
                guard c >= 0x30 && c <= 0x39 else { return nil }
                value = value * 10 + Int(c - 0x30)
                i += 1
            }
            return value
        }
        func expect(_ options: UInt8...) -> Bool {
            guard i < text.count, options.contains(text[i]) else { return false }
            i += 1
            return true
        }
        guard let year = number(4), expect(0x2D), let month = number(2), expect(0x2D), let day = number(2),
              expect(0x54, 0x74, 0x20), let hour = number(2), expect(0x3A), let minute = number(2),
              expect(0x3A), let second = number(2) else { return nil }
        let isLeap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthDays = [31, isLeap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard (1...12).contains(month), day >= 1, day <= monthDays[month - 1],
              hour <= 23, minute <= 59, second <= 60 else { return nil }
        var fraction = 0.0
        if i < text.count, text[i] == 0x2E {
            i += 1
            var digits: UInt64 = 0
            var scale = 1.0
            var count = 0
            while i < text.count, text[i] >= 0x30, text[i] <= 0x39 {
                if count < 18 {
                    digits = digits * 10 + UInt64(text[i] - 0x30)
                    scale *= 10
                }
                count += 1
                i += 1
            }
            guard count > 0 else { return nil }
            fraction = Double(digits) / scale
        }
        var offsetSeconds = 0
        guard i < text.count else { return nil }
        switch text[i] {
        case 0x5A, 0x7A:
            i += 1
        case 0x2B, 0x2D:
            let sign = text[i] == 0x2D ? -1 : 1
            i += 1
            guard let hours = number(2), expect(0x3A), let minutes = number(2), hours <= 23, minutes <= 59 else { return nil }
            offsetSeconds = sign * (hours * 3600 + minutes * 60)
        default:
            return nil
        }
        guard i == text.count else { return nil }
        // Days since 1970-01-01 in the proleptic Gregorian calendar (H. Hinnant's days_from_civil).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return Double(seconds) + fraction
    }
}
