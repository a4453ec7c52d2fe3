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
/// The registration lives in the container's `.sync-agent` file, readable by its owner only (mode
/// 0600): it holds the endpoint and its credential, which never enter the store, so no catalog, dump,
/// `kvtool serve` page or log shows them. A file that is a link, belongs to another user, or is readable
/// by others is refused, never followed nor run: a co-tenant cannot make a request start a program of
/// its choosing.
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

    /// The file's name in the container.
    public static let fileName = ".sync-agent"
    /// Where started agents write their standard output and error, in the container (0600; kept under
    /// ``maxLogBytes``: a longer log is moved to `.sync-agent.log.1` before the next start).
    public static let logName = ".sync-agent.log"
    public static let maxLogBytes = 1 << 20
    /// A registration is at most this long.
    public static let maxBytes = 64 << 10

    /// The container's registration, or `nil` when none is.
    ///
    /// - Throws: ``SyncError/invalidAgentRegistration(_:)`` for a file that is a link, not a regular
    ///   file, not this user's, readable or writable by others, too long or not a registration.
    public static func load(from container: SharedContainer) throws -> SyncAgentRegistration? {
        let path = container.path + "/" + fileName
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT { return nil }
            if code == ELOOP { throw SyncError.invalidAgentRegistration("\(path) is a symbolic link; it is not followed") }
            throw KVStoreError.io(operation: "open", path: path, errno: code)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw KVStoreError.io(operation: "stat", path: path, errno: errno) }
        guard info.st_mode & S_IFMT == S_IFREG else { throw SyncError.invalidAgentRegistration("\(path) is not a regular file") }
        guard info.st_uid == geteuid() else {
            throw SyncError.invalidAgentRegistration("\(path) belongs to uid \(info.st_uid), not this user; it is not run")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw SyncError.invalidAgentRegistration("\(path) is readable or writable by others (mode \(String(info.st_mode & 0o777, radix: 8))); it must be 0600")
        }
        guard info.st_size <= maxBytes else { throw SyncError.invalidAgentRegistration("\(path) is longer than \(maxBytes) bytes") }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count >= 0, count <= maxBytes else { throw SyncError.invalidAgentRegistration("\(path) could not be read whole") }
        let registration: SyncAgentRegistration
        do {
            registration = try JSONDecoder().decode(SyncAgentRegistration.self, from: Data(bytes[0..<count]))
        } catch {
            throw SyncError.invalidAgentRegistration("\(path) is not a sync agent registration")
        }
        try registration.validate(path: path)
        return registration
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

    /// Whether the container has a registration file (not whether it is valid).
    public static func exists(in container: SharedContainer) -> Bool {
        var info = stat()
        return lstat(container.path + "/" + fileName, &info) == 0
    }

    /// Writes this registration into the container (mode 0600, replacing any other whole: a reader
    /// sees the old file or the new one).
    public func save(in container: SharedContainer) throws {
        let path = container.path + "/" + SyncAgentRegistration.fileName
        try validate(path: path)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(self)
        guard data.count <= Self.maxBytes else { throw SyncError.invalidAgentRegistration("the registration is longer than \(Self.maxBytes) bytes") }
        let temporary = path + ".tmp.\(getpid())"
        unlink(temporary)
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
    }

    /// Removes the container's registration; returns whether there was one.
    @discardableResult
    public static func remove(from container: SharedContainer) throws -> Bool {
        let path = container.path + "/" + fileName
        guard unlink(path) == 0 else {
            if errno == ENOENT { return false }
            throw KVStoreError.io(operation: "remove", path: path, errno: errno)
        }
        return true
    }
}

/// An agent a request started.
final class StartedAgent: @unchecked Sendable {
    let pid: pid_t
    private(set) var exitStatus: Int32?

    init(pid: pid_t) { self.pid = pid }

    /// Starts `registration`'s program detached (a session of its own, standard input on `/dev/null`,
    /// output and errors appended to the container's ``SyncAgentRegistration/logName``), without the
    /// sync endpoint variables of this process's environment: the agent syncs with the registered
    /// endpoint. A log that is a link is not followed: the agent then fails to start.
    static func start(_ registration: SyncAgentRegistration, in container: SharedContainer) throws -> StartedAgent {
        let log = container.path + "/" + SyncAgentRegistration.logName
        var info = stat()
        if lstat(log, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_size > SyncAgentRegistration.maxLogBytes {
            rename(log, log + ".1")
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // POSIX_SPAWN_SETSID (glibc 2.26), which Swift does not import: it is defined for _GNU_SOURCE only.
        posix_spawnattr_setflags(&attributes, 0x80)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
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
    func hasExited() -> Bool {
        if exitStatus != nil { return true }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return false }
        exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return true
    }

    /// Reaps it when it exits, on a thread of its own, so that it never stays a zombie of a process
    /// that lives on.
    func reapWhenDone() {
        guard !hasExited() else { return }
        let pid = self.pid
        try? SystemCall.startThread {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
    }
}
