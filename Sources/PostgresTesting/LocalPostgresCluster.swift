#if PostgreSQL
import Foundation
import KVStore
import SyncKitPostgres
#if canImport(Glibc)
import Glibc
#endif

/// A throwaway PostgreSQL cluster in a temporary directory, for demos and tests: `initdb`, a server on
/// a free loopback port and a Unix socket directory, and `pg_ctl stop` at the end. Never for data that
/// matters: it runs with `fsync=off`.
///
/// Debian's `postgresql` package puts the server programs in `/usr/lib/postgresql/VERSION/bin`;
/// `$KVSTORE_PG_BIN` overrides. `initdb` refuses to run as root, so as root the cluster belongs to
/// the `postgres` user (`runuser -u postgres`).
public final class LocalPostgresCluster: Sendable {
    public let directory: String
    /// The loopback port the server listens on (chosen when the cluster is made, unless given).
    public var port: Int { chosenPort.withLock { $0 } }
    /// Set only while the cluster is made (a port taken meanwhile is replaced); a lock, so that the
    /// cluster is Sendable without a check.
    private let chosenPort: Locked<Int>
    public let user = "kv"
    public let database = "kv"
    let binaries: String
    let asPostgresUser: Bool

    /// The server over TCP on 127.0.0.1.
    public var tcpURL: ServerURL {
        ServerURL(endpoint: .tcp(host: "127.0.0.1", port: port), user: user, database: database)
    }

    /// The login a sync gateway uses: a member of `kvsync_gateway` and of nothing else.
    public static let gatewayLogin = "kvsync_gateway_login"

    /// The server over TCP as ``gatewayLogin``, which ``prepareForGateways(maxClockSkew:)`` makes.
    public var gatewayURL: ServerURL {
        ServerURL(endpoint: .tcp(host: "127.0.0.1", port: port), user: Self.gatewayLogin, database: database)
    }

    /// The owner's step before a gateway starts (`kvtool sync setup --gateway-login`): the schema,
    /// the role `kvsync_gateway`, and the login ``gatewayLogin``; returns ``gatewayURL``.
    @discardableResult
    public func prepareForGateways(maxClockSkew: Duration? = nil) async throws -> ServerURL {
        try await SyncServerSetup.prepare(on: tcpURL, gatewayLogin: Self.gatewayLogin, maxClockSkew: maxClockSkew)
        return gatewayURL
    }

    /// The server through its Unix socket.
    public var socketURL: ServerURL {
        ServerURL(endpoint: .unixSocket(path: socketDirectory + "/.s.PGSQL.\(port)"), user: user, database: database)
    }

    /// More `postgres` options for the next ``start()`` (`-c ssl=on`, say).
    public var serverOptions: [String] {
        get { options.withLock { $0 } }
        set { options.withLock { $0 = newValue } }
    }
    private let options = Locked<[String]>([])

    public var socketDirectory: String { directory + "/socket" }
    var dataDirectory: String { directory + "/data" }

    /// The running server's process id (the first line of `postmaster.pid`), or nil when it is stopped.
    public var serverProcessID: Int32? {
        guard let text = try? String(contentsOfFile: dataDirectory + "/postmaster.pid", encoding: .utf8) else { return nil }
        return text.split(separator: "\n").first.flatMap { Int32($0) }
    }
    var logFile: String { directory + "/server.log" }

    /// Creates the cluster and starts its server.
    ///
    /// - Throws: ``ReplicationError/server(_:)`` naming the step that failed (PostgreSQL not
    ///   installed, `initdb` or `pg_ctl` failing, with the end of the server's log).
    /// - Parameter tryingFirst: a port to try first when `port` is nil, as if it had been found free
    ///   (for the test of what happens when a port found free is taken before the server binds it).
    public convenience init(port: Int? = nil, tryingFirst firstPort: Int? = nil) throws {
        try self.init(port: port, tryingFirst: firstPort, makeData: { cluster in
            try cluster.run(cluster.binaries + "/initdb", ["-D", cluster.dataDirectory, "-U", cluster.user, "-A", "trust", "--no-sync", "-E", "UTF8"])
        }, afterStart: { cluster in
            try cluster.run(cluster.binaries + "/createdb", ["-h", cluster.socketDirectory, "-p", "\(cluster.port)", "-U", cluster.user, cluster.database])
        })
    }

