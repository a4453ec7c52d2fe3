#if PostgreSQL
import Foundation
import KVStore
import SyncKitPostgres
#if canImport(Glibc)
import Glibc
#endif

/// Debian's HAProxy (`/usr/sbin/haproxy`) in front of sync gateways on this machine, for tests and
/// benchmarks: one shared address that spreads requests round robin over every gateway (no
/// stickiness), and one address per gateway that reaches that gateway alone through the same proxy
/// (for a test that must push through one gateway and follow another). Every connection carries the
/// PROXY protocol (version 2) to the gateway, which must trust the proxy (`--trusted-proxy 127.0.0.1`).
/// Plain HTTP: TLS, if any, ends at the proxy in a deployment, and is not tested here.
///
/// The proxy runs in the foreground under `timeout`, so that it ends within `lifetime` even if the
/// process that started it is killed; ``stop()`` (and deinit) end it sooner.
public final class LocalHAProxy: Sendable {
    public static let program = "/usr/sbin/haproxy"
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: program) }

    public let directory: String
    /// The shared address's ports (one unless asked for more): round robin over every gateway.
    public let ports: [Int]
    public var port: Int { ports[0] }
    /// Per gateway, in the order given, a port of the proxy that reaches that gateway only.
    public let onlyPorts: [Int]
    private let pid: Int32

    /// `http://127.0.0.1:PORT`, the shared address.
    public var url: String { "http://127.0.0.1:\(port)" }

    /// `http://127.0.0.1:PORT` of the proxy's address for gateway `index` alone.
    public func onlyURL(_ index: Int) -> String { "http://127.0.0.1:\(onlyPorts[index])" }

    /// The configuration the proxy runs with (Operating.md shows it).
    public let configuration: String

    /// Starts the proxy in front of the gateways on these loopback ports, on free loopback ports, holding up to `maxConnections`
    /// client connections (each also opens one to its gateway), and waits until it accepts
    /// connections on every port. The shared address listens on `sharedPorts` ports: one client
    /// address reaches one port from at most the ~28,000 ephemeral ports Linux gives it, so a
    /// benchmark of more devices on this machine spreads them over several.
    public init(gateways: [Int], maxConnections: Int = 1_000, sharedPorts: Int = 1, lifetime: Int = 900) throws {
        guard Self.isInstalled else { throw ReplicationError.server("HAProxy is not installed (apt-get install haproxy)") }
        var template = Array((NSTemporaryDirectory() + "kvsync-haproxy-XXXXXX").utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw ReplicationError.server("cannot make a directory for HAProxy: errno \(errno)")
        }
        directory = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        ports = try (0..<max(1, sharedPorts)).map { _ in try LocalPostgresCluster.freePort() }
        onlyPorts = try gateways.map { _ in try LocalPostgresCluster.freePort() }
        configuration = Self.configuration(ports: ports, onlyPorts: onlyPorts, gateways: gateways, maxConnections: maxConnections)
        let file = directory + "/haproxy.cfg"
        try configuration.write(toFile: file, atomically: true, encoding: .utf8)
        let argv = ["/usr/bin/timeout", "--kill-after=5", "\(lifetime)", Self.program, "-db", "-f", file]
        // A process group of its own from the start (`timeout` makes one too), for ``stop()``.
        pid = try LocalPostgresCluster.spawn(argv, output: directory + "/haproxy.log", ownGroup: true)
        let deadline = ContinuousClock.now + .seconds(30)
        while !(ports + onlyPorts).allSatisfy(Self.accepts) {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid || ContinuousClock.now > deadline {
                let log = (try? String(contentsOfFile: directory + "/haproxy.log", encoding: .utf8)) ?? ""
                stop()
                throw ReplicationError.server("HAProxy did not start: \(log.split(separator: "\n").suffix(3).joined(separator: " | "))")
            }
            usleep(20_000)
        }
    }

    deinit { stop() }

    /// The configuration, Operating.md's: HTTP mode (each request is balanced on its own, and a
    /// connection a gateway closes, draining, is the proxy's to replace, not the device's), round
    /// robin without stickiness, the PROXY protocol version 2 to the gateways (their checks send it
    /// too, as LOCAL), a check of each gateway's `/readyz` every 250 ms that takes it out at the second
    /// failure (killed, or draining), and a request whose connection a gateway refuses sent to another.
    public static func configuration(ports: [Int], onlyPorts: [Int], gateways: [Int], maxConnections: Int) -> String {
        let binds = ports.map { "    bind 127.0.0.1:\($0)" }.joined(separator: "\n")
        let servers = gateways.enumerated().map { "    server gateway\($0.offset) 127.0.0.1:\($0.element)" }.joined(separator: "\n")
        var text = """
            global
                maxconn \(maxConnections)

            defaults
                mode http
                timeout connect 2s
                # A live stream is one long answer with a heartbeat every 15 s: these cut only dead ones.
                timeout client 1h
                timeout server 1h
                timeout http-keep-alive 10s
                timeout check 2s
                # A request whose connection a gateway refuses (killed, or gone) goes to another.
                retries 3
                option redispatch 1
                default-server send-proxy-v2

            frontend gateways
            \(binds)
                maxconn \(maxConnections)
                default_backend gateways

            backend gateways
                balance roundrobin
                option httpchk GET /readyz
                http-check expect status 200
                # Out at the second failed check: a gateway busy opening thousands of streams may
                # miss one (a killed one's connections are refused, and sent elsewhere, at once).
                default-server check inter 250ms fall 2 rise 1
            \(servers)

            """
        for (index, port) in gateways.enumerated() {
            text += """

                frontend only\(index)
                    bind 127.0.0.1:\(onlyPorts[index])
                    default_backend only\(index)

                backend only\(index)
                    server gateway\(index) 127.0.0.1:\(port)

                """
        }
        return text
    }

    /// Ends the proxy: SIGKILL to `timeout`'s process group, which holds HAProxy (`timeout` makes a
    /// group of its own). A signal to `timeout` alone left HAProxy running when `timeout` was killed
    /// (measured: proxies orphaned by tests that stopped them). The proxy keeps nothing to flush.
    public func stop() {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == 0 else { return }
        kill(-pid, SIGKILL)
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
    }

    /// Whether something accepts a TCP connection on 127.0.0.1:`port`.
    static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
#endif
