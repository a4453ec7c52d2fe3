/// Every HTTP status a sync gateway answers a request with (``GatewayWire``'s list), and what each
/// means to the device and to the gateway's metrics: the one table both sides read. A status not
/// listed here is one no gateway of this release sends (a device reads it as a server error).
///
/// A new status is one case here: the switch in ``meaning`` does not compile until it says what the
/// status means, and the metrics count it under its own label (``GatewayStatus/allCases``).
package enum GatewayStatus: Int, CaseIterable, Sendable {
    case ok = 200
    /// A byte range of a blob (`GET /v1/blobs/HASH` with `Range`).
    case partialContent = 206
    case badRequest = 400
    case unauthorized = 401
    case forbidden = 403
    case notFound = 404
    case methodNotAllowed = 405
    /// On a push: another container pushes under this device id. On a blob's `PUT`: the upload is at
    /// another offset (`Upload-Offset`) or of another size (`Upload-Length`), which the blob client
    /// reads before this table.
    case conflict = 409
    case lengthRequired = 411
    case payloadTooLarge = 413
    case uriTooLong = 414
    /// A `Range` that starts past a blob's end (`Content-Range: bytes */SIZE`).
    case rangeNotSatisfiable = 416
    /// A blob's last chunk arrived and the whole did not hash to its name (`hash_mismatch`).
    case unprocessableContent = 422
    case tooManyRequests = 429
    case internalServerError = 500
    case serviceUnavailable = 503
    /// A group's blobs would go over its quota (`quota_exceeded`, with `KVSync-Limit`).
    case insufficientStorage = 507

    /// What an answer with a status says, for the device that gets it and the metrics that count it.
    package enum Meaning: Sendable, Equatable {
        /// Answered (a push's refusals of single changes or of the batch travel in its body).
        case answered
        /// A request the protocol does not take.
        case `protocol`
        /// The credential is missing, unknown, revoked, expired, or refused what it asked.
        case credential
        /// Another container pushes under this device id (409).
        case deviceInUse
        /// Over a rate: wait `Retry-After` seconds.
        case rate
        /// Over a capacity of the gateway (a body over the largest, too many connections or streams,
        /// answers or bodies buffered, a file over the largest, a group's blobs over its quota), or its
        /// database does not answer.
        case capacity
        /// The gateway failed.
        case failure
    }

    /// The one table: what each status means.
    package var meaning: Meaning {
        switch self {
        case .ok, .partialContent: .answered
        case .badRequest, .notFound, .methodNotAllowed, .lengthRequired, .uriTooLong, .rangeNotSatisfiable, .unprocessableContent: .protocol
        case .unauthorized, .forbidden: .credential
        case .conflict: .deviceInUse
        case .tooManyRequests: .rate
        case .payloadTooLarge, .serviceUnavailable, .insufficientStorage: .capacity
        case .internalServerError: .failure
        }
    }

    /// `"200"`: the status's label in the metrics.
    package var label: String { String(rawValue) }
}
