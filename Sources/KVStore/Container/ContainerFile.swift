#if canImport(Glibc)
import Glibc
#endif

/// The one way a library process opens a file of a container: the store's `lock.mdb` and `data.mdb`,
/// `.sync.lock`, the snapshot and feed lock files, `Notify/` files and published snapshots. Anything a
/// co-tenant plants at the name (a FIFO, a socket, a device, a symbolic link, a regular file it holds
/// a lease on) makes the open fail at once, with one line naming the path and what is there: it never
/// blocks the process, and nothing is read, written or locked through it.
///
/// - `openat` under a descriptor of the directory (itself reached without following a link) with
///   `O_NOFOLLOW`: a symbolic link at the name fails with `ELOOP` and is never followed.
/// - `O_NONBLOCK`: opening a FIFO never waits for a process at its other end (a read-only open returns
///   at once, a write-only one fails with `ENXIO`), a device's open does not wait for the device, and a
///   regular file on which another process holds a lease (`F_SETLEASE`, which any process of the file's
///   owner may take) fails with `EWOULDBLOCK` instead of waiting up to `/proc/sys/fs/lease-break-time`
///   (45 s by default) for the lease to be broken.
/// - `O_NOCTTY`: a terminal planted there never becomes the process's controlling terminal.
/// - `fstat` of the descriptor, before any other use of it: a regular file whose owner (private mode)
///   or group (group-shared mode) ``FilePolicy`` accepts; opened for writing or locking, also with one
///   link only and the sharing mode's permissions (repaired with `fchmod` by the owner), as
///   ``FilePolicy`` has them.
/// - Then, for a caller that reads, writes or locks the descriptor, `O_NONBLOCK` is cleared, so that the
///   regular file behaves as any other descriptor does.
package enum ContainerFile {
    /// How the file is opened.
    package enum Access: Sendable {
        /// `O_RDONLY`.
        case read
        /// `O_WRONLY`.
        case write
        /// `O_RDWR`.
        case readWrite
    }

    /// Opens the file `name` (one component) in the directory open at `parent`, as the type describes.
    /// Returns the descriptor (the caller closes it) and whether this call created the file.
    ///
    /// ```swift
    /// let (fd, _) = try ContainerFile.open(".snapshots.lock", in: dir, access: .readWrite, create: true,
    ///                                      fileMode: 0o600, path: path)
    /// ```
    ///
    /// - Parameters:
    ///   - create: When set (and `access` writes), a missing file is created with `O_EXCL` and given
    ///     `fileMode` with `fchmod`, whatever the umask.
    ///   - fileMode: The sharing mode's file permissions (`0600` or `0660`): group bits mean
    ///     group-shared, whose files must have the group of `parent`.
    ///   - repairs: Whether a mode this process owns is repaired, or (a read-only process) a wider one
    ///     refused. Checked only where the file is opened for writing.
    ///   - blocking: Whether `O_NONBLOCK` is cleared once the file is checked (the caller does I/O or
    ///     locks on it); a caller that only opens and closes leaves it.
    ///   - path: The file's path, for errors.
    /// - Throws: ``KVStoreError/unsafeFile(path:reason:)`` for anything that is not a regular file the
    ///   sharing mode accepts (a link, a FIFO, a socket, a device, a directory; another owner or group;
    ///   a leased file); ``KVStoreError/io(operation:path:errno:)`` otherwise (`ENOENT` when it is missing
    ///   and not created).
    package static func open(
        _ name: String, in parent: Int32, access: Access, create: Bool = false, fileMode: mode_t,
        repairs: Bool = true, blocking: Bool = true, path: String
    ) throws(KVStoreError) -> (fd: Int32, created: Bool) {
        var directory = stat()
        // The directory's status is needed only in group-shared mode, for its group.
        if fileMode & 0o070 != 0 {
            directory = try FilePolicy.status(parent, path: SafePath.split(path).dropLast().joined(separator: "/"))
        }
        let policy = FilePolicy(fileMode: fileMode, directory: directory, repairs: repairs)
        return try open(name, in: parent, access: access, create: create, policy: policy,
                        checksLinksAndMode: access != .read, blocking: blocking, path: path)
    }

    /// ``open(_:in:access:create:fileMode:repairs:blocking:path:)`` for a `path`: its directory is opened
    /// first, refusing a symbolic link in its place (links in the directory's own parents are followed,
    /// as ``ContainerRoot`` resolves a container's root).
    package static func open(
        atPath path: String, access: Access, create: Bool = false, fileMode: mode_t,
        repairs: Bool = true, blocking: Bool = true
    ) throws(KVStoreError) -> (fd: Int32, created: Bool) {
        let parts = SafePath.split(path)
        guard let name = parts.last, !name.isEmpty, name != ".", name != ".." else {
            throw .invalidPath(path, reason: "names no file")
        }
        let directory = parts.count > 1 ? parts.dropLast().joined(separator: "/") : "."
        let parent = try SafePath.openRoot(directory.isEmpty ? "/" : directory, what: "directory")
        defer { close(parent) }
        return try open(name, in: parent, access: access, create: create, fileMode: fileMode,
                        repairs: repairs, blocking: blocking, path: path)
    }

    /// The implementation, with the whole ``FilePolicy`` (``SafePath/openChecked(_:_:writable:create:policy:path:)``
    /// holds the store's files to it even when they are only read).
    static func open(
        _ name: String, in parent: Int32, access: Access, create: Bool, policy: FilePolicy,
        checksLinksAndMode: Bool, blocking: Bool, path: String
    ) throws(KVStoreError) -> (fd: Int32, created: Bool) {
        let flags: Int32
        switch access {
        case .read: flags = O_RDONLY
        case .write: flags = O_WRONLY
        case .readWrite: flags = O_RDWR
        }
        let safe = flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY
        var created = false
        var fd: Int32 = -1
        if create && access != .read {
            fd = SystemCall.retry { openat(parent, name, safe | O_CREAT | O_EXCL, policy.fileMode) }
            created = fd >= 0
            if fd < 0 && errno != EEXIST { throw openError(errno, parent: parent, name: name, path: path) }
        }
        if fd < 0 {
            fd = SystemCall.retry { openat(parent, name, safe) }
            if fd < 0 {
                let code = errno
                // Permission denied: say why, in the policy's words, when the file's mode explains it.
                if code == EACCES, let st = SafePath.lstat(at: parent, name), SafePath.isType(st, S_IFREG),
                   let refusal = policy.refusal(st, path: path) {
                    throw refusal
                }
                throw openError(code, parent: parent, name: name, path: path)
            }
        }
        do throws(KVStoreError) {
            if created, SystemCall.retry({ fchmod(fd, policy.fileMode) }) != 0 {
                throw KVStoreError.io(operation: "set permissions of", path: path, errno: errno)
            }
            try policy.checkFile(fd, try FilePolicy.status(fd, path: path), path: path, writing: checksLinksAndMode)
            if blocking {
                let status = fcntl(fd, F_GETFL)
                if status < 0 || fcntl(fd, F_SETFL, status & ~O_NONBLOCK) != 0 {
                    throw KVStoreError.io(operation: "clear O_NONBLOCK of", path: path, errno: errno)
                }
            }
        } catch {
            close(fd)
            throw error
        }
        return (fd, created)
    }

    /// What a file's status says it is, for a message: "a FIFO", "a socket", "a device", "a regular
    /// file", …
    package static func kind(_ st: stat) -> String { FilePolicy.kind(st) }

    /// A failed no-follow `openat`, as the caller sees it: what is planted at the name, in one line.
    static func openError(_ code: Int32, parent: Int32, name: String, path: String) -> KVStoreError {
        // With a one-component name under a directory descriptor, O_NOFOLLOW fails with ELOOP only for
        // a link (which may be gone again by the time it could be looked at).
        if code == ELOOP {
            return .unsafeFile(path: path, reason: "it is a symbolic link, not a regular file; a link is never followed")
        }
        if code == EWOULDBLOCK {
            return .unsafeFile(path: path, reason: "another process holds a lease on it (F_SETLEASE); the open does not wait for it")
        }
        if let st = SafePath.lstat(at: parent, name), st.st_mode & S_IFMT != S_IFREG,
           code == ENXIO || code == ENOTDIR || code == EISDIR || code == EOPNOTSUPP || code == ENODEV || code == EACCES {
            return .unsafeFile(path: path, reason: "it is \(FilePolicy.kind(st)), not a regular file")
        }
        return .io(operation: "open", path: path, errno: code)
    }
}
