/// The server-sent events of ``GatewayEndpoint/live`` (`text/event-stream`): `hello` when the stream
/// opens (its data: the protocol's version), `change` whenever a device commits to the group (no data:
/// a wake-up, the change log is what is read), and `closed` (its data: why) before the gateway ends
/// the stream. A comment line (``heartbeat``) keeps a quiet stream alive.
package enum GatewayEvent: String, CaseIterable, Sendable {
    case hello, change, closed

    /// The comment sent every heartbeat: no event, only a sign of life.
    package static let heartbeat = ": still here\n\n"

    /// The event as it goes on the wire: `event: NAME`, `data: DATA` (one line: line breaks become
    /// spaces) and a blank line.
    package func frame(data: String = "") -> String {
        let line = String(data.map { $0 == "\n" || $0 == "\r" ? " " : $0 })
        return "event: \(rawValue)\ndata: \(line)\n\n"
    }

    /// One event of a stream: the lines before a blank line, as the server-sent events standard reads
    /// them (`field: value` or `field:value`; lines starting with `:` are comments; several `data`
    /// lines are joined with line breaks). `nil` for a block with no event this protocol knows (a
    /// heartbeat, say).
    package static func parse(_ block: some StringProtocol) -> (event: GatewayEvent, data: String)? {
        var name: String?
        var data: [Substring] = []
        // A line ends at LF, CR or CRLF (one Character in Swift).
        for line in String(block).split(omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r" || $0 == "\r\n" }) {
            guard !line.hasPrefix(":") else { continue }
            let colon = line.firstIndex(of: ":") ?? line.endIndex
            let field = line[..<colon]
            var value = colon < line.endIndex ? line[line.index(after: colon)...] : ""
            if value.hasPrefix(" ") { value = value.dropFirst() }
            switch field {
            case "event": name = String(value)
            case "data": data.append(value)
            default: continue
            }
        }
        guard let name, let event = GatewayEvent(rawValue: name) else { return nil }
        return (event, data.joined(separator: "\n"))
    }
}
