/// The HTTP headers of the sync gateway's protocol (``GatewayWire``), as the client writes them; the
/// gateway reads them by ``lowercased`` name.
package enum GatewayHeader: String, CaseIterable, Sendable {
    /// `Bearer TOKEN`: a token the database issued, or a JWT an app's backend signed.
    case authorization = "Authorization"
    /// The group the device syncs (checked against its credential's).
    case group = "KVSync-Group"
    /// The container's install id (``InstallID``), from a device of issue 45 on.
    case install = "KVSync-Install"
    /// ``GatewayWire/contentType`` on a push and on a binary answer.
    case contentType = "Content-Type"
    /// Seconds to wait, on a 429 or 503.
    case retryAfter = "Retry-After"

    /// The name as a server looks it up.
    package var lowercased: String { rawValue.lowercased() }
}
