#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

/// `POST /api/v1/tokens`: the request (seed 003 §2).
public struct DeviceTokenRegistrationRequest: Codable, Hashable, Sendable {
    public let token: String
    public let platform: String
    public let playerAccountId: String?

    /// - Throws: ``PushNotificationError/invalidToken`` unless `token` is exactly 64 hexadecimal
    ///   characters (ASCII `0-9`, `a-f`, `A-F`: an APNs device token);
    ///   ``PushNotificationError/invalidConfiguration(_:)`` for an empty `playerAccountId`.
    public init(token: String, playerAccountId: String?) throws {
        guard token.utf8.count == 64, token.utf8.allSatisfy(Self.isASCIIHexDigit) else {
            throw PushNotificationError.invalidToken
        }
        if let playerAccountId, playerAccountId.isEmpty {
            throw PushNotificationError.invalidConfiguration("Player account ID must not be empty")
        }
        self.token = token
        self.platform = "iOS"
        self.playerAccountId = playerAccountId
    }

    /// `Character.isHexDigit` also accepts fullwidth digits (`０`), which APNs never sends.
    static func isASCIIHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0") ... UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a") ... UInt8(ascii: "f")).contains(byte)
            || (UInt8(ascii: "A") ... UInt8(ascii: "F")).contains(byte)
    }

    private enum CodingKeys: String, CodingKey { case token, platform, playerAccountId }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        try self.init(token: try c.decode(String.self, forKey: .token),
                      playerAccountId: try c.decodeIfPresent(String.self, forKey: .playerAccountId))
        let platform = try c.decode(String.self, forKey: .platform)
        guard platform == "iOS" else {
            throw DecodingError.dataCorruptedError(forKey: .platform, in: c, debugDescription: "platform must be \"iOS\"")
        }
    }
}

/// `POST /api/v1/tokens`: the response (seed 003 §3). Dates are ISO 8601 in JSON
/// (``PushJSON``), exact in the store (CBOR).
public struct DeviceTokenRegistrationResponse: Codable, Hashable, Sendable {
    public let id: String
    public let token: String
    public let platform: String
    public let playerAccountId: String?
    public let createdAt: Date
    public let updatedAt: Date

    public init(id: String, token: String, platform: String, playerAccountId: String?, createdAt: Date, updatedAt: Date) {
        self.id = id
        self.token = token
        self.platform = platform
        self.playerAccountId = playerAccountId
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// The JSON of the push API: ISO 8601 dates (whole seconds as `2025-10-30T09:00:00Z`, fractions as
/// `2025-10-30T09:00:00.250Z`), keys sorted so output is stable.
public enum PushJSON {
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(iso8601(date))
        }
        return encoder
    }

    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = date(fromISO8601: text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "\"\(text)\" is not an ISO 8601 date")
            }
            return date
        }
        return decoder
    }

    /// Written here in UTC, digit by digit, rather than with `Date.ISO8601FormatStyle`, whose calendar
    /// looks up the current time zone through the process's environment: under ThreadSanitizer the
    /// push extension's first such lookup crashed it (a free its allocator refused), and a lean
    /// process has no use for a time zone. The same text as the format style's (checked on 250,009
    /// dates from 1970 to 2100, milliseconds truncated, as it does).
    public static func iso8601(_ date: Date) -> String {
        let interval = date.timeIntervalSince1970
        // The range the text was checked on (1970 to 2100); others go through the format style.
        guard interval >= 0, interval < 4_102_444_800 else {
            return interval.rounded(.down) == interval ? Date.ISO8601FormatStyle().format(date)
                                                       : Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(date)
        }
        var seconds = Int64(interval.rounded(.down))
        let whole = Double(seconds) == interval
        var millis = whole ? 0 : Int(((interval - Double(seconds)) * 1000).rounded(.down))
        if millis >= 1000 { millis -= 1000; seconds += 1 }
        let days = seconds / 86_400   // not negative here
        let second = Int(seconds - days * 86_400)
        let (year, month, day) = LogicalDay(dayNumber: Int32(days)).components
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        var text = "\(year)-\(two(month))-\(two(day))T\(two(second / 3_600)):\(two(second / 60 % 60)):\(two(second % 60))"
        if !whole { text += "." + (millis < 10 ? "00" : millis < 100 ? "0" : "") + String(millis) }
        return text + "Z"
    }

    public static func date(fromISO8601 text: String) -> Date? {
        (try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text))
            ?? (try? Date.ISO8601FormatStyle().parse(text))
    }
}
