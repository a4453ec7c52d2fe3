#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A notification as APNs delivers it (seed 003 §4), validated.
///
/// Parsed from the `userInfo` dictionary (or its JSON): `aps.alert.title`, `aps.alert.body`,
/// `aps.badge`, `aps.sound`, `aps.category` (which selects the ``actions``), and the custom keys
/// `imageUrl` and `customData`.
///
/// Validation, each failure a ``PushNotificationError/decodingError(_:)`` naming the field: `title`
/// 1–100 characters, `body` 1–500, `imageUrl` an absolute `http`/`https` URL with a host, `customData`
/// a JSON object, `badge` a non-negative integer; a field of the wrong JSON type is refused rather than
/// dropped, and so is a payload that is not an object or whose `aps` or `aps.alert` is not one.
public struct NotificationPayload: Codable, Hashable, Sendable {
    public let title: String
    public let body: String
    public let imageUrl: String?
    public let customData: [String: CustomDataValue]?
    public let categoryId: String?
    public let actions: [NotificationAction]
    public let badge: Int?
    public let sound: String?

    public static let titleLength = 1 ... 100
    public static let bodyLength = 1 ... 500

    /// The largest APNs payload (4 KiB); larger JSON is refused before it is parsed.
    public static let maxJSONSize = 4096

    public init(title: String, body: String, imageUrl: String? = nil, customData: [String: CustomDataValue]? = nil,
                categoryId: String? = nil, badge: Int? = nil, sound: String? = nil) throws {
        guard Self.titleLength.contains(title.count) else {
            throw PushNotificationError.invalid(["aps", "alert", "title"], "title must be 1 to 100 characters, got \(title.count)")
        }
        guard Self.bodyLength.contains(body.count) else {
            throw PushNotificationError.invalid(["aps", "alert", "body"], "body must be 1 to 500 characters, got \(body.count)")
        }
        if let imageUrl {
            guard let url = URL(string: imageUrl), let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http",
                  let host = url.host, !host.isEmpty else {
                throw PushNotificationError.invalid(["imageUrl"], "imageUrl must be an http or https URL, got \"\(imageUrl.prefix(100))\"")
            }
        }
        if let badge, badge < 0 {
            throw PushNotificationError.invalid(["aps", "badge"], "badge must not be negative, got \(badge)")
        }
        self.title = title
        self.body = body
        self.imageUrl = imageUrl
        self.customData = customData
        self.categoryId = categoryId
        self.actions = categoryId.map(NotificationAction.actions(forCategoryId:)) ?? []
        self.badge = badge
        self.sound = sound
    }

    /// Parses and validates an APNs `userInfo` dictionary.
    public init(userInfo: [AnyHashable: Any]) throws {
        var members: [String: CustomDataValue] = [:]
        for (key, value) in userInfo {
            guard let key = key as? String else { continue }  // APNs keys are strings
            guard let converted = CustomDataValue(any: value) else {
                throw PushNotificationError.invalid([key], "\(key) is not a JSON value")
            }
            members[key] = converted
        }
        try self.init(apns: members)
    }

    /// Parses and validates the JSON text of an APNs payload.
    public init(apnsJSON data: Data) throws {
        guard data.count <= Self.maxJSONSize else {
            throw PushNotificationError.invalid([], "the payload is \(data.count) bytes, over APNs' \(Self.maxJSONSize)-byte limit")
        }
        let root: CustomDataValue
        do {
            root = try JSONDecoder().decode(CustomDataValue.self, from: data)
        } catch let error as DecodingError {
            throw PushNotificationError.decodingError(error)
        }
        guard case .object(let members) = root else {
            throw PushNotificationError.invalid([], "the payload must be a JSON object, not \(root.kindName)")
        }
        try self.init(apns: members)
    }

    private init(apns members: [String: CustomDataValue]) throws {
        func object(_ value: CustomDataValue?, _ path: [String]) throws -> [String: CustomDataValue] {
            switch value {
            case nil: return [:]
            case .object(let members)?: return members
            case let other?: throw PushNotificationError.invalid(path, "\(path.joined(separator: ".")) must be an object, not \(other.kindName)")
            }
        }
        func string(_ value: CustomDataValue?, _ path: [String]) throws -> String? {
            switch value {
            case nil, .null?: return nil
            case .string(let s)?: return s
            case let other?: throw PushNotificationError.invalid(path, "\(path.joined(separator: ".")) must be a string, not \(other.kindName)")
            }
        }
        let aps = try object(members["aps"], ["aps"])
        let alert = try object(aps["alert"], ["aps", "alert"])
        var badge: Int?
        switch aps["badge"] {
        case nil, .null?: badge = nil
        case .integer(let n)?:
            guard let value = Int(exactly: n) else { throw PushNotificationError.invalid(["aps", "badge"], "badge is out of range") }
            badge = value
        case let other?: throw PushNotificationError.invalid(["aps", "badge"], "aps.badge must be an integer, not \(other.kindName)")
        }
        let customData: [String: CustomDataValue]?
        switch members["customData"] {
        case nil, .null?: customData = nil
        case .object(let data)?: customData = data
        case let other?: throw PushNotificationError.invalid(["customData"], "customData must be an object, not \(other.kindName)")
        }
        try self.init(title: try string(alert["title"], ["aps", "alert", "title"]) ?? "",
                      body: try string(alert["body"], ["aps", "alert", "body"]) ?? "",
                      imageUrl: try string(members["imageUrl"], ["imageUrl"]),
                      customData: customData,
                      categoryId: try string(aps["category"], ["aps", "category"]),
                      badge: badge,
                      sound: try string(aps["sound"], ["aps", "sound"]))
    }

    private enum CodingKeys: String, CodingKey {
        case title, body, imageUrl, customData, categoryId, badge, sound
    }

    /// Decoding validates again, so a stored payload that was tampered with is refused.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        try self.init(title: try c.decode(String.self, forKey: .title), body: try c.decode(String.self, forKey: .body),
                      imageUrl: try c.decodeIfPresent(String.self, forKey: .imageUrl),
                      customData: try c.decodeIfPresent([String: CustomDataValue].self, forKey: .customData),
                      categoryId: try c.decodeIfPresent(String.self, forKey: .categoryId),
                      badge: try c.decodeIfPresent(Int.self, forKey: .badge),
                      sound: try c.decodeIfPresent(String.self, forKey: .sound))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(title, forKey: .title)
        try c.encode(body, forKey: .body)
        try c.encodeIfPresent(imageUrl, forKey: .imageUrl)
        try c.encodeIfPresent(customData, forKey: .customData)
        try c.encodeIfPresent(categoryId, forKey: .categoryId)
        try c.encodeIfPresent(badge, forKey: .badge)
        try c.encodeIfPresent(sound, forKey: .sound)
    }
}
