#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// The program a request starts when no process owns a container's sync: registered once per container
/// (`kvtool sync agent set`), started detached, it takes the sync lock, syncs, and exits.
///
/// The registration lives outside the container (issue 47), in the user's configuration directory
/// (``registrationPath(for:)``: `$XDG_CONFIG_HOME/kvstore/sync-agents/`, mode 0700, one file of mode
/// 0600 per container), which only the app's registration writes: it holds the program, the endpoint
/// and its credential, none of which is in the container, so no co-tenant confined to the container
/// (a widget, an extension) can read the credential or choose the program, and no catalog, dump,
/// `kvtool serve` page or log shows them. A file that is a link, a FIFO, a socket or a device, belongs
/// to another user, or is readable by others is refused, never followed nor run. A `.sync-agent` in the
/// container (where registrations were kept before) is never run: ``migrateLegacy(in:ifArgumentsAre:)``
/// moves the registering program's own out of it.
public struct SyncAgentRegistration: Codable, Hashable, Sendable, CustomStringConvertible {
    /// The program and its arguments; the first is an absolute path.
    public var arguments: [String]
    /// The endpoint the agent syncs with (a `postgres://` URL or a gateway's `http(s)://`); a secret
    /// when it holds a password.
    public var server: String?
    /// The gateway credential.
    public var token: String?
    /// PEM certificates to trust for an `https://` gateway.
    public var caFile: String?
    public var allowInsecureHTTP: Bool

    public init(arguments: [String], server: String? = nil, token: String? = nil, caFile: String? = nil,
                allowInsecureHTTP: Bool = false) {
        self.arguments = arguments
        self.server = server
        self.token = token
        self.caFile = caFile
        self.allowInsecureHTTP = allowInsecureHTTP
    }

    /// The program, without the endpoint or the credential.
    public var description: String { arguments.joined(separator: " ") }

    /// The name of the registration file containers held before issue 47 (never run now: see
    /// ``migrateLegacy(in:ifArgumentsAre:)``).
    public static let fileName = ".sync-agent"
    /// Where started agents write their standard output and error, in the container (0600; kept under
    /// ``maxLogBytes``: a longer log is moved to `.sync-agent.log.1` before the next start). It holds
    /// what the agent prints, never its credential.
    public static let logName = ".sync-agent.log"
    public static let maxLogBytes = 1 << 20
    /// A registration is at most this long.
    public static let maxBytes = 64 << 10

    /// The container's registration, or `nil` when none is.
    ///
    /// - Throws: ``SyncError/invalidAgentRegistration(_:)`` for a file that is a link, not a regular
    ///   file, not this user's, readable or writable by others, too long, not a registration, or made
    ///   for another container; and when no registration is kept outside the container but the
    ///   container holds one from before issue 47, which is never run (the app registers it again, or
    ///   ``migrateLegacy(in:ifArgumentsAre:)`` moves its own out).
    public static func load(from container: SharedContainer) throws -> SyncAgentRegistration? {
        let path = try registrationPath(for: container)
        if let bytes = try readPrivate(path) {
            guard let stored = try? JSONDecoder().decode(Stored.self, from: Data(bytes)) else {
                throw SyncError.invalidAgentRegistration("\(path) is not a sync agent registration")
            }
            guard stored.container == registryKey(for: container) else {
                throw SyncError.invalidAgentRegistration("\(path) registers the agent of \(stored.container), not of \(container.path)")
            }
            try stored.registration.validate(path: path)
            return stored.registration
        }
        guard try loadLegacy(from: container) != nil else { return nil }
        throw SyncError.invalidAgentRegistration(
            "\(container.path)/\(fileName) is a registration in the container, where a co-tenant can rewrite it; it is not run "
                + "(registrations are kept in \(try registryDirectory()) since issue 47)")
    }

    func validate(path: String) throws {
        guard let program = arguments.first, program.hasPrefix("/") else {
            throw SyncError.invalidAgentRegistration("\(path): the agent's program must be an absolute path")
        }
        guard arguments.count <= 64, arguments.allSatisfy({ !$0.utf8.contains(0) }) else {
            throw SyncError.invalidAgentRegistration("\(path): at most 64 arguments, none holding a NUL byte")
        }
    }