    /// Makes the temporary directory, fills the data directory with `makeData` (`initdb`, or a base
    /// backup of another cluster), starts the server and then runs `afterStart`.
    init(port: Int?, tryingFirst firstPort: Int?, makeData: (LocalPostgresCluster) throws -> Void,
         afterStart: (LocalPostgresCluster) throws -> Void) throws {
        binaries = try Self.findBinaries()
        asPostgresUser = geteuid() == 0
        var template = Array((NSTemporaryDirectory() + "kvsync-pg-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw ReplicationError.server("cannot make a temporary directory") }
        directory = String(cString: made)
        chosenPort = Locked(try port ?? firstPort ?? Self.freePort())
        do {
            try FileManager.default.createDirectory(atPath: socketDirectory, withIntermediateDirectories: true)
            if asPostgresUser {
                try run("/bin/chown", ["-R", "postgres:postgres", directory], asPostgres: false)
                chmod(directory, 0o755)
            }
            try makeData(self)
            // A port found free can be taken before the server binds it (by another test's server,
            // or as the source port of any outgoing connection, from the same ephemeral range): then
            // the server is started again on another one, up to 5 times. A port that was given is kept.
            var attempt = 1
            while true {
                do {
                    try start()
                    break
                } catch ReplicationError.server(let message) where port == nil && attempt < 5
                            && message.contains("Address already in use") {
                    attempt += 1
                    let fresh = try Self.freePort()
                    chosenPort.withLock { $0 = fresh }
                }
            }
            try afterStart(self)
        } catch {
            try? stop()
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    deinit {
        let (directory, binaries, asPostgres) = (directory, binaries, asPostgresUser)
        let teardown: @Sendable () -> Void = {
            try? Self.stopServer(binaries: binaries, directory: directory, asPostgres: asPostgres, immediate: false)
            try? FileManager.default.removeItem(atPath: directory)
        }
        // The last reference often goes in a test's task: `pg_ctl stop` waits up to seconds, and on a
        // thread of the cooperative pool (two on the CI machine) it held every other test's tasks up.
        // There it runs on a thread of its own, which the process waits for at its exit.
        guard withUnsafeCurrentTask(body: { $0 != nil }) else { return teardown() }
        Self.pendingTeardowns.begin()
        Thread.detachNewThread {
            teardown()
            Self.pendingTeardowns.end()
        }
    }

    /// Clusters being stopped on threads of their own (``deinit``): the process's exit waits for them
    /// (up to a minute), so that no server outlives its tests.
    static let pendingTeardowns = PendingTeardowns()

    final class PendingTeardowns: Sendable {
        private let count = Locked(0)
        private let registered = Locked(false)

        func begin() {
            count.withLock { $0 += 1 }
            let first = registered.withLock { done -> Bool in
                defer { done = true }
                return !done
            }
            if first { atexit { LocalPostgresCluster.pendingTeardowns.waitForAll() } }
        }

        func end() { count.withLock { $0 -= 1 } }

        func waitForAll() {
            let deadline = ContinuousClock.now + .seconds(60)
            while count.withLock({ $0 }) > 0 && ContinuousClock.now < deadline { usleep(10_000) }
        }
    }

    /// Starts the server (again, after ``stop(immediate:)``) and waits until it accepts connections.
    public func start() throws {
        try run(binaries + "/pg_ctl", [
            "-D", dataDirectory, "-l", logFile, "-w", "-t", "60",
            "-o", "-p \(port) -k \(socketDirectory) -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=200"
                + serverOptions.map { " " + $0 }.joined(),
            "start",
        ])
    }

    /// Stops the server: `immediate` is `pg_ctl stop -m immediate`, a crash as far as clients can tell.
    public func stop(immediate: Bool = false) throws {
        try Self.stopServer(binaries: binaries, directory: directory, asPostgres: asPostgresUser, immediate: immediate)
    }

    static func stopServer(binaries: String, directory: String, asPostgres: Bool, immediate: Bool) throws {
        let dataDirectory = directory + "/data"
        guard FileManager.default.fileExists(atPath: dataDirectory + "/postmaster.pid") else { return }
        try run(binaries + "/pg_ctl", ["-D", dataDirectory, "-m", immediate ? "immediate" : "fast", "-w", "-t", "60", "stop"],
                asPostgres: asPostgres, directory: directory)
    }

    /// Runs SQL through `psql` (for tests that plant rows a replicator never writes), as the owner or
    /// as `user`.
    @discardableResult
    public func psql(_ sql: String, as user: String? = nil) throws -> String {
        try run(binaries + "/psql", ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", socketDirectory, "-p", "\(port)",
                                     "-U", user ?? self.user, "-d", database, "-c", sql])
    }

    /// Runs `program` to completion (killed after 120 s), its output captured in a file: not a pipe,
    /// which the server `pg_ctl start` leaves running could hold open.
    @discardableResult
    func run(_ program: String, _ arguments: [String], asPostgres: Bool? = nil) throws -> String {
        try Self.run(program, arguments, asPostgres: asPostgres ?? asPostgresUser, directory: directory)
    }

    @discardableResult
    static func run(_ program: String, _ arguments: [String], asPostgres: Bool, directory: String) throws -> String {
        let logFile = directory + "/server.log"
        let argv = asPostgres ? ["/usr/sbin/runuser", "-u", "postgres", "--", program] + arguments
                              : [program] + arguments
        let outputPath = directory + "/.command-output-\(getpid())"
        unlink(outputPath)
        let pid = try Self.spawn(argv, output: outputPath)
        var status: Int32 = 0
        let deadline = ContinuousClock.now + .seconds(120)
        while waitpid(pid, &status, WNOHANG) == 0 {
            if ContinuousClock.now > deadline {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                break
            }
            usleep(10_000)
        }
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        unlink(outputPath)
        let exited = status & 0x7f == 0
        let code = exited ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        guard code == 0 else {
            let log = (try? String(contentsOfFile: logFile, encoding: .utf8))?.split(separator: "\n").suffix(5).joined(separator: " | ") ?? ""
            let said = text.split(separator: "\n").suffix(3).joined(separator: " | ")
            throw ReplicationError.server("\((program as NSString).lastPathComponent) failed (\(code)): \(said)\(log.isEmpty ? "" : "; log: " + log)")
        }
        return text
    }

    /// Starts `argv` with standard input from /dev/null and its output and errors in the file
    /// `output`, in a process group of its own when `ownGroup`; its process id.
    static func spawn(_ argv: [String], output: String, ownGroup: Bool = false) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else of this process's: a pipe another thread made for its own child (Foundation's
        // pipes are not close-on-exec) would stay open in the server `pg_ctl start` leaves running,
        // and that child's reader would wait for its end as long as the server runs (a test's
        // `openssl req` took 60 s and more that way, though it had exited).
        if let closeFrom = addCloseFrom { _ = closeFrom(&actions, 3) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        if ownGroup {
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
            posix_spawnattr_setpgroup(&attributes, 0)
        }
        var cArguments = argv.map { strdup($0) } + [nil]
        defer { for pointer in cArguments { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, argv[0], &actions, &attributes, &cArguments, environ)
        guard spawned == 0 else { throw ReplicationError.server("cannot run \(argv[0]): errno \(spawned)") }
        return pid
    }

    typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc module
    /// does not export; nil where the C library lacks it.
    static var addCloseFrom: AddCloseFrom? {
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: AddCloseFrom.self)
    }

    static func findBinaries() throws -> String {
        if let explicit = ProcessInfo.processInfo.environment["KVSTORE_PG_BIN"] { return explicit }
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [])
            .compactMap(Int.init).sorted(by: >)
        for version in versions where FileManager.default.isExecutableFile(atPath: "\(root)/\(version)/bin/initdb") {
            return "\(root)/\(version)/bin"
        }
        throw ReplicationError.server("PostgreSQL's server programs are not installed (apt-get install postgresql, or set KVSTORE_PG_BIN)")
    }

    /// A loopback port nothing listens on right now.
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ReplicationError.server("socket() failed: errno \(errno)") }
        defer { Glibc.close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw ReplicationError.server("cannot find a free port: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
#endif
