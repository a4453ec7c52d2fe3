/// The requests a sync gateway serves (``GatewayWire``'s list): each one's method and path, for the
/// client that sends it and the gateway that routes it alike.
package enum GatewayEndpoint: String, CaseIterable, Sendable {
    case hello, push, changes, state, live

    /// `POST` for a push (the one request with a body), `GET` otherwise.
    package var method: String { self == .push ? "POST" : "GET" }

    /// `/v1/NAME`.
    package var path: String { "/v\(GatewayWire.version)/\(rawValue)" }

    /// The endpoint `method` and the last segment of a `/vN/NAME` path name, if any.
    package init?(method: String, name: some StringProtocol) {
        guard let endpoint = Self(rawValue: String(name)), endpoint.method == method else { return nil }
        self = endpoint
    }

    /// `GET /v1/changes?after=CURSOR&limit=N`'s request target.
    package static func changes(after cursor: Int64, limit: Int) -> String {
        "\(Self.changes.path)?after=\(cursor)&limit=\(limit)"
    }

    /// `GET /v1/state?after=CURSOR&limit=N`'s request target (without `after` for the first page).
    package static func state(after cursor: StateCursor?, limit: Int) -> String {
        "\(Self.state.path)?\(cursor.map { "after=\($0.text)&" } ?? "")limit=\(limit)"
    }
}
