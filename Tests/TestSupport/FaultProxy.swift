import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy on 127.0.0.1 between clients and a server on this machine, that a test tells to pass
/// traffic, drop it silently (no RST, no FIN: a partition, as a dead Wi-Fi or a NAT that forgot the
/// flow looks to both ends), or cut every connection (RST).
///
/// ```swift
/// let proxy = try FaultProxy(to: cluster.port)
/// proxy.blackHole(after: "FROM kvsync_push(")   // the next push reaches the server; its answer never comes back
/// … ; proxy.heal()
/// ```
///
/// Every thread it starts ends when ``stop()`` runs (also at deinit).
public final class FaultProxy: @unchecked Sendable {
    public enum Mode: Sendable, Equatable {
        /// Bytes go both ways.
        case pass
        /// Bytes in both directions are read and dropped; connections stay open, new ones are accepted
        /// and hear nothing.
        case blackHole
    }

    /// The port clients connect to.
    public let port: Int
    private let target: Int
    private let listener: Int32
    private let lock = NSLock()
    private var mode = Mode.pass
    private var trigger: [UInt8]?
    private var connections: [Connection] = []
    private var stopped = false
    /// How many times a trigger switched the proxy to ``Mode/blackHole``.
    public private(set) var triggered = 0

    private final class Connection: @unchecked Sendable {
        let client: Int32
        let server: Int32
        var blackHoled = false
        /// The trigger passed on this connection: what the client sends still reaches the server (the
        /// rest of the statement), but nothing comes back.
        var answersLost = false
        /// Pumps ended: at 2, both descriptors are closed.
        var finished = 0
        init(client: Int32, server: Int32) { self.client = client; self.server = server }
    }

    /// Listens on a free loopback port and forwards to `127.0.0.1:targetPort`.
    public init(to targetPort: Int) throws {
        target = targetPort
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 128) == 0 else { close(fd); throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    deinit { stop() }

    /// Switches to `mode`. Healing (``Mode/pass``) lets new connections through; a connection that was
    /// black-holed stays so (its client must notice and connect again, as after a real partition).
    public func set(_ mode: Mode) {
        lock.lock(); defer { lock.unlock() }
        self.mode = mode
        if mode == .blackHole { for connection in connections { connection.blackHoled = true } }
        trigger = nil
    }

    /// Passes traffic until a client sends bytes containing `pattern` (a statement's text, say). From
    /// then on, that connection's client still reaches the server (so the statement runs, and
    /// commits) but no answer comes back; every other connection, and every new one, is a black hole.
    public func blackHole(after pattern: String) {
        lock.lock(); defer { lock.unlock() }
        trigger = Array(pattern.utf8)
    }

    public func heal() { set(.pass) }

    /// Closes every connection with an RST (SO_LINGER 0); the proxy keeps listening.
    public func cut() {
        lock.lock()
        let open = connections
        connections = []
        lock.unlock()
        for connection in open {
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(connection.client, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            shutdown(connection.client, Int32(SHUT_RDWR))
            shutdown(connection.server, Int32(SHUT_RDWR))
        }
    }

    /// Stops listening and closes every connection.
    public func stop() {
        lock.lock()
        let already = stopped
        stopped = true
        lock.unlock()
        guard !already else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        cut()
    }

    public var currentMode: Mode { lock.lock(); defer { lock.unlock() }; return mode }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                close(listener)
                return
            }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(port: UInt16(target))
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard server >= 0, connected == 0 else {
                close(client); if server >= 0 { close(server) }
                continue
            }
            let connection = Connection(client: client, server: server)
            lock.lock()
            if stopped { lock.unlock(); close(client); close(server); return }
            connection.blackHoled = mode == .blackHole
            connections.append(connection)
            lock.unlock()
            Thread.detachNewThread { [self] in pump(connection, from: client, to: server, watching: true) }
            Thread.detachNewThread { [self] in pump(connection, from: server, to: client, watching: false) }
        }
    }

    /// Copies `from` to `to` until either end closes; drops what it reads while the connection is
    /// black-holed. The client-to-server direction watches for the trigger.
    private func pump(_ connection: Connection, from: Int32, to: Int32, watching: Bool) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        defer {
            shutdown(to, Int32(SHUT_RDWR))
            shutdown(from, Int32(SHUT_RDWR))
            lock.lock()
            connections.removeAll { $0 === connection }
            connection.finished += 1
            let last = connection.finished == 2
            lock.unlock()
            if last { close(connection.client); close(connection.server) }
        }
        while true {
            let count = read(from, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return }
            lock.lock()
            if !connection.blackHoled, watching, let trigger, Self.contains(buffer[0..<count], trigger) {
                self.trigger = nil
                triggered += 1
                mode = .blackHole
                for open in connections where open !== connection { open.blackHoled = true }
                connection.answersLost = true
            }
            let drop = connection.blackHoled || (!watching && connection.answersLost)
            lock.unlock()
            if !drop {
                var sent = 0
                while sent < count {
                    let n = buffer.withUnsafeBytes { write(to, $0.baseAddress! + sent, count - sent) }
                    if n < 0 && errno == EINTR { continue }
                    guard n > 0 else { return }
                    sent += n
                }
            }
        }
    }

    private static func contains(_ haystack: ArraySlice<UInt8>, _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count, let first = needle.first else { return false }
        var i = haystack.startIndex
        while i <= haystack.endIndex - needle.count {
            if haystack[i] == first && haystack[i..<(i + needle.count)].elementsEqual(needle) { return true }
            i += 1
        }
        return false
    }
}
