#if PostgreSQL
import Foundation
import HTTPServerKit
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import PostgresNIO
import SyncKitPostgres
import SyncWire

/// One answer: the protocol's bytes, or a refusal as one line of text. Its status is one of those the
/// protocol lists (``GatewayStatus``): a new one does not compile until it is listed there, with what
/// it means to devices and metrics.
struct GatewayResponse: Sendable {
    var status: GatewayStatus
    /// The body, in the buffer it is written from (one copy of a large answer, not two).
    var body: ByteBuffer
    var retryAfter: Int?
    /// Whether the connection is closed after it (a refused credential).
    var closes = false
    /// The Content-Type (`nil`: the protocol's for 200, else text).
    var contentType: String?
    /// What it is counted as: an answer, a refusal and its reason, or an error.
    var outcome = Outcome.answered
    /// The line logged for it, when its body is not one (a push answered with its clock's skew).
    var logLine: String?
    /// The bytes of ``SyncGateway/Limits/maxAnswerBytes`` already counted for it (its body's size, for
    /// an answer whose room was reserved before it was read; else 0).
    var reserved = 0
    /// The resync turn it ends once written or abandoned (``ResyncQueue``).
    var turn: ResyncTurn?
    /// Headers of its own: a blob's `Upload-Offset`, a typed refusal's `KVSync-Refusal` and
    /// `KVSync-Limit` (``GatewayHeader``).
    var headers: [(name: String, value: String)] = []
    /// A body written a part at a time after ``body`` (a blob's `GET`): its whole `length` (the
    /// Content-Length, ``body``'s bytes included), and what gives its next part once the previous one
    /// is in the socket (`nil`: none left). A stream that gives fewer or more bytes than `length`, or
    /// throws, ends its connection.
    var streamed: (length: Int, next: @Sendable () async throws -> ByteBuffer?)?

    enum Outcome: Sendable, Equatable {
        case answered
        case refused(GatewayMetrics.RefusalReason)
        /// The gateway or its database failed (503).
        case failed
    }

    init(status: GatewayStatus, body: ByteBuffer, retryAfter: Int? = nil, closes: Bool = false, contentType: String? = nil,
         outcome: Outcome = .answered, logLine: String? = nil) {
        (self.status, self.body, self.retryAfter, self.closes) = (status, body, retryAfter, closes)
        (self.contentType, self.outcome, self.logLine) = (contentType, outcome, logLine)
    }

    /// The status as SwiftNIO writes it (its code and reason phrase).
    var httpStatus: HTTPResponseStatus { HTTPResponseStatus(statusCode: status.rawValue) }

    static func ok(_ body: [UInt8]) -> GatewayResponse { GatewayResponse(status: .ok, body: ByteBuffer(bytes: body)) }

    /// A refusal: its reason is the status's (``GatewayMetrics/RefusalReason/of(_:)``) unless given.
    static func refusal(_ status: GatewayStatus, _ line: String, retryAfter: Int? = nil,
                        reason: GatewayMetrics.RefusalReason? = nil) -> GatewayResponse {
        GatewayResponse(status: status, body: ByteBuffer(string: line + "\n"), retryAfter: retryAfter,
                        closes: status == .unauthorized || status == .forbidden || status == .tooManyRequests,
                        outcome: .refused(reason ?? .of(status)))
    }

    /// An error of the gateway or its database: 503, to be tried again.
    static func failure(_ line: String) -> GatewayResponse {
        GatewayResponse(status: .serviceUnavailable, body: ByteBuffer(string: line + "\n"), retryAfter: 1, outcome: .failed)
    }
}
#endif
