#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

/// Registers the device token with the backend and keeps it, with the last registration response, in
/// the container's shared defaults, so that it survives a restart and the notification service
/// extension can read it (seed 003 "スレッドセーフティ": an actor).
///
/// There is no network in this workload: the backend's `POST /api/v1/tokens` is the `server`
/// closure you pass (a fake in the demo and tests). A failed registration stores nothing.
public actor DeviceTokenManager {
    public let store: PushSDKStore
    private let server: @Sendable (DeviceTokenRegistrationRequest) async throws -> DeviceTokenRegistrationResponse

    public init(store: PushSDKStore,
                server: @escaping @Sendable (DeviceTokenRegistrationRequest) async throws -> DeviceTokenRegistrationResponse) {
        self.store = store
        self.server = server
    }

    /// Validates `token`, registers it, and stores the token and the response in one transaction.
    ///
    /// - Throws: ``PushNotificationError/invalidToken`` for a token that is not 64 hex characters;
    ///   ``PushNotificationError/invalidConfiguration(_:)`` if the SDK was not configured; whatever the
    ///   server throws (``PushNotificationError/serverError(statusCode:message:)``…); and
    ///   ``PushNotificationError/decodingError(_:)`` if the response is not for this token.
    @discardableResult
    public func registerToken(_ token: String) async throws -> DeviceTokenRegistrationResponse {
        let configuration = try store.configuration()
        let request = try DeviceTokenRegistrationRequest(token: token, playerAccountId: configuration.playerAccountId)
        let response = try await server(request)
        guard response.token == request.token, response.platform == request.platform else {
            throw PushNotificationError.invalid(["token"], "the server answered for another token or platform")
        }
        try store.saveRegistration(response, author: "app")
        return response
    }

    /// The token registered last, by this process or an earlier one.
    public func currentToken() throws -> String? {
        try store.deviceToken()
    }

    /// The response of the last registration.
    public func lastRegistration() throws -> DeviceTokenRegistrationResponse? {
        try store.lastRegistration()
    }
}
