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
    /// A blob's bytes the server holds from its start (a `HEAD`'s and a `PUT`'s answer), or where a
    /// `PUT`'s chunk goes: a decimal number of bytes (``BlobRequest/number(_:_:)``), as tus 1.0 and
    /// the IETF's resumable uploads draft name it.
    case uploadOffset = "Upload-Offset"
    /// A blob's whole size: what a `PUT` declares, a `HEAD` answers, a 409 `size_mismatch` holds.
    case uploadLength = "Upload-Length"
    /// `1` when the server's copy is complete (every byte in, hashed to its name), else `0`.
    case blobComplete = "KVSync-Blob-Complete"
    /// A typed refusal's name (``BlobPutOutcome/name``: `too_large`, `chunk_too_large`,
    /// `quota_exceeded`, `hash_mismatch`).
    case refusal = "KVSync-Refusal"
    /// The limit a typed refusal names, in bytes.
    case limit = "KVSync-Limit"
    /// `bytes=A-B`, `bytes=A-`, `bytes=-N`: one byte range of a blob's `GET` (RFC 9110 §14.2).
    case range = "Range"
    /// `bytes A-B/SIZE` on a 206, `bytes */SIZE` on a 416 (RFC 9110 §14.4).
    case contentRange = "Content-Range"
    /// On a pull (`GET /v1/changes`, issue 51): the group's log holds at least this sequence number
    /// (the largest version the device's own pushes were answered with), so that a gateway reading
    /// from a replica that lags waits for it (bounded), or reads the primary: read-your-writes. A
    /// decimal number; a gateway from before issue 51 ignores it, as any header it does not know.
    case through = "KVSync-Through"

    /// The name as a server looks it up.
    package var lowercased: String { rawValue.lowercased() }
}
