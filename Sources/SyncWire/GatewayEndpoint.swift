/// The requests a sync gateway serves (``GatewayWire``'s list): each one's methods and path, for the
/// client that sends it, the gateway that routes it, its metrics and its documentation alike.
package enum GatewayEndpoint: String, CaseIterable, Sendable {
    case hello, push, changes, state, live
    /// `HEAD`, `PUT` and `GET /v1/blobs/HASH` (issue 49): a blob of the group, by its hash
    /// (``BlobRequest``).
    case blobs

    /// The methods it takes: `POST` for a push (a request with a body), `HEAD`, `PUT` and `GET` for a
    /// blob (``BlobRequest/Verb``), `GET` otherwise.
    package var methods: [String] {
        switch self {
        case .push: ["POST"]
        case .blobs: BlobRequest.Verb.allCases.map(\.rawValue)
        case .hello, .changes, .state, .live: ["GET"]
        }
    }

    /// The method of an endpoint that takes one (every one but ``blobs``, whose requests name theirs).
    package var method: String { methods[0] }

    /// Whether its path names a resource after the endpoint (`/v1/blobs/HASH`), rather than ending
    /// with the endpoint's name.
    package var takesResource: Bool { self == .blobs }

    /// `/v1/NAME` (for ``blobs``, the prefix of its resources' paths).
    package var path: String { "/v\(GatewayWire.version)/\(rawValue)" }

    /// The endpoint `method` and the last segment of a `/vN/NAME` path name, if any (`resource`: the
    /// path has one more segment, `/vN/NAME/RESOURCE`, which only ``blobs`` takes).
    package init?(method: String, name: some StringProtocol, resource: Bool = false) {
        guard let endpoint = Self(rawValue: String(name)), endpoint.takesResource == resource, endpoint.methods.contains(method) else {
            return nil
        }
        self = endpoint
    }

    /// The endpoint a path (without its query) names, whatever the method: `/v1/NAME`, or
    /// `/v1/blobs/…` for ``blobs`` (what the gateway's metrics count a request under).
    package init?(path: some StringProtocol) {
        let path = String(path)
        if let endpoint = Self.allCases.first(where: { !$0.takesResource && $0.path == path }) {
            self = endpoint
        } else if let endpoint = Self.allCases.first(where: { $0.takesResource && path.hasPrefix($0.path + "/") }) {
            self = endpoint
        } else {
            return nil
        }
    }

    /// `GET /v1/changes?after=CURSOR&limit=N`'s request target.
    package static func changes(after cursor: Int64, limit: Int) -> String {
        "\(Self.changes.path)?after=\(cursor)&limit=\(limit)"
    }

    /// `GET /v1/state?after=CURSOR&limit=N`'s request target (without `after` for the first page).
    package static func state(after cursor: StateCursor?, limit: Int) -> String {
        "\(Self.state.path)?\(cursor.map { "after=\($0.text)&" } ?? "")limit=\(limit)"
    }

    /// `/v1/blobs/HASH`: the request target of a blob's `HEAD`, `PUT` and `GET`.
    package static func blob(_ hash: BlobHash) -> String {
        "\(Self.blobs.path)/\(hash.hex)"
    }
}
