#if PostgreSQL
import Foundation
import KVStore
import SyncKitPostgres
import PostgresTesting
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `kvtool sync gateway` on a free port (or `port`), logged in as the cluster's gateway login (made
/// here, as `kvtool sync setup --gateway-login` does); the process and the URL it printed first.
public func startGateway(_ cluster: LocalPostgresCluster, port: Int = 0, extra: [String] = [],
                         environment: [String: String]? = nil) async throws -> (BackgroundProcess, String) {
    let database = try await cluster.prepareForGateways()
    let process = try BackgroundProcess(productsDirectory() + "/kvtool",
                                        ["sync", "gateway", "--database", database.description, "--listen", "127.0.0.1:\(port)"] + extra,
                                        environment: environment ?? [:])
    let line = try await offPool { process.waitForLine(timeout: 60, where: { $0.hasPrefix("gateway listening on ") }) }
    guard let line else {
        let ended = try await offPool { process.wait(timeout: 5) }
        throw ReplicationError.server("the gateway did not start: \(ended.stderr)")
    }
    return (process, String(line.dropFirst("gateway listening on ".count)))
}

/// `kvtool sync token issue … ARGUMENTS` as the cluster's owner: the token it printed (its whole output).
public func issueToken(_ cluster: LocalPostgresCluster, _ arguments: [String]) async throws -> String {
    let result = try await kvtoolRun(["sync", "token", "issue", "--database", cluster.tcpURL.description] + arguments)
    guard result.status == 0 else { throw ReplicationError.server("kvtool sync token issue: \(result.stderr)") }
    return result.stdout.trimmingCharacters(in: .newlines)
}

/// `kvtool ARGS` off the cooperative pool.
public func kvtoolRun(_ arguments: [String], environment: [String: String]? = nil) async throws -> ProcessResult {
    try await offPool { try run(productsDirectory() + "/kvtool", arguments, environment: environment) }
}

extension Device {
    /// ``kvtool(_:timeout:)`` off the cooperative pool.
    public func kvtoolOffPool(_ arguments: [String]) async throws -> ProcessResult {
        try await offPool { try self.kvtool(arguments) }
    }
}

/// `body` until it is true, or `seconds` pass.
public func eventuallyAsync(_ seconds: Double, _ body: @Sendable () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
    while ContinuousClock.now < deadline {
        if try await body() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try await body()
}

/// A certificate authority, a server certificate it signs for 127.0.0.1, and another CA, made with
/// openssl in a temporary directory.
public struct TestPKI: Sendable {
    public let directory = TemporaryDirectory()
    public var caCertificate: String { directory.path + "/ca.pem" }
    public var otherCACertificate: String { directory.path + "/other-ca.pem" }
    public var serverCertificate: String { directory.path + "/server.pem" }
    public var serverKey: String { directory.path + "/server.key" }

    public init() throws {
        let dir = directory.path
        func openssl(_ arguments: [String]) throws {
            let result = try run("/usr/bin/openssl", arguments, timeout: 60)
            guard result.status == 0 else { throw ReplicationError.server("openssl \(arguments.first ?? ""): \(result.stderr)") }
        }
        for name in ["ca", "other-ca"] {
            try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                         "-subj", "/CN=kvstore test \(name)", "-keyout", "\(dir)/\(name).key", "-out", "\(dir)/\(name).pem"])
        }
        try openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=127.0.0.1",
                     "-keyout", serverKey, "-out", "\(dir)/server.csr"])
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\n".write(toFile: "\(dir)/san.ext", atomically: true, encoding: .utf8)
        try openssl(["x509", "-req", "-in", "\(dir)/server.csr", "-CA", caCertificate, "-CAkey", "\(dir)/ca.key", "-CAcreateserial",
                     "-days", "2", "-extfile", "\(dir)/san.ext", "-out", serverCertificate])
    }
}

/// HTTP/1.1 by hand, for requests no client of the library would send.
public enum RawHTTP {
    public struct Answer: Sendable {
        public var status: Int
        public var body: [UInt8]
        public var text: String { String(decoding: body, as: UTF8.self) }
    }

    public static func connect(_ url: String) throws -> Int32 {
        guard let port = Int(url.split(separator: ":").last ?? "") else { throw ReplicationError.server("no port in \(url)") }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw ReplicationError.server("connect: errno \(errno)") }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    /// `requestLine` (`GET /v1/hello`) with `headers` and `body`; the status and body of the answer.
    public static func request(_ url: String, _ requestLine: String, headers: [String], body: [UInt8] = []) throws -> Answer {
        let fd = try connect(url)
        defer { close(fd) }
        let head = "\(requestLine) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: \(body.count)\r\n"
            + headers.map { $0 + "\r\n" }.joined() + "\r\n"
        let bytes = Array(head.utf8) + body
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            received += buffer[0..<n]
        }
        let separator = Array("\r\n\r\n".utf8)
        guard let end = (0..<max(0, received.count - 3)).first(where: { Array(received[$0..<$0 + 4]) == separator }) else {
            throw ReplicationError.server("no HTTP answer to \(requestLine) (\(received.count) bytes received, errno \(errno))")
        }
        let statusLine = String(decoding: received[0..<end], as: UTF8.self).split(separator: " ")
        return Answer(status: Int(statusLine.count > 1 ? statusLine[1] : "") ?? 0, body: Array(received[(end + 4)...]))
    }

    /// Sends `bytes` one at a time, `every` apart, until the server closes the connection; how long
    /// that took.
    public static func trickle(_ url: String, bytes: [UInt8], every interval: Duration) throws -> Duration {
        let fd = try connect(url)
        defer { close(fd) }
        let started = ContinuousClock.now
        for byte in bytes {
            var one = byte
            if send(fd, &one, 1, Int32(MSG_NOSIGNAL)) != 1 { return ContinuousClock.now - started }
            var probe: UInt8 = 0
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let (seconds, attoseconds) = interval.components
            if poll(&descriptor, 1, Int32(seconds * 1000 + attoseconds / 1_000_000_000_000_000)) > 0,
               recv(fd, &probe, 1, Int32(MSG_DONTWAIT)) <= 0 {
                return ContinuousClock.now - started
            }
        }
        return ContinuousClock.now - started
    }
}
#endif
