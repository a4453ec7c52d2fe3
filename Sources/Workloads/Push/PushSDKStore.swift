#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore
import SyncKit

/// A notification the service extension handled: shown (with its validated payload) or rejected
/// (with the SDK error's message), as the app reads it back through history.
public struct ReceivedNotification: Codable, Hashable, Sendable {
    public enum Status: String, Codable, Hashable, Sendable {
        case shown, rejected
    }

    public var id: UUID
    public var receivedAt: Date
    public var status: Status
    /// The validated payload of a shown notification.
    public var payload: NotificationPayload?
    /// The error message (``PushNotificationError/errorDescription``) of a rejected one.
    public var error: String?
    /// The payload's JSON as received, cut to ``NotificationPayload/maxJSONSize`` bytes.
    public var rawJSON: String

    public init(id: UUID, receivedAt: Date, status: Status, payload: NotificationPayload?, error: String?, rawJSON: String) {
        self.id = id
        self.receivedAt = receivedAt
        self.status = status
        self.payload = payload
        self.error = error
        self.rawJSON = rawJSON
    }
}

/// The push SDK's state in a shared container: the configuration, the device token and the last
/// registration response in the container's shared defaults, and the notifications the extension
/// handled in the history-enabled collection `receivedNotifications` (key: when, then which).
public struct PushSDKStore: Sendable {
    public let container: SharedContainer
    public let history: History
    public let received: KVCollection<Pair<Date, UUID>, ReceivedNotification>

    public static let collectionName = "receivedNotifications"
    public static let configurationKey = "push.configuration"
    public static let deviceTokenKey = "push.deviceToken"
    public static let lastRegistrationKey = "push.lastRegistration"

    /// Opens (creating if needed) the collection, with history attached. Call `enableHistory()` once.
    public init(container: SharedContainer) throws {
        self.container = container
        history = try History.attach(to: container)
        received = try container.store.collection(Self.collectionName, key: Pair<Date, UUID>.self, value: ReceivedNotification.self)
    }

    /// Records history for the received notifications, in every process (the app does it once).
    public func enableHistory() throws {
        try history.enable(.collection(Self.collectionName))
    }

    public func saveConfiguration(_ configuration: SDKConfiguration) throws {
        try container.defaults().set(encodable: configuration, forKey: Self.configurationKey)
    }

    /// The configuration the app saved; decoding validates it again.
    ///
    /// - Throws: ``PushNotificationError/invalidConfiguration(_:)`` if there is none, or the shared
    ///   copy breaks the rules.
    public func configuration() throws -> SDKConfiguration {
        do {
            guard let configuration = try container.defaults().value(SDKConfiguration.self, forKey: Self.configurationKey) else {
                throw PushNotificationError.invalidConfiguration("the app has not configured the SDK in the App Group")
            }
            return configuration
        } catch KVStoreError.corruptValue(_, _, let reason, _) {
            throw PushNotificationError.invalidConfiguration("the shared configuration is unreadable: \(reason)")
        }
    }

    public func deviceToken() throws -> String? {
        try container.defaults().string(forKey: Self.deviceTokenKey)
    }

    public func lastRegistration() throws -> DeviceTokenRegistrationResponse? {
        try container.defaults().value(DeviceTokenRegistrationResponse.self, forKey: Self.lastRegistrationKey)
    }

    /// Stores the token and its registration response together, in one transaction.
    func saveRegistration(_ response: DeviceTokenRegistrationResponse, author: String) throws {
        let defaults = try container.defaults()
        try container.store.write(author: author) { tx in
            try defaults.set(response.token, forKey: Self.deviceTokenKey, in: tx)
            try defaults.set(encodable: response, forKey: Self.lastRegistrationKey, in: tx)
        }
    }

    /// Records what the extension did with one payload.
    public func record(_ notification: ReceivedNotification, author: String = "extension") throws {
        try received.put(notification, forKey: Pair(notification.receivedAt, notification.id), author: author)
    }
}
