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
/// here, as `kvtool sync setup --gateway-login` does), at `database` if given (a host list, say); the
/// process and the URL it printed first.
public func startGateway(_ cluster: LocalPostgresCluster, port: Int = 0, extra: [String] = [],
                         environment: [String: String]? = nil, database: ServerURL? = nil) async throws -> (BackgroundProcess, String) {
    let prepared = try await cluster.prepareForGateways()
    let database = database ?? prepared
    let process = try BackgroundProcess(productsDirectory() + "/kvtool",
                                        ["sync", "gateway", "--database", database.description, "--listen", "127.0.0.1:\(port)"]
                                            + (extra.contains("--metrics-listen") ? [] : ["--metrics-listen", "127.0.0.1:0"]) + extra,
                                        environment: environment ?? [:])
    let line = try await offPool { process.waitForLine(timeout: 60, where: { GatewayReadyLine($0) != nil }).flatMap(GatewayReadyLine.init) }
    guard let line else {
        let ended = try await offPool { process.wait(timeout: 5) }
        throw ReplicationError.server("the gateway did not start: \(ended.stderr)")
    }
    return (process, line.url)
}

/// The metrics listener of a gateway `startGateway` started (`http://127.0.0.1:PORT`, without
/// `/metrics`), from the line `gateway metrics on URL` it printed before its ready line.
public func gatewayMetricsBase(_ process: BackgroundProcess) -> String? {
    let prefix = "gateway metrics on "
    guard let line = process.output.first(where: { $0.hasPrefix(prefix) }) else { return nil }
    let url = String(line.dropFirst(prefix.count))
    return url.hasSuffix("/metrics") ? String(url.dropLast("/metrics".count)) : url
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

    /// A certificate the CA signs for `names` (`IP:127.0.0.1`, `DNS:localhost`), with an EC key or an
    /// RSA one; its certificate and key files.
    public func certificate(_ name: String, names: String, rsa: Bool = false) throws -> (certificate: String, key: String) {
        let dir = directory.path
        func openssl(_ arguments: [String]) throws {
            let result = try run("/usr/bin/openssl", arguments, timeout: 60)
            guard result.status == 0 else { throw ReplicationError.server("openssl \(arguments.first ?? ""): \(result.stderr)") }
        }
        let key = rsa ? ["-newkey", "rsa:2048"] : ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
        try openssl(["req"] + key + ["-nodes", "-subj", "/CN=\(name)", "-keyout", "\(dir)/\(name).key", "-out", "\(dir)/\(name).csr"])
        try "subjectAltName=\(names)\n".write(toFile: "\(dir)/\(name).ext", atomically: true, encoding: .utf8)
        try openssl(["x509", "-req", "-in", "\(dir)/\(name).csr", "-CA", caCertificate, "-CAkey", "\(dir)/ca.key", "-CAcreateserial",
                     "-days", "2", "-extfile", "\(dir)/\(name).ext", "-out", "\(dir)/\(name).pem"])
        return ("\(dir)/\(name).pem", "\(dir)/\(name).key")
    }
}

/// HTTP/1.1 by hand, for requests no client of the library would send.
public enum RawHTTP {
    public struct Answer: Sendable {
        public var status: Int
        /// The header lines, as sent (`Name: value`).
        public var headers: [String]
        public var body: [UInt8]
        public var text: String { String(decoding: body, as: UTF8.self) }

