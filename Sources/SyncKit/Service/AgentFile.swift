#if canImport(Glibc)
import Glibc
#endif
import KVStore

/// The files of the sync agent and of sync's ownership, opened so that nothing a co-tenant plants
/// at their paths can hang, redirect or fool the process (issue 47): never through a symbolic link
/// (`O_NOFOLLOW`), never blocking (`O_NONBLOCK`: a FIFO with no reader at the agent's log hung `sync
/// request` past its deadline, and its child in `open` for good), never making a terminal the
/// controlling one (`O_NOCTTY`), and only a regular file of this user, checked with `fstat` on the
/// descriptor before any byte is read or written. A FIFO, a socket or a device is refused without
/// being opened at all (`lstat` first); one swapped in between the `lstat` and the `open` is refused
/// by the `fstat`.
///
/// (KVStore's container files have a primitive of their own for the same rules; this one is kept
/// small and local to the agent's files.)
enum AgentFile {
    /// A descriptor (close-on-exec) of the regular file of this user at `path`, or `nil` when
    /// nothing is there and `create` is false. `flags` are the access and `O_APPEND`/`O_CREAT`; the
    /// descriptor is left blocking once it is known to be a regular file.
    ///
    /// - Throws: ``KVStore/KVStoreError/unsafeFile(path:reason:)`` for a link, a FIFO, a socket, a
    ///   device, a directory or another user's file, naming what it is;
    ///   ``KVStore/KVStoreError/io(operation:path:errno:)`` for another failure.
    static func open(_ path: String, flags: Int32, create: Bool = false) throws -> Int32? {
        var before = stat()
        let existed: Bool
        if lstat(path, &before) == 0 {
            try check(before, path: path)
            existed = true
        } else {
            let code = errno
            guard code == ENOENT else { throw KVStoreError.io(operation: "stat", path: path, errno: code) }
            guard create else { return nil }
            existed = false
        }
        let fd = Glibc.open(path, flags | (create ? O_CREAT : 0) | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT && !create { return nil }
            if code == ELOOP { throw KVStoreError.unsafeFile(path: path, reason: "it is a symbolic link, which is never followed") }
            if code == ENXIO { throw KVStoreError.unsafeFile(path: path, reason: "it is a FIFO or a socket, not a regular file") }
            throw KVStoreError.io(operation: "open", path: path, errno: code)
        }
        var info = stat()
        do {
            guard fstat(fd, &info) == 0 else { throw KVStoreError.io(operation: "stat", path: path, errno: errno) }
            try check(info, path: path)
            if existed && (info.st_dev != before.st_dev || info.st_ino != before.st_ino) {
                throw KVStoreError.unsafeFile(path: path, reason: "it was replaced while it was being opened")
            }
            // A regular file never blocks, but the flag is shared with whoever gets the descriptor.
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// Refuses what is not a regular file of this user, naming what it is.
    static func check(_ info: stat, path: String) throws {
        let kind: String? = switch info.st_mode & S_IFMT {
        case S_IFREG: nil
        case S_IFLNK: "a symbolic link, which is never followed"
        case S_IFIFO: "a FIFO"
        case S_IFSOCK: "a socket"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFDIR: "a directory"
        default: "a file of an unknown type"
        }
        if let kind {
            throw KVStoreError.unsafeFile(path: path, reason: kind.hasPrefix("a symbolic") ? "it is \(kind)" : "it is \(kind), not a regular file")
        }
        guard info.st_uid == geteuid() else {
            throw KVStoreError.unsafeFile(path: path, reason: "it belongs to uid \(info.st_uid), not to this user (uid \(geteuid()))")
        }
    }
}
