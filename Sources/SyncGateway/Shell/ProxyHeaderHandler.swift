#if PostgreSQL
import Foundation
import NIOCore

/// The first handler of every connection: reads the PROXY protocol's header (version 2, binary, and
/// version 1, text; HAProxy's `send-proxy-v2`, `send-proxy`) of a connection from a trusted proxy,
/// and refuses one from any other peer.
///
/// - From a trusted peer, a header is read if the connection starts with one (a health check may come
///   without it): version 2's 16 bytes and the length it declares (at most 65,535, as the format
///   allows), or version 1's line (at most 107 bytes, as the format says), within ``timeout``, then
///   the client it names becomes the connection's ``ClientAddress`` (`LOCAL`, and a family other than
///   IPv4 or IPv6, keep the peer's). A header that breaks the format closes the connection with a
///   400 and one line in the log.
/// - From any other peer, a connection that starts with a header is refused (400, one line in the
///   log): a client never chooses the address it is counted under.
///
/// It passes on everything after the header unchanged (TLS, HTTP), then removes itself.
final class ProxyHeaderHandler: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// Version 2's signature: `\r\n\r\n\0\r\nQUIT\n`.
    static let signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]
    /// Version 1's start, and its longest line (CRLF included).
    static let textStart = Array("PROXY ".utf8)
    static let maxTextLine = 107

    private let trusted: Bool
    private let client: ClientAddress
    private let timeout: TimeAmount
    private let refused: @Sendable (SocketAddress?, String) -> Void
    private var buffered: ByteBuffer?
    private var timer: Scheduled<Void>?
    private var done = false

    init(trusted: Bool, client: ClientAddress, timeout: TimeAmount, refused: @escaping @Sendable (SocketAddress?, String) -> Void) {
        (self.trusted, self.client, self.timeout, self.refused) = (trusted, client, timeout, refused)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !done else { return context.fireChannelRead(data) }
        var incoming = unwrapInboundIn(data)
        if var held = buffered {
            held.writeBuffer(&incoming)
            buffered = held
        } else {
            buffered = incoming
        }
        guard var bytes = buffered else { return }
        let decision: Decision
        do {
            decision = try Self.decide(bytes.readableBytesView, trusted: trusted)
        } catch {
            return refuse(context, error.description)
        }
        switch decision {
        case .needMore:
            return
        case .none:
            break
        case .header(let length, let source):
            if let source { client.set(source) }
            bytes.moveReaderIndex(forwardBy: length)
        }
        done = true
        buffered = nil
        timer?.cancel()
        timer = nil
        if bytes.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(bytes)) }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }


    private func refuse(_ context: ChannelHandlerContext, _ line: String) {
        done = true
        buffered = nil
        timer?.cancel()
        refused(context.channel.remoteAddress, line)
        let body = line + "\n"
        var answer = context.channel.allocator.buffer(capacity: 128 + body.utf8.count)
        answer.writeString("HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
        let channel = context.channel
        context.writeAndFlush(NIOAny(answer)).whenComplete { _ in channel.close(promise: nil) }
    }

    enum Decision: Equatable {
        /// Not enough bytes yet to tell.
        case needMore
        /// No header: everything is the connection's own.
        case none
        /// A header of `length` bytes, naming `source` (`nil`: the peer's own, for `LOCAL` and the like).
        case header(length: Int, source: SocketAddress?)
    }

    /// What the first bytes of a connection are. Refused (throws): a header from a peer that is not
    /// trusted, or one that breaks the format.
    static func decide(_ bytes: ByteBufferView, trusted: Bool) throws(ProxyHeaderError) -> Decision {
        let head = Array(bytes.prefix(signature.count))
        if head.elementsEqual(signature.prefix(head.count)) {
            guard head.count == signature.count else { return .needMore }
            guard trusted else { throw ProxyHeaderError("a PROXY protocol header from a peer that is not a trusted proxy (--trusted-proxy)") }
            return try binary(Array(bytes.prefix(16 + 65_535)))
        }
        let start = Array(bytes.prefix(textStart.count))
        if start.elementsEqual(textStart.prefix(start.count)) {
            guard start.count == textStart.count else { return .needMore }
            guard trusted else { throw ProxyHeaderError("a PROXY protocol header from a peer that is not a trusted proxy (--trusted-proxy)") }
            return try text(Array(bytes.prefix(maxTextLine)))
        }
        return .none
    }

    /// Version 2: the signature, then the version and command, the family and transport, the length of
    /// the rest (big-endian), the addresses and ports, and TLVs (read past).
    static func binary(_ bytes: [UInt8]) throws(ProxyHeaderError) -> Decision {
        guard bytes.count >= 16 else { return .needMore }
        let length = 16 + (Int(bytes[14]) << 8 | Int(bytes[15]))
        guard bytes.count >= length else { return .needMore }
        guard bytes[12] >> 4 == 2 else { throw ProxyHeaderError("a PROXY protocol header of version \(bytes[12] >> 4): version 2 (binary) and 1 (text) are read") }
        let body = bytes[16..<length]
        switch bytes[12] & 0x0F {
        case 0:
            // LOCAL: the proxy's own connection (a health check): the peer's address is the client's.
            return .header(length: length, source: nil)
        case 1:
            break
        default:
            throw ProxyHeaderError("a PROXY protocol header with the command \(bytes[12] & 0x0F): only LOCAL (0) and PROXY (1) exist")
        }
        let (family, transport) = (bytes[13] >> 4, bytes[13] & 0x0F)
        switch family {
        case 0:
            // UNSPEC: the format says to use the connection's own addresses.
            return .header(length: length, source: nil)
        case 1, 2:
            guard transport == 1 else { throw ProxyHeaderError("a PROXY protocol header for a transport other than TCP (\(transport))") }
            let size = family == 1 ? 4 : 16
            guard body.count >= 2 * size + 4 else {
                throw ProxyHeaderError("a PROXY protocol header whose addresses are shorter (\(body.count) bytes) than its family's (\(2 * size + 4))")
            }
            let address = Array(body.prefix(size))
            let port = Int(body[body.startIndex + 2 * size]) << 8 | Int(body[body.startIndex + 2 * size + 1])
            return .header(length: length, source: try socketAddress(address, port: port))
        case 3:
            // A Unix socket's path names no address to count by: the peer's is kept.
            guard transport == 1 || transport == 2, body.count >= 216 else {
                throw ProxyHeaderError("a PROXY protocol header of a Unix socket shorter than its 216 bytes of paths")
            }
            return .header(length: length, source: nil)
        default:
            throw ProxyHeaderError("a PROXY protocol header of the address family \(family): only 0 to 3 exist")
        }
    }

    /// Version 1: `PROXY TCP4 SOURCE DESTINATION SPORT DPORT\r\n` (or `TCP6`, or `UNKNOWN` and anything
    /// up to the line's end), at most 107 bytes.
    static func text(_ bytes: [UInt8]) throws(ProxyHeaderError) -> Decision {
        guard let end = bytes.indices.first(where: { bytes[$0] == 0x0D }) else {
            guard bytes.count < maxTextLine else { throw ProxyHeaderError("a PROXY protocol line longer than \(maxTextLine) bytes") }
            return .needMore
        }
        guard end + 1 < bytes.count else { return .needMore }
        guard bytes[end + 1] == 0x0A else { throw ProxyHeaderError("a PROXY protocol line that does not end with CRLF") }
        guard bytes[..<end].allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
            throw ProxyHeaderError("a PROXY protocol line with a byte that is not printable ASCII")
        }
        let line = String(decoding: bytes[..<end], as: UTF8.self)
        let fields = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        if fields.count >= 2 && fields[1] == "UNKNOWN" { return .header(length: end + 2, source: nil) }
        guard fields.count == 6, fields[1] == "TCP4" || fields[1] == "TCP6" else {
            throw ProxyHeaderError("a PROXY protocol line that is not PROXY TCP4|TCP6 SOURCE DESTINATION SPORT DPORT, nor PROXY UNKNOWN")
        }
        let size = fields[1] == "TCP4" ? 4 : 16
        guard let source = ProxyNetwork.parse(fields[2]), source.count == size,
              let destination = ProxyNetwork.parse(fields[3]), destination.count == size else {
            throw ProxyHeaderError("a PROXY protocol line whose addresses are not \(fields[1] == "TCP4" ? "IPv4" : "IPv6") addresses")
        }
        func port(_ text: String) -> Int? {
            guard !text.isEmpty, text.count <= 5, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  text == "0" || text.first != "0", let port = Int(text), port <= 65_535 else { return nil }
            return port
        }
        guard let sourcePort = port(fields[4]), port(fields[5]) != nil else {
            throw ProxyHeaderError("a PROXY protocol line whose ports are not numbers from 0 to 65535")
        }
        return .header(length: end + 2, source: try socketAddress(source, port: sourcePort))
    }

    static func socketAddress(_ bytes: [UInt8], port: Int) throws(ProxyHeaderError) -> SocketAddress {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        let shown = bytes.withUnsafeBytes { raw in inet_ntop(family, raw.baseAddress, &text, socklen_t(text.count)) != nil }
        let address = String(decoding: text.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard shown, let socket = try? SocketAddress(ipAddress: address, port: port) else {
            throw ProxyHeaderError("a PROXY protocol header whose source address cannot be read")
        }
        return socket
    }
}
#endif
