#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore
import SyncKit

/// The push SDK across processes (seed 003): the app configures the SDK and registers its token; the
/// notification service extension, in its own process, reads both from the App Group, parses each
/// APNs payload and records what it did; the app learns of it through history.
public enum PushNotificationFlow {
    /// What the extension would show for a valid payload.
    public struct Presentation: Hashable, Sendable {
        public var title: String
        public var body: String
        public var actions: [NotificationAction]
        public var imageUrl: String?
        public var badge: Int?
        public var sound: String?
    }

    /// The extension's handling of one payload: the record it stored, and what it would show (or the
    /// error it hit).
    public struct Handled: Sendable {
        public var record: ReceivedNotification
        public var presentation: Presentation?
        public var error: PushNotificationError?
    }

    /// Handles one APNs payload in the extension: checks that the app configured the SDK and
    /// registered a token, parses and validates the payload, and records the outcome (shown or
    /// rejected) in `receivedNotifications`. Invalid input never throws: it is a rejected record.
    ///
    /// - Throws: only if the record cannot be stored.
    public static func handle(apnsJSON data: Data, store: PushSDKStore, now: Date = Date(), id: UUID = UUID()) throws -> Handled {
        let raw = String(decoding: data.prefix(NotificationPayload.maxJSONSize), as: UTF8.self)
        do {
            let configuration = try store.configuration()
            // The stored token must still be one the app could have registered.
            guard let token = try store.deviceToken() else { throw PushNotificationError.invalidToken }
            _ = try DeviceTokenRegistrationRequest(token: token, playerAccountId: configuration.playerAccountId)
            let payload = try NotificationPayload(apnsJSON: data)
            let record = ReceivedNotification(id: id, receivedAt: now, status: .shown, payload: payload, error: nil, rawJSON: raw)
            try store.record(record)
            return Handled(record: record, presentation: Presentation(
                title: payload.title, body: payload.body, actions: payload.actions, imageUrl: payload.imageUrl,
                badge: payload.badge, sound: payload.sound), error: nil)
        } catch let error as PushNotificationError {
            let record = ReceivedNotification(id: id, receivedAt: now, status: .rejected, payload: nil,
                                              error: error.errorDescription, rawJSON: raw)
            try store.record(record)
            return Handled(record: record, presentation: nil, error: error)
        }
    }

    /// What the extension delivered: what it handled, and why it was not recorded, if it was not.
    public struct Delivery: Sendable {
        public var handled: Handled
        /// Why the notification was not recorded in the App Group (its store could not be opened, or
        /// the record not written), in one line; `nil` when it was recorded.
        public var notRecorded: String?
    }

    /// Handles one APNs payload as ``handle(apnsJSON:store:now:id:)`` does, with the store `open`
    /// gives; when the store cannot be opened (a container that is missing, truncated or not this
    /// user's, a file that is not LMDB's) or the record cannot be written, the notification is still
    /// delivered with what its payload carries (``handleWithoutStore(apnsJSON:now:id:)``), and
    /// ``Delivery/notRecorded`` says why. A notification lost to the store is the worst failure an
    /// extension can have; one shown without its record is not.
    public static func deliver(apnsJSON data: Data, now: Date = Date(), id: UUID = UUID(),
                               open: () throws -> PushSDKStore) -> Delivery {
        do {
            let store = try open()
            return Delivery(handled: try handle(apnsJSON: data, store: store, now: now, id: id), notRecorded: nil)
        } catch {
            return Delivery(handled: handleWithoutStore(apnsJSON: data, now: now, id: id), notRecorded: "\(error)")
        }
    }

    /// Handles one APNs payload without the App Group's store: parses and validates the payload
    /// (what would be shown, or why it is rejected), and records nothing. The SDK's configuration and
    /// device token, which the store holds, are not checked.
    public static func handleWithoutStore(apnsJSON data: Data, now: Date = Date(), id: UUID = UUID()) -> Handled {
        let raw = String(decoding: data.prefix(NotificationPayload.maxJSONSize), as: UTF8.self)
        do {
            let payload = try NotificationPayload(apnsJSON: data)
            return Handled(record: ReceivedNotification(id: id, receivedAt: now, status: .shown, payload: payload, error: nil, rawJSON: raw),
                           presentation: Presentation(title: payload.title, body: payload.body, actions: payload.actions,
                                                      imageUrl: payload.imageUrl, badge: payload.badge, sound: payload.sound),
                           error: nil)
        } catch let error as PushNotificationError {
            return Handled(record: ReceivedNotification(id: id, receivedAt: now, status: .rejected, payload: nil,
                                                        error: error.errorDescription, rawJSON: raw),
                           presentation: nil, error: error)
        } catch {
            let wrapped = PushNotificationError.invalid([], "\(error)")
            return Handled(record: ReceivedNotification(id: id, receivedAt: now, status: .rejected, payload: nil,
                                                        error: wrapped.errorDescription, rawJSON: raw),
                           presentation: nil, error: wrapped)
        }
    }

    /// The app's side: the notifications recorded since the consumer `name` last looked, oldest
    /// first, acknowledged once read.
    public static func newlyReceived(store: PushSDKStore, consumer name: String = "app") throws -> [ReceivedNotification] {
        let consumer = try store.history.consumer(named: name, author: "app", startingAt: .oldest)
        let filter = HistoryFilter(targets: [.collection(PushSDKStore.collectionName)])
        guard case .changes(let transactions, let next) = try consumer.pendingChanges(matching: filter) else {
            _ = try consumer.resynchronized()
            return []
        }
        var records: [ReceivedNotification] = []
        try store.container.store.read { tx in
            for entry in transactions.flatMap(\.entries) where entry.operation == .put {
                if let record = try store.received.get(try entry.decodeKey(as: Pair<Date, UUID>.self), in: tx) {
                    records.append(record)
                }
            }
        }
        try consumer.acknowledge(through: next)
        return records
    }
}

/// Fixed sample data: a configuration, a device token and a fake backend.
public enum PushSampleData {
    public static let apiURL = "https://push.example.com"
    public static let apiKey = "sk_live_0123456789"
    public static let playerAccountId = "player-12345"
    public static let deviceToken = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
    public static let registeredAt = Date(timeIntervalSince1970: 1_761_814_800)  // 2025-10-30T09:00:00Z
    public static let deviceRecordID = "6f9619ff-8b86-4011-b42d-00c04fc964ff"

    public static func configuration() throws -> SDKConfiguration {
        try SDKConfiguration(apiURL: apiURL, apiKey: apiKey, playerAccountId: playerAccountId)
    }

    /// `POST /api/v1/tokens` answered locally, as a backend would.
    public static let server: @Sendable (DeviceTokenRegistrationRequest) async throws -> DeviceTokenRegistrationResponse = { request in
        DeviceTokenRegistrationResponse(id: deviceRecordID, token: request.token, platform: request.platform,
                                        playerAccountId: request.playerAccountId, createdAt: registeredAt, updatedAt: registeredAt)
    }

    /// The seed's example payload (§ JSON変換例).
    public static let validPayload = """
        {"aps":{"alert":{"title":"New Mission Available!","body":"Check out the new daily mission"},"badge":1,"sound":"default","category":"CONFIRM_CATEGORY"},"imageUrl":"https://example.com/mission.png","customData":{"action":"open_mission","missionId":"123"}}
        """

    /// A payload with an empty title.
    public static let invalidPayload = """
        {"aps":{"alert":{"title":"","body":"No title"},"category":"ACCEPT_DECLINE_CATEGORY"}}
        """
}
