#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// Where registrations are kept: outside every container (issue 47).
///
/// A registration in the container could be rewritten by any process that can write the container (a
/// same-user co-tenant, a widget confined to it): one rewrote `.sync-agent` to `/bin/sh -c …`, and the
/// next request ran it, the credential within its reach. The registration, its credential with it, is
/// therefore kept in the user's configuration directory, `$XDG_CONFIG_HOME/kvstore/sync-agents/`
/// (`~/.config/kvstore/sync-agents/` when `$XDG_CONFIG_HOME` is not an absolute path), a directory of
/// mode 0700 that only the app's registration (`kvtool sync agent set`) writes, one file (0600) per
/// container, named after the group and a digest of the container's real path and naming that path
/// inside. A request runs only the program registered there; a `.sync-agent` in the container is a
/// registration from before issue 47, never run.
extension SyncAgentRegistration {
    /// The registration as its file holds it: the container it was made for, and the registration.
    struct Stored: Codable {
        var container: String
        var registration: SyncAgentRegistration
    }

    /// The directory of registrations: `$XDG_CONFIG_HOME/kvstore/sync-agents`, else
    /// `$HOME/.config/kvstore/sync-agents`, else the same under the user's home in the password
    /// database (relative values are ignored, as the XDG specification says).
    ///
    /// - Throws: ``SyncError/invalidAgentRegistration(_:)`` when no absolute directory is known.
    public static func registryDirectory() throws -> String {
        func absolute(_ name: String) -> String? {
            guard let value = getenv(name).map({ String(cString: $0) }), value.hasPrefix("/") else { return nil }
            return value
        }
        if let config = absolute("XDG_CONFIG_HOME") { return config + "/kvstore/sync-agents" }
        var home = absolute("HOME")
        if home == nil, let entry = getpwuid(geteuid()), let directory = entry.pointee.pw_dir {
            let text = String(cString: directory)
            if text.hasPrefix("/") { home = text }
        }
        guard let home else {
            throw SyncError.invalidAgentRegistration("no directory outside the container to keep it in: set XDG_CONFIG_HOME or HOME to an absolute path")
        }
        return home + "/.config/kvstore/sync-agents"
    }

    /// The container as its registration names it: its real path (links in the root resolved), so
    /// that every spelling of one container finds one registration.
    static func registryKey(for container: SharedContainer) -> String {
        guard let resolved = realpath(container.path, nil) else { return container.path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The file of `container`'s registration: `<group>-<16 hex digits of the SHA-256 of its real
    /// path>.json` in ``registryDirectory()``.
    public static func registrationPath(for container: SharedContainer) throws -> String {
        let key = registryKey(for: container)
        let digest = SHA256.hex(SHA256.hash(Array(key.utf8))).prefix(16)
        return try registryDirectory() + "/" + container.groupIdentifier.rawValue.prefix(200) + "-" + digest + ".json"
    }

    /// ``registryDirectory()``, made (mode 0700) if missing.
    ///
    /// - Throws: ``KVStore/KVStoreError/unsafeFile(path:reason:)`` when it is not a directory of this
    ///   user that no one else may write.
    static func makeRegistryDirectory() throws -> String {
        let directory = try registryDirectory()
        var prefix = ""
        for component in directory.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw KVStoreError.io(operation: "create the directory", path: prefix, errno: errno)
            }
        }
        var info = stat()
        guard lstat(directory, &info) == 0 else { throw KVStoreError.io(operation: "stat", path: directory, errno: errno) }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw KVStoreError.unsafeFile(path: directory, reason: "it is not a directory")
        }
        guard info.st_uid == geteuid(), info.st_mode & 0o022 == 0 else {
            throw KVStoreError.unsafeFile(path: directory, reason: "it belongs to another user or others may write it (mode \(String(info.st_mode & 0o777, radix: 8)))")
        }
        return directory
    }

    /// The bytes of the registration file at `path`, or `nil` when there is none: opened without
    /// blocking or following a link (``AgentFile``), a regular file of this user, mode 0600, at most
    /// ``maxBytes``.
    static func readPrivate(_ path: String) throws -> [UInt8]? {
        let opened: Int32?
        do {
            opened = try AgentFile.open(path, flags: O_RDONLY)
        } catch KVStoreError.unsafeFile(_, let reason) {
            throw SyncError.invalidAgentRegistration("\(path): \(reason); it is not run")
        }
        guard let fd = opened else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw KVStoreError.io(operation: "stat", path: path, errno: errno) }
        guard info.st_mode & 0o077 == 0 else {
            throw SyncError.invalidAgentRegistration("\(path) is readable or writable by others (mode \(String(info.st_mode & 0o777, radix: 8))); it must be 0600")
        }
        guard info.st_size <= maxBytes else { throw SyncError.invalidAgentRegistration("\(path) is longer than \(maxBytes) bytes") }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
        var count = 0
        while count < bytes.count {
            let read = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
            if read < 0 && errno == EINTR { continue }
            guard read >= 0 else { throw KVStoreError.io(operation: "read", path: path, errno: errno) }
            if read == 0 { break }
            count += read
        }
        guard count <= maxBytes else { throw SyncError.invalidAgentRegistration("\(path) is longer than \(maxBytes) bytes") }
        return Array(bytes[0..<count])
    }

    /// The registration from before issue 47 in `container` (its `.sync-agent`), read with the same
    /// care, or `nil` when there is none. Never run: see ``migrateLegacy(in:ifArgumentsAre:)``.
    static func loadLegacy(from container: SharedContainer) throws -> SyncAgentRegistration? {
        let path = container.path + "/" + fileName
        guard let bytes = try readPrivate(path) else { return nil }
        guard let registration = try? JSONDecoder().decode(SyncAgentRegistration.self, from: Data(bytes)) else {
            throw SyncError.invalidAgentRegistration("\(path) is not a sync agent registration")
        }
        try registration.validate(path: path)
        return registration
    }

    /// Moves a registration from before issue 47 out of `container`, when no registration is kept
    /// outside it yet and the old one's program and arguments are exactly `expected`: what the
    /// caller's own registration command writes (`kvtool` passes itself, run as `sync run --once
    /// --exit-when-idle` on this container). Its endpoint and credential go with it, and the
    /// container's copy is removed. Any other program in the container is left where it is and never
    /// run: the app registers it again. Returns whether it moved one.
    ///
    /// Why only that program: the container's file may have been rewritten by a co-tenant, and
    /// moving it out would make the co-tenant's choice the registered one. A registration naming the
    /// caller itself runs nothing a co-tenant chose; at worst, its endpoint is one a co-tenant chose,
    /// which the agent then syncs the container with: the co-tenant could read and write that data
    /// already.
    @discardableResult
    public static func migrateLegacy(in container: SharedContainer, ifArgumentsAre expected: [String]) throws -> Bool {
        var info = stat()
        guard lstat(container.path + "/" + fileName, &info) == 0 else { return false }
        guard try readPrivate(try registrationPath(for: container)) == nil else { return false }
        guard let legacy = try loadLegacy(from: container), legacy.arguments == expected else { return false }
        try legacy.save(in: container)
        return true
    }
}