    /// The command that registers an agent for `container`, as advice after a request found none
    /// (or one it cannot start): "to register one: kvtool --root ROOT --group GROUP sync agent set
    /// --server URL". It names the container's root and group, so that it works as printed in any
    /// shell, whatever its `KVSTORE_ROOT` and `KVSTORE_GROUP`; only `URL`, the endpoint, is left to
    /// fill in (a gateway's also takes `--token-file FILE`).
    public static func advice(for container: SharedContainer, replacing: Bool) -> String {
        "\(replacing ? "to replace it" : "to register one"): kvtool --root \(shellQuoted(container.layout.root)) "
            + "--group \(shellQuoted(container.groupIdentifier.rawValue)) sync agent set --server URL"
    }

    /// `text` as one word of a POSIX shell: as it is when it holds only characters no shell reads
    /// specially, else in single quotes.
    static func shellQuoted(_ text: String) -> String {
        let plain = !text.isEmpty && text.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || "/._-+:@%,=".utf8.contains(byte)
        }
        guard !plain else { return text }
        // A quote ends the quoted word, is escaped, and opens it again (no string processing linked:
        // the lean extensions print this).
        var quoted = "'"
        for character in text { quoted += character == "'" ? "'\\''" : String(character) }
        return quoted + "'"
    }

    /// Whether the container has a registration (not whether it is valid): kept outside it, or a
    /// `.sync-agent` from before issue 47 in it.
    public static func exists(in container: SharedContainer) -> Bool {
        var info = stat()
        if let path = try? registrationPath(for: container), lstat(path, &info) == 0 { return true }
        return lstat(container.path + "/" + fileName, &info) == 0
    }

    /// Writes this registration as `container`'s, outside it (``registrationPath(for:)``: mode 0600 in
    /// a directory of mode 0700, replacing any other whole: a reader sees the old file or the new
    /// one), and removes the container's `.sync-agent` from before issue 47, so that no credential
    /// stays in the container.
    public func save(in container: SharedContainer) throws {
        let directory = try Self.makeRegistryDirectory()
        let path = try Self.registrationPath(for: container)
        try validate(path: path)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(Stored(container: Self.registryKey(for: container), registration: self))
        guard data.count <= Self.maxBytes else { throw SyncError.invalidAgentRegistration("the registration is longer than \(Self.maxBytes) bytes") }
        let temporary = directory + "/.tmp.\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw KVStoreError.io(operation: "create", path: temporary, errno: errno) }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == data.count, synced else {
            let code = errno
            unlink(temporary)
            throw KVStoreError.io(operation: "write", path: temporary, errno: code)
        }
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw KVStoreError.io(operation: "rename into place", path: path, errno: code)
        }
        let legacy = container.path + "/" + Self.fileName
        guard unlink(legacy) == 0 || errno == ENOENT else {
            throw KVStoreError.io(operation: "remove the registration from before issue 47", path: legacy, errno: errno)
        }
    }

    /// Removes the container's registration (and a `.sync-agent` from before issue 47 in it); returns
    /// whether there was one.
    @discardableResult
    public static func remove(from container: SharedContainer) throws -> Bool {
        var removed = false
        for path in [try registrationPath(for: container), container.path + "/" + fileName] {
            if unlink(path) == 0 {
                removed = true
            } else if errno != ENOENT {
                throw KVStoreError.io(operation: "remove", path: path, errno: errno)
            }
        }
        return removed
    }
}

/// An agent a request started (a value: the request's rounds keep it).
struct StartedAgent: Sendable {
    let pid: pid_t
    private(set) var exitStatus: Int32?

    init(pid: pid_t) { self.pid = pid }

