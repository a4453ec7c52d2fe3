#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What the app gives the push SDK when it starts (seed 003 §1), shared with its notification
/// service extension through the App Group (``PushSDKStore``).
///
/// Validation (the seed's rules, at init and again when decoded, so a hand-edited or corrupt shared
/// copy is refused the same way): `apiURL` is an `https` URL with a host, `apiKey` has at least 8
/// characters, and `requestTimeout` is 5 to 120 seconds.
public struct SDKConfiguration: Codable, Hashable, Sendable {
    public let apiURL: URL
    public let apiKey: String
    public let playerAccountId: String?
    public let enableLogging: Bool
    public let requestTimeout: TimeInterval

    public static let timeoutRange: ClosedRange<TimeInterval> = 5.0 ... 120.0
    public static let minimumAPIKeyLength = 8

    public init(apiURL: URL, apiKey: String, playerAccountId: String? = nil, enableLogging: Bool = false,
                requestTimeout: TimeInterval = 30.0) throws {
        guard apiURL.scheme?.lowercased() == "https", let host = apiURL.host, !host.isEmpty else {
            throw PushNotificationError.invalidConfiguration("API URL must use HTTPS")
        }
        guard apiKey.count >= Self.minimumAPIKeyLength else {
            throw PushNotificationError.invalidConfiguration("API key must be at least 8 characters")
        }
        guard requestTimeout.isFinite, Self.timeoutRange.contains(requestTimeout) else {
            throw PushNotificationError.invalidConfiguration("Timeout must be between 5 and 120 seconds")
        }
        if let playerAccountId, playerAccountId.isEmpty {
            throw PushNotificationError.invalidConfiguration("Player account ID must not be empty")
        }
        self.apiURL = apiURL
        self.apiKey = apiKey
        self.playerAccountId = playerAccountId
        self.enableLogging = enableLogging
        self.requestTimeout = requestTimeout
    }

    /// Parses `apiURL` first: text that is not a URL at all is refused like an `http://` one.
    public init(apiURL: String, apiKey: String, playerAccountId: String? = nil, enableLogging: Bool = false,
                requestTimeout: TimeInterval = 30.0) throws {
        guard let url = URL(string: apiURL) else { throw PushNotificationError.invalidConfiguration("API URL must use HTTPS") }
        try self.init(apiURL: url, apiKey: apiKey, playerAccountId: playerAccountId, enableLogging: enableLogging,
                      requestTimeout: requestTimeout)
    }

    private enum CodingKeys: String, CodingKey {
        case apiURL, apiKey, playerAccountId, enableLogging, requestTimeout
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        try self.init(apiURL: try c.decode(URL.self, forKey: .apiURL), apiKey: try c.decode(String.self, forKey: .apiKey),
                      playerAccountId: try c.decodeIfPresent(String.self, forKey: .playerAccountId),
                      enableLogging: try c.decodeIfPresent(Bool.self, forKey: .enableLogging) ?? false,
                      requestTimeout: try c.decodeIfPresent(TimeInterval.self, forKey: .requestTimeout) ?? 30.0)
    }
}
