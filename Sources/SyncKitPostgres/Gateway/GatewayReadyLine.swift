#if PostgreSQL

/// The line a gateway process prints once it listens, `gateway listening on URL`, and its parser: the
/// process that starts a gateway (kvtool's demo and benchmarks, the tests) waits for it and takes the
/// URL from it, with no text of its own to keep in step.
///
/// ```swift
/// try await gateway.run(host: "0.0.0.0", port: 8443) { url in print(GatewayReadyLine(url: "\(url)")) }
/// ```
public struct GatewayReadyLine: Hashable, Sendable, CustomStringConvertible {
    public static let prefix = "gateway listening on "
    /// Where the gateway listens: `http://HOST:PORT` or `https://HOST:PORT`.
    public var url: String

    public init(url: String) { self.url = url }

    /// The ready line `line` is (a trailing line break aside), or `nil` for any other line.
    public init?(_ line: some StringProtocol) {
        var text = String(line)
        while text.last == "\n" || text.last == "\r" || text.last == "\r\n" { text.removeLast() }
        guard text.hasPrefix(Self.prefix) else { return nil }
        let url = String(text.dropFirst(Self.prefix.count))
        guard !url.isEmpty, !url.contains(" ") else { return nil }
        self.url = url
    }

    public var description: String { Self.prefix + url }
}
#endif
