#if PostgreSQL
import Foundation
import HTTPServerKit
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import PostgresNIO
import SyncKitPostgres

/// One refusal or error, as the gateway logs it (``SyncGateway/Options/log``): never a credential,
/// an `Authorization` header or the database's URL, only what the refusal's own line says.
public struct GatewayLogEvent: Sendable {
    public enum Level: String, Sendable { case info, warning, error }

    public var time = Date()
    public var level: Level
    /// `refusal`, `error`, or `recovered` (the revocation sweep reaches the database again).
    public var event: String
    /// A refusal's reason (``GatewayMetrics/RefusalReason``'s label).
    public var reason: String?
    public var status: Int?
    /// The request's method and endpoint (`POST`, `push`; an unknown path is `other`, a method that is
    /// not one of HTTP's own is `other`).
    public var method: String?
    public var endpoint: String?
    /// The client's address.
    public var peer: String?
    /// The line the client was answered with, or the error's.
    public var message: String

    /// One JSON object, on one line, keys in a fixed order.
    public var jsonLine: String {
        var fields: [(String, String)] = [("ts", Self.quoted(Self.timestamp(time))), ("level", Self.quoted(level.rawValue)),
                                          ("event", Self.quoted(event))]
        if let reason { fields.append(("reason", Self.quoted(reason))) }
        if let status { fields.append(("status", String(status))) }
        if let method { fields.append(("method", Self.quoted(method))) }
        if let endpoint { fields.append(("endpoint", Self.quoted(endpoint))) }
        if let peer { fields.append(("peer", Self.quoted(peer))) }
        fields.append(("message", Self.quoted(message)))
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    /// One line of text: `refusal credential 401 POST push from 127.0.0.1: LINE`.
    public var textLine: String {
        var parts = [event]
        if let reason { parts.append(reason) }
        if let status { parts.append(String(status)) }
        if let method { parts.append(method) }
        if let endpoint { parts.append(endpoint) }
        if let peer { parts.append("from \(peer)") }
        return parts.joined(separator: " ") + ": " + message.replacingOccurrences(of: "\n", with: " ")
    }

    static func timestamp(_ date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        var seconds = time_t(milliseconds / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let fraction = String(milliseconds % 1000)
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))."
            + String(repeating: "0", count: 3 - fraction.count) + fraction + "Z"
    }

    /// A JSON string: quotes, backslashes and control characters escaped.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value)
                || scalar.value == 0x2028 || scalar.value == 0x2029:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
#endif
