import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// An advisory lock (`flock`) on a lock file, held until the value is released or deinitialised.
///
/// `flock` locks belong to an open file description, so two threads of one process that each open
/// the file exclude each other just as two processes do; and the kernel releases the lock when its
/// holder dies, so a crashed publisher never blocks the next one.
///
/// The lock file can also keep a small counter (8 bytes, big-endian): feed publishers store the last
/// generation there, so that generations keep increasing even if the feed file itself is lost.
final class FileLock {
    let descriptor: Int32
    let path: String

    /// Opens (creating with exactly `mode`) the file `name` in the directory open at `directory`,
    /// without following a symbolic link, and waits for the lock. Reaching the directory through a
    /// descriptor (``KVStore/SharedFiles/withDirectory(_:create:_:)``) means a directory swapped for a
    /// link cannot make the lock file appear elsewhere. A shared lock also works where the file may
    /// only be read.
    ///
    /// - Parameter path: the lock file's path, for messages.
    /// The file is opened as every file of a container is (``KVStore/ContainerFile``): a FIFO, a socket,
    /// a device or a link planted in its place, or a lease another process holds on it, is refused at
    /// once with one line naming it, never opened as the lock, followed or waited for.
    ///
    /// - Throws: ``KVStore/KVStoreError/unsafeFile(path:reason:)`` for anything but a regular file of
    ///   the sharing mode's owner or group; ``KVStore/KVStoreError/io(operation:path:errno:)`` if the
    ///   file cannot be opened or locked.
    init(in directory: Int32, name: String, path: String, mode: mode_t, shared: Bool) throws {
        let fd = try Self.open(name, in: directory, path: path, mode: mode, shared: shared)
        if SystemCall.retry({ flock(fd, shared ? LOCK_SH : LOCK_EX) }) != 0 {
            let code = errno
            close(fd)
            throw KVStoreError.io(operation: "lock", path: path, errno: code)
        }
        descriptor = fd
        self.path = path
    }

    /// Opens the lock file for writing (creating it), or, for a shared lock where it may only be read, for
    /// reading.
    private static func open(_ name: String, in directory: Int32, path: String, mode: mode_t, shared: Bool) throws(KVStoreError) -> Int32 {
        let writable = Result { () throws(KVStoreError) -> Int32 in
            try ContainerFile.open(name, in: directory, access: .readWrite, create: true, fileMode: mode, path: path).fd
        }
        guard shared, case .failure(let error) = writable, case .io(_, _, let code) = error,
              code == EACCES || code == EROFS || code == EPERM
        else { return try writable.get() }
        return try ContainerFile.open(name, in: directory, access: .read, fileMode: mode, path: path).fd
    }

    /// Unlocks before closing: a child another thread forked and that has not called `exec` yet shares
    /// the open file description the lock belongs to, and closing this descriptor alone would leave
    /// the lock held until that child execs or exits (see `SyncOwnership`).
    deinit {
        _ = SystemCall.retry { flock(descriptor, LOCK_UN) }
        close(descriptor)
    }

    /// The counter stored in the lock file; 0 if none was stored yet.
    func counter() throws -> UInt64 {
        var bytes = [UInt8](repeating: 0, count: 8)
        let n = SystemCall.retry { bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, 8, 0) } }
        if n < 0 { throw KVStoreError.io(operation: "read lock file", path: path, errno: errno) }
        guard n == 8 else { return 0 }
        return bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// Stores `value` as the counter.
    func setCounter(_ value: UInt64) throws {
        let bytes = (0..<8).map { UInt8(truncatingIfNeeded: value >> UInt64(56 - 8 * $0)) }
        let n = SystemCall.retry { bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, 8, 0) } }
        if n != 8 { throw KVStoreError.io(operation: "write lock file", path: path, errno: n < 0 ? errno : EIO) }
    }
}