        /// The value of the header `name` (case-insensitive), if sent.
        public func header(_ name: String) -> String? {
            headers.first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
                .map { String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces) }
        }
    }

    /// A TCP connection to the port of `url` on 127.0.0.1, from `source` (any 127.0.0.0/8 address:
    /// the gateway counts it as another client), with `timeout` seconds for each receive.
    public static func connect(_ url: String, source: String? = nil, timeout: Int = 30) throws -> Int32 {
        guard let port = Int(url.split(separator: ":").last ?? "") else { throw ReplicationError.server("no port in \(url)") }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ReplicationError.server("socket: errno \(errno)") }
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else { close(fd); throw ReplicationError.server("bind \(source): errno \(errno)") }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { close(fd); throw ReplicationError.server("connect: errno \(errno)") }
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    /// The head of a request: `requestLine`, Host, `Connection: close`, a Content-Length of
    /// `length` (none if `nil`), then `headers`.
    public static func head(_ requestLine: String, headers: [String], length: Int?) -> [UInt8] {
        let lengthLine = length.map { "Content-Length: \($0)\r\n" } ?? ""
        return Array(("\(requestLine) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + lengthLine
                      + headers.map { $0 + "\r\n" }.joined() + "\r\n").utf8)
    }

    /// `requestLine` (`GET /v1/hello`) with `headers` and `body`; the answer.
    public static func request(_ url: String, _ requestLine: String, headers: [String], body: [UInt8] = [],
                               source: String? = nil) throws -> Answer {
        try exchange(url, head(requestLine, headers: headers, length: body.count) + body, source: source)
    }

    /// Sends `bytes` as they are (a request no client would send), then reads until the gateway
    /// closes the connection; the answer.
    public static func exchange(_ url: String, _ bytes: [UInt8], source: String? = nil, timeout: Int = 30) throws -> Answer {
        let fd = try connect(url, source: source, timeout: timeout)
        defer { close(fd) }
        _ = sendAll(fd, bytes)
        return try parse(readToEnd(fd))
    }

    /// Writes as much of `bytes` as the peer takes; how many went (fewer when it closed).
    @discardableResult
    public static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Int {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, min(bytes.count - sent, 1 << 20), Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            sent += n
        }
        return sent
    }

    /// Reads nothing until the peer (a server on this machine) has closed its end, or its answer's
    /// status is not 200 (a refusal that need not close the connection), or `deadline` passes: the
    /// condition itself, not a fixed wait, so that a slow server on a loaded machine is waited for.
    /// A server's FIN waits behind the bytes its socket still holds, unseen by a reader that reads
    /// nothing, so the server's own socket is looked up in `/proc/net/tcp`: it leaves ESTABLISHED
    /// when the server closes it. Whether the peer closed or refused before the deadline.
    public static func awaitCloseUnread(_ fd: Int32, until deadline: ContinuousClock.Instant) -> Bool {
        let readHangUp: Int16 = 0x2000 // POLLRDHUP (Linux), which Glibc's module does not export.
        while ContinuousClock.now < deadline {
            var entry = pollfd(fd: fd, events: readHangUp, revents: 0)
            if poll(&entry, 1, 100) > 0, entry.revents & (readHangUp | Int16(POLLHUP) | Int16(POLLERR)) != 0 { return true }
            if !serverSideEstablished(fd) { return true }
            var status = [UInt8](repeating: 0, count: 12)
            if recv(fd, &status, status.count, Int32(MSG_PEEK | MSG_DONTWAIT)) == 12,
               String(decoding: status[9..<12], as: UTF8.self) != "200" { return true }
        }
        return false
    }

    /// Whether the server's end of `fd`'s connection (a server on this machine, over IPv4) is still
    /// ESTABLISHED, by `/proc/net/tcp`: its local port is `fd`'s peer's, its remote port `fd`'s own.
    static func serverSideEstablished(_ fd: Int32) -> Bool {
        func port(_ read: (UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32) -> UInt16? {
            var address = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let result = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { read($0, &length) }
            }
            return result == 0 ? UInt16(bigEndian: address.sin_port) : nil
        }
        guard let mine = port({ getsockname(fd, $0, $1) }), let server = port({ getpeername(fd, $0, $1) }) else { return true }
        let local = String(format: ":%04X", server), remote = String(format: ":%04X", mine)
        for line in procFile("/proc/net/tcp").split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            guard fields.count > 3, fields[1].hasSuffix(local), fields[2].hasSuffix(remote) else { continue }
            return fields[3] == "01"
        }
        // Not listed (yet, or no more): the server's close shows as a hang-up or a reset then.
        return true
    }

    /// Everything received until the peer closes (or a receive times out, or is reset).
    public static func readToEnd(_ fd: Int32) -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            received += buffer[0..<n]
        }
        return received
    }

    /// An answer's status, headers and body.
    public static func parse(_ received: [UInt8]) throws -> Answer {
        let separator = Array("\r\n\r\n".utf8)
        guard let end = (0..<max(0, received.count - 3)).first(where: { Array(received[$0..<$0 + 4]) == separator }) else {
            throw ReplicationError.server("no HTTP answer (\(received.count) bytes received, errno \(errno))")
        }
        let lines = String(decoding: received[0..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusLine = lines.first?.split(separator: " ") ?? []
        return Answer(status: Int(statusLine.count > 1 ? statusLine[1] : "") ?? 0, headers: Array(lines.dropFirst()),
                      body: Array(received[(end + 4)...]))
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

/// What `task` ended with, if it ends within `seconds`; else `nil`, and it is cancelled (a live stream
/// that should have been closed must fail its test, not hang it).
public func outcome<Success: Sendable>(of task: Task<Success, Never>, within seconds: Double) async -> Success? {
    let ended = Locked(false)
    let watcher = Task { _ = await task.value; ended.withLock { $0 = true } }
    defer { watcher.cancel() }
    guard await eventuallyAsync(seconds, { ended.withLock { $0 } }) else {
        task.cancel()
        return nil
    }
    return await task.value
}

#endif
