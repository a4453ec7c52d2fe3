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

/// Writes answers on one connection: the head, and a body of one slice, with the end in one flush; a
/// larger body a 256 KiB slice at a time, each awaited until it is in the socket, so that a device that
/// stopped reading leaves at most one slice in the channel, and the connection's ``WriteStallDeadline``
/// (``SyncGateway/Limits/answerTimeout``) closes it when a slice makes no progress that long, failing
/// the write and releasing the answer. A body is counted against the
/// gateway's budget for answers until written; and since the last write is awaited too, an answer is
/// whole in the socket before its connection is closed (Connection: close), never cut short by the close.
struct AnswerWriter: Sendable {
    let channel: Channel
    let gateway: SyncGateway
    /// The client's address (a trusted proxy's PROXY header's, else the peer's).
    let client: ClientAddress

    /// A slice of a body written at once: the writer waits for the device to read it before the next.
    static let slice = 256 << 10

    @inline(never)
    /// Writes `response` (its body unless `withBody` is false: a HEAD request), counted under
    /// `endpoint` with the `received` bytes of its request's body, and logged if it is a refusal or
    /// an error.
    func write(_ response: GatewayResponse, keepAlive: Bool, endpoint: GatewayMetrics.Endpoint, method: HTTPMethod,
               received: Int = 0, withBody: Bool = true) async throws {
        let length = response.streamed?.length ?? response.body.readableBytes
        gateway.metrics.request(endpoint, status: response.status, received: received, sent: withBody ? length : 0,
                                outcome: response.outcome)
        gateway.log(response, method: method, endpoint: endpoint, peer: client.address)
        var headers = HTTPHeaders()
        headers.add(name: GatewayHeader.contentType.rawValue, value: response.contentType
                    ?? (response.status == .ok ? GatewayWire.contentType : "text/plain; charset=utf-8"))
        headers.add(name: "Content-Length", value: String(length))
        headers.add(name: "Cache-Control", value: "no-store")
        for header in response.headers { headers.add(name: header.name, value: header.value) }
        if let retryAfter = response.retryAfter { headers.add(name: GatewayHeader.retryAfter.rawValue, value: String(retryAfter)) }
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        // A page reserved its bytes before it was read (``SyncGateway/reserveAnswer(upTo:)``): they
        // are released once written; other answers are counted from here.
        let size = response.body.readableBytes
        gateway.countAnswer(size - response.reserved)
        defer {
            gateway.countAnswer(-size)
            response.turn?.end()
        }
        channel.write(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: response.httpStatus, headers: headers)),
                      promise: nil)
        var buffer = withBody ? response.body : ByteBuffer()
        if withBody, let streamed = response.streamed {
            // Each part is in the socket before the next is asked for: one part of the stream is in
            // memory at a time.
            var written = buffer.readableBytes
            try await sendSlices(&buffer)
            while let part = try await streamed.next() {
                written += part.readableBytes
                guard written <= streamed.length else { throw StreamedLengthMismatch() }
                buffer = part
                try await sendSlices(&buffer)
            }
            guard written == streamed.length else { throw StreamedLengthMismatch() }
        }
        while buffer.readableBytes > Self.slice {
            try await send(.body(.byteBuffer(buffer.readSlice(length: Self.slice)!)))
        }
        if buffer.readableBytes > 0 { channel.write(HTTPServerResponsePart.body(.byteBuffer(buffer)), promise: nil) }
        try await send(.end(nil))
    }

    /// A streamed body gave another length than its Content-Length: its connection is closed, since
    /// its framing is broken.
    struct StreamedLengthMismatch: Error {}

    /// Writes `buffer` whole, a slice at a time, each awaited until it is in the socket.
    private func sendSlices(_ buffer: inout ByteBuffer) async throws {
        while buffer.readableBytes > 0 {
            try await send(.body(.byteBuffer(buffer.readSlice(length: min(Self.slice, buffer.readableBytes))!)))
        }
    }

    /// Writes `part` and what was written before it, and waits until they are in the socket.
    func send(_ part: HTTPServerResponsePart) async throws {
        try await channel.writeAndFlush(part)
    }
}
#endif
