#if Serve
import Foundation
import KVStore
import NIOCore
import NIOHTTP1

/// One request as the handlers see it: the method, the decoded path and query, the headers they need,
/// and the body (bounded by ``ServeLimits/requestBody``).
struct ServeRequest: Sendable {
    var method: HTTPMethod
    var path: String
    var query: [String: String]
    var headers: HTTPHeaders
    var body: [UInt8]

    init(head: HTTPRequestHead, body: [UInt8]) {
        method = head.method
        headers = head.headers
        self.body = body
        let (path, query) = Self.split(head.uri)
        self.path = path
        self.query = query
    }

    /// The path (percent-decoded) and the query's parameters (the first of each name wins).
    static func split(_ uri: String) -> (String, [String: String]) {
        let parts = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = percentDecoded(String(parts[0]), plusIsSpace: false) ?? ""
        var query: [String: String] = [:]
        if parts.count > 1 {
            for pair in parts[1].split(separator: "&") {
                let nameValue = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard let name = percentDecoded(String(nameValue[0]), plusIsSpace: true), query[name] == nil else { continue }
                query[name] = nameValue.count > 1 ? percentDecoded(String(nameValue[1]), plusIsSpace: true) ?? "" : ""
            }
        }
        return (path, query)
    }

    /// `%XX` escapes (and `+` in a query) decoded; `nil` for a bad escape or bytes that are not UTF-8.
    static func percentDecoded(_ text: String, plusIsSpace: Bool) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap({ Hex.value($0) }), let low = iterator.next().flatMap({ Hex.value($0) }) else { return nil }
                bytes.append(high << 4 | low)
            case UInt8(ascii: "+") where plusIsSpace:
                bytes.append(UInt8(ascii: " "))
            default:
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// The value of the cookie `name`, if the request carries it.
    func cookie(_ name: String) -> String? {
        for header in headers["cookie"] {
            for pair in header.split(separator: ";") {
                let nameValue = pair.split(separator: "=", maxSplits: 1)
                if nameValue.count == 2, nameValue[0].trimmingCharacters(in: .whitespaces) == name {
                    return nameValue[1].trimmingCharacters(in: .whitespaces)
                }
            }
        }
        return nil
    }
}

/// A whole response: status, content type, extra headers and body.
struct ServeResponse: Sendable {
    var status: HTTPResponseStatus
    var contentType: String
    var headers: [(String, String)] = []
    var body: [UInt8]
    /// The message of an ``error(_:_:)`` response, for a page that shows it.
    var message: String?

    /// An answer (``ServeAnswer``) as JSON, each object's keys sorted (as `kvtool`'s `--json` output).
    static func json(_ answer: some Encodable, status: HTTPResponseStatus = .ok) throws -> ServeResponse {
        let text = try sortedWriter.render(try JSONValue(encoding: answer))
        return ServeResponse(status: status, contentType: "application/json; charset=utf-8", body: Array(text.utf8))
    }

    /// An answer as JSON, members in the order its type declares them (and values' maps in their stored
    /// order): a page of a collection, and the timeline.
    static func jsonInOrder(_ answer: some Encodable) throws -> ServeResponse {
        let text = try JSONWriter.cborCompact.render(try JSONValue(encoding: answer))
        return ServeResponse(status: .ok, contentType: "application/json; charset=utf-8", body: Array(text.utf8))
    }

    /// `{"error":message}`, one line.
    static func error(_ status: HTTPResponseStatus, _ message: String) -> ServeResponse {
        // A string only: writing it cannot fail.
        var response = (try? json(ServeAnswer.Failure(error: message.singleLine), status: status))
            ?? ServeResponse(status: status, contentType: "text/plain", body: [])
        response.message = message.singleLine
        return response
    }

    private static let sortedWriter = JSONWriter(layout: .compact, trailingNewline: false, sortsKeys: true)
}

/// The bounds a client (perhaps a hostile one on the same machine) cannot push the server past.
enum ServeLimits {
    /// Open connections at once; more are answered 503 and closed.
    static let connections = 256
    /// How long a request's head and body may take to arrive (`--request-timeout`): a client that
    /// trickles its bytes holds a connection slot that long, no longer.
    static let requestTimeout: Duration = .seconds(10)
    /// Open event streams (`/api/events`) at once.
    static let eventStreams = 32
    /// Commits buffered for one slow event stream; older ones are dropped for it (it is told).
    static let eventBacklog = 512
    /// A request body (`POST /api/put`).
    static let requestBody = 1 << 20
    /// Entries per page of a collection.
    static let pageSize = 500
    /// Characters of a value shown before it is cut.
    static let valueCharacters = 4_096
    /// Stored bytes of a value decoded for display; a larger one is described, not decoded.
    static let decodedValueBytes = 1 << 20
    /// A file served from `Files/`.
    static let fileBytes = 16 << 20
    /// Entries of a directory listing, of the defaults of one suite, and history entries in the timeline.
    static let listing = 2_000
}
#endif
