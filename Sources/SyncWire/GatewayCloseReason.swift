/// Why a gateway ends a live stream: the data of its `closed` event (``GatewayEvent/closed``), a typed
/// code read by its exact text. The texts are those every gateway has sent since live streams began,
/// so devices of every release read this release's, and this release reads theirs (a text it does not
/// know is ``other(_:)``, kept as sent).
package enum GatewayCloseReason: Sendable, Equatable {
    /// The stream's credential was revoked, changed or deleted.
    case revoked
    /// The stream's credential expired.
    case expired
    /// The gateway drains (SIGTERM): the device polls, or opens a stream on another gateway.
    case draining
    /// A reason this release does not know (an empty one reads as `closed`).
    case other(String)

    /// The reasons a gateway of this release sends.
    package static let sent: [GatewayCloseReason] = [.revoked, .expired, .draining]

    /// The text on the wire.
    package var text: String {
        switch self {
        case .revoked: "the credential was revoked"
        case .expired: "the credential has expired"
        case .draining: "the gateway is shutting down"
        case .other(let text): text.isEmpty ? "closed" : text
        }
    }

    /// Whether the credential itself was refused (the device stops, rather than reconnect).
    package var refusesCredential: Bool {
        switch self {
        case .revoked, .expired: true
        case .draining, .other: false
        }
    }

    /// The reason a `closed` event's data names.
    package init(text: String) {
        self = Self.sent.first { $0.text == text } ?? .other(text)
    }
}
