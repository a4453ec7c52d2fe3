#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension JSONValue {
    /// A CBOR value as JSON, converted as RFC 8949 §6.1 says, for people and scripts:
    ///
    /// - integers stay exact numbers, and floats numbers (`3.0`); a non-finite float is `null`;
    /// - byte strings are base64url without padding, or inside tag 22 or 23 base64 or base16, as those
    ///   tags ask (tag 21 is base64url);
    /// - a bignum (tags 2 and 3) is the base64url of its magnitude, with `~` before a negative one;
    /// - simple values other than `true`, `false` and `null` are `null`, as `undefined` is;
    /// - dates (tag 1 and ``CBORTag/referenceDate``) are ISO 8601 strings in UTC to the millisecond,
    ///   `2013-03-21T20:04:00.500` (proleptic Gregorian calendar; years 0000 to 9999, others are the
    ///   tag's content), UUIDs (tag 37) strings, and decimal fractions (tag 4) exact numbers; other
    ///   tags are their content;
    /// - a map keeps its stored order; a key that is not text is named by its JSON text (`1`,
    ///   `[1,2]`), so two keys may be written alike: write it with a ``JSONWriter`` whose
    ///   ``JSONWriter/requiresUniqueKeys`` is off, as ``jsonText(_:)`` does.
    ///
    /// ```swift
    /// JSONValue.jsonText(.map([(.text("n"), .unsigned(1)), (.text("b"), .bytes([0xFF]))]))   // {"n":1,"b":"_w"}
    /// ```
    public init(cbor: CBORValue) {
        self = Self.converting(cbor, bytesAs: .base64url)
    }

    /// The compact JSON text of a CBOR value (``init(cbor:)``), written by ``JSONWriter/cborCompact``.
    public static func jsonText(_ cbor: CBORValue) -> String {
        // A value converted from CBOR holds no NaN and may repeat keys, which this writer allows:
        // rendering cannot fail.
        (try? JSONWriter.cborCompact.render(JSONValue(cbor: cbor))) ?? "null"
    }

    /// How byte strings are written: RFC 8949's expected conversions (tags 21–23).
    private enum BytesText { case base64url, base64, base16 }

    private static func converting(_ value: CBORValue, bytesAs encoding: BytesText) -> JSONValue {
        switch value {
        case .unsigned(let n): return .number(Decimal(n))
        case .negative(let n): return .number(-1 - Decimal(n))
        case .float(let d): return d.isFinite ? .float(d) : .null
        case .text(let s): return .string(s)
        case .bytes(let b): return .string(text(b, encoding))
        case .bool(let b): return .bool(b)
        case .null, .undefined, .simple: return .null
        case .array(let items): return .array(items.map { converting($0, bytesAs: encoding) })
        case .map(let entries):
            return .object(entries.map { entry in
                let key: String = switch entry.key {
                case .text(let s): s
                default: jsonText(entry.key)
                }
                return Member(key, converting(entry.value, bytesAs: encoding))
            })
        case .tagged(let tag, let content):
            switch (tag, content) {
            case (CBORTag.positiveBignum, .bytes(let magnitude)): return .string(Base64.url(magnitude))
            case (CBORTag.negativeBignum, .bytes(let magnitude)): return .string("~" + Base64.url(magnitude))
            case (21, _): return converting(content, bytesAs: .base64url)
            case (22, _): return converting(content, bytesAs: .base64)
            case (23, _): return converting(content, bytesAs: .base16)
            case (CBORTag.epochDate, _), (CBORTag.referenceDate, _):
                return dateText(content, since1970: tag == CBORTag.epochDate).map(JSONValue.string) ?? converting(content, bytesAs: encoding)
            case (CBORTag.uuid, _), (CBORTag.decimalFraction, _):
                return (try? special(value)) ?? converting(content, bytesAs: encoding)
            default:
                return converting(content, bytesAs: encoding)
            }
        }
    }

    private static func text(_ bytes: [UInt8], _ encoding: BytesText) -> String {
        switch encoding {
        case .base64url: Base64.url(bytes)
        case .base64: Base64.standard(bytes)
        case .base16: Hex.encode(bytes).uppercased()
        }
    }

    /// A UUID or decimal fraction as the value it stands for; throws when the content is not one (the
    /// tag's content is then shown as it is).
    private static func special(_ value: CBORValue) throws -> JSONValue {
        guard case .tagged(let tag, _) = value else { return .null }
        let bytes = value.encoded()
        if tag == CBORTag.uuid { return .string(try CBORDecoder().decode(UUID.self, from: bytes).uuidString) }
        let decimal = try CBORDecoder().decode(Decimal.self, from: bytes)
        return decimal.isNaN ? .null : .number(decimal)
    }

    /// The first and last millisecond that ``dateText(_:since1970:)`` writes: 0000-01-01T00:00:00.000
    /// and 9999-12-31T23:59:59.999, the years of four digits that ISO 8601 and RFC 3339 write.
    static let dateMillis: ClosedRange<Int64> = -62_167_219_200_000 ... 253_402_300_799_999

    /// The date that a date tag's content (seconds since 1970, or since 2001 for
    /// ``CBORTag/referenceDate``; an integer or a float, through any tags, as `CBORDecoder` reads a
    /// `Date`) stands for, as `2013-03-21T20:04:00.500` (UTC, proleptic Gregorian calendar), or `nil`
    /// when it is not a number or is outside ``dateMillis``.
    ///
    /// Computed here, in integers, rather than by Foundation's ISO 8601 format, so that the SQL
    /// function `kvsync_cbor_to_jsonb` computes the same text (it is tested against this): a float's
    /// seconds are the shortest decimal that reads back as the float (`d.description`, as PostgreSQL's
    /// float8 text gives it), floored to the millisecond. Foundation's format differs before 1582 (it
    /// switches to the Julian calendar), beyond its own year range (it clamps) and on a float that is
    /// a hair below a millisecond (it converts to 2001-based seconds first, rounding).
    static func dateText(_ content: CBORValue, since1970: Bool) -> String? {
        var item = content
        while case .tagged(_, let inner) = item { item = inner }
        let offset: Int64 = since1970 ? 0 : 978_307_200_000
        let millis: Int64
        switch item {
        case .unsigned(let n):
            guard n < 1 << 40 else { return nil }
            millis = Int64(n) * 1000 + offset
        case .negative(let n):
            guard n < 1 << 40 else { return nil }
            millis = (-1 - Int64(n)) * 1000 + offset
        case .float(let d):
            guard d.isFinite, abs(d) < 1e12, let floored = flooredMillis(d) else { return nil }
            millis = floored + offset
        default:
            return nil
        }
        guard dateMillis.contains(millis) else { return nil }
        return civilText(millis)
    }

    /// floor(d × 1000) for |d| < 10^12, computed on the shortest decimal text of `d`.
    private static func flooredMillis(_ d: Double) -> Int64? {
        var text = Substring(d.description)
        let negative = text.hasPrefix("-")
        if negative { text = text.dropFirst() }
        var exponent = 0
        if let e = text.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            guard let value = Int(text[text.index(after: e)...]) else { return nil }
            exponent = value
            text = text[..<e]
        }
        var digits = ""
        if let dot = text.firstIndex(of: ".") {
            digits = String(text[..<dot]) + text[text.index(after: dot)...]
            exponent -= text.distance(from: text.index(after: dot), to: text.endIndex)
        } else {
            digits = String(text)
        }
        guard let mantissa = Int64(digits) else { return nil }
        // value × 1000 = mantissa × 10^(exponent + 3)
        let shift = exponent + 3
        var whole: Int64
        var remainder = false
        if shift >= 0 {
            whole = mantissa
            for _ in 0 ..< shift {
                let (product, overflow) = whole.multipliedReportingOverflow(by: 10)
                if overflow { return nil }
                whole = product
            }
        } else if -shift > 18 {
            whole = 0
            remainder = mantissa != 0
        } else {
            var power: Int64 = 1
            for _ in 0 ..< -shift { power *= 10 }
            whole = mantissa / power
            remainder = mantissa % power != 0
        }
        return negative ? -whole - (remainder ? 1 : 0) : whole
    }

    /// `YYYY-MM-DDTHH:MM:SS.mmm` of milliseconds since 1970 (Howard Hinnant's civil-from-days).
    private static func civilText(_ millis: Int64) -> String {
        let dayMillis: Int64 = 86_400_000
        let days = millis >= 0 ? millis / dayMillis : -((-millis + dayMillis - 1) / dayMillis)
        let ms = millis - days * dayMillis
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        func padded(_ n: Int64, _ width: Int) -> String {
            let text = String(n)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(padded(year, 4))-\(padded(month, 2))-\(padded(day, 2))T\(padded(ms / 3_600_000, 2)):"
            + "\(padded(ms / 60_000 % 60, 2)):\(padded(ms / 1000 % 60, 2)).\(padded(ms % 1000, 3))"
    }
}

extension JSONWriter {
    /// The compact layout for CBOR shown as JSON: one line, and map keys that convert alike are both
    /// written (``JSONValue/init(cbor:)``).
    public static let cborCompact = JSONWriter(layout: .compact, trailingNewline: false, requiresUniqueKeys: false)
}