    /// Starts `registration`'s program detached (a session of its own, standard input on `/dev/null`,
    /// output and errors appended to the container's ``SyncAgentRegistration/logName``), without the
    /// sync endpoint variables of this process's environment: the agent syncs with the registered
    /// endpoint.
    ///
    /// This process opens every file the agent starts with, and hands it the descriptors: the child
    /// opens nothing between its fork and its `exec`, where a FIFO planted at the log blocked it in
    /// `open` for good, and this process (waiting for the `exec`) with it, deaf to SIGTERM (issue 47).
    /// The log is opened as ``AgentFile`` opens: a link, a FIFO, a socket, a device or another user's
    /// file is refused, naming the path, and nothing is started.
    static func start(_ registration: SyncAgentRegistration, in container: SharedContainer) throws -> StartedAgent {
        let logPath = container.path + "/" + SyncAgentRegistration.logName
        guard var log = try AgentFile.open(logPath, flags: O_WRONLY | O_APPEND, create: true) else {
            throw KVStoreError.io(operation: "open", path: logPath, errno: ENOENT)
        }
        var info = stat()
        if fstat(log, &info) == 0, info.st_size > SyncAgentRegistration.maxLogBytes {
            close(log)
            rename(logPath, logPath + ".1")
            guard let fresh = try AgentFile.open(logPath, flags: O_WRONLY | O_APPEND, create: true) else {
                throw KVStoreError.io(operation: "open", path: logPath, errno: ENOENT)
            }
            log = fresh
        }
        defer { close(log) }
        let input = open("/dev/null", O_RDONLY | O_CLOEXEC | O_NOCTTY)
        guard input >= 0 else { throw KVStoreError.io(operation: "open", path: "/dev/null", errno: errno) }
        defer { close(input) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // POSIX_SPAWN_SETSID (glibc 2.26), which Swift does not import: it is defined for _GNU_SOURCE only.
        posix_spawnattr_setflags(&attributes, 0x80)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // (dup2 clears close-on-exec on the copies; the originals close at the exec.)
        posix_spawn_file_actions_adddup2(&actions, input, 0)
        posix_spawn_file_actions_adddup2(&actions, log, 1)
        posix_spawn_file_actions_adddup2(&actions, log, 2)
        // Nothing else of the requester's: its descriptors are not all close-on-exec (Foundation's
        // pipes are not), and an agent holding the pipe of `$(kvtool sync request)` kept the caller
        // waiting until the agent exited, up to its --give-up-after.
        Self.closeFrom(3, in: &actions)
        var environment: [String] = []
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if !text.hasPrefix("KVSTORE_SYNC_SERVER=") && !text.hasPrefix("KVSTORE_SYNC_TOKEN=") { environment.append(text) }
            entry += 1
        }
        // Allocated and freed by Swift (not strdup and free: in a lean process under ThreadSanitizer,
        // libc's strdup bypasses the sanitizer's allocator, and freeing its copy failed a check).
        var argv = Self.cStrings(registration.arguments)
        var envp = Self.cStrings(environment)
        defer {
            for pointer in argv { pointer?.deallocate() }
            for pointer in envp { pointer?.deallocate() }
        }
        var pid = pid_t()
        let code = posix_spawn(&pid, registration.arguments[0], &actions, &attributes, &argv, &envp)
        guard code == 0 else { throw KVStoreError.io(operation: "start the sync agent", path: registration.arguments[0], errno: code) }
        return StartedAgent(pid: pid)
    }

    /// NUL-terminated copies of `strings`, then a `nil`: an `argv` or `envp`.
    static func cStrings(_ strings: [String]) -> [UnsafeMutablePointer<CChar>?] {
        strings.map { string -> UnsafeMutablePointer<CChar>? in
            let bytes = Array(string.utf8CString)
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count)
            copy.initialize(from: bytes, count: bytes.count)
            return copy
        } + [nil]
    }

    typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// Closes every descriptor from `lowest` up in the started process: glibc's
    /// `posix_spawn_file_actions_addclosefrom_np` (2.34 and later, which Swift's Glibc module does not
    /// export), or else each descriptor `/proc/self/fd` lists now.
    static func closeFrom(_ lowest: Int32, in actions: inout posix_spawn_file_actions_t) {
        if let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") {
            _ = unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, lowest)
            return
        }
        guard let directory = opendir("/proc/self/fd") else { return }
        let own = dirfd(directory)
        var open: [Int32] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let fd = Int32(name), fd >= lowest, fd != own { open.append(fd) }
        }
        closedir(directory)
        for fd in open { posix_spawn_file_actions_addclose(&actions, fd) }
    }

    /// Whether it has exited (reaped here, without waiting).
    mutating func hasExited() -> Bool {
        if exitStatus != nil { return true }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return false }
        exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return true
    }

    /// Reaps it when it exits, so that it never stays a zombie of a process that lives on: looked at
    /// by a timer of the process's ``KVStore/Watcher`` (no thread waits in `waitpid` for it).
    func reapWhenDone() {
        guard exitStatus == nil else { return }
        Self.reap(pid)
    }

    /// How often ``reapWhenDone()`` looks whether the agent exited.
    static let reapInterval: Duration = .milliseconds(200)

    private static func reap(_ pid: pid_t) {
        var status: Int32 = 0
        var result: pid_t
        repeat { result = waitpid(pid, &status, WNOHANG) } while result < 0 && errno == EINTR
        // Exited and reaped, or not a child of this process any more.
        guard result == 0 else { return }
        _ = try? Watcher.shared.arm([], until: .now + reapInterval) { _ in reap(pid) }
    }
}
