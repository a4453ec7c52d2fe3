#if Serve
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A deliberately small HTTP/1.1 client over a blocking socket, for the tests of `kvtool serve`: it
/// sends exactly the bytes it is given (no client library normalising a `..` or a header away) and
/// reads the answer with a timeout.
struct HTTPTestClient {
    let port: Int
    var timeout: TimeInterval = 10

    struct Response {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:] }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Sends `method target` with the headers (Host and Connection: close added unless given) and
    /// body, and reads the whole response.
    func request(_ method: String = "GET", _ target: String, headers: [String: String] = [:], body: [UInt8] = []) throws -> Response {
        var all = ["Host": "127.0.0.1:\(port)", "Connection": "close"]
        for (name, value) in headers { all[name] = value }
        if !body.isEmpty { all["Content-Length"] = String(body.count) }
        var head = "\(method) \(target) HTTP/1.1\r\n"
        for (name, value) in all.sorted(by: { $0.key < $1.key }) { head += "\(name): \(value)\r\n" }
        return try exchange(Array((head + "\r\n").utf8) + body)
    }

    /// Sends raw bytes and reads until the server closes the connection.
    func exchange(_ bytes: [UInt8]) throws -> Response {
        let fd = try Self.connectLoopback(port: port)
        defer { close(fd) }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            // A signal (a debugger's or a profiler's attach too) interrupts a socket with a timeout: again.
            if n < 0 && errno == EINTR { continue }
            // The server may answer (413) and close before it has read everything: read what it said.
            if n <= 0 { break }
            sent += n
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0 { received += buffer[0..<n]; continue }
            if n < 0 && errno == EINTR { continue }
            if n == 0 || errno == ECONNRESET { break }
            throw Failure(description: "recv: errno \(errno) after \(received.count) bytes")
        }
        return try Self.parse(received)
    }

    /// A socket connected to 127.0.0.1:`port`.
    static func connectLoopback(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let error = errno
            close(fd)
            throw Failure(description: "connect to 127.0.0.1:\(port): errno \(error)")
        }
        return fd
    }

    static func parse(_ bytes: [UInt8]) throws -> Response {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        guard let end = (0..<max(0, bytes.count - 3)).first(where: { bytes[$0..<$0 + 4].elementsEqual(separator) }) else {
            throw Failure(description: "no complete response head in \(bytes.count) bytes")
        }
        let lines = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw Failure(description: "bad status line \(lines[0])") }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers[name] = headers[name].map { $0 + ", " + value } ?? value
        }
        return Response(status: status, headers: headers, body: Array(bytes[(end + 4)...]))
    }
}
#endif
