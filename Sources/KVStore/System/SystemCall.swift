#if canImport(Glibc)
import Glibc
#endif

/// The one home of the plain system-call plumbing every target shares: `EINTR` retries, whole writes,
/// `mkdir -p`, and whether a process still exists. Package access: tools and SyncKit use it, apps
/// never see it.
package enum SystemCall {
    /// Runs a system call until it does not fail with `EINTR`.
    @inline(__always)
    package static func retry<T: BinaryInteger>(_ call: () -> T) -> T {
        while true {
            let result = call()
            if result == -1 && errno == EINTR { continue }
            return result
        }
    }

    /// Writes all of `bytes` to `fd`, retrying short writes and `EINTR`, in chunks of at most 1 GiB.
    ///
    /// - Throws: ``KVStoreError/io(operation:path:errno:)`` naming `path` (`EIO` when the kernel
    ///   accepts nothing).
    package static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws {
        guard let base = bytes.baseAddress else { return }  // nothing to write
        var offset = 0
        while offset < bytes.count {
            let written = Glibc.write(fd, base + offset, min(bytes.count - offset, 1 << 30))
            if written < 0 {
                if errno == EINTR { continue }
                throw KVStoreError.io(operation: "write", path: path, errno: errno)
            }
            if written == 0 { throw KVStoreError.io(operation: "write", path: path, errno: EIO) }
            offset += written
        }
    }

    /// Whether a process with this ID exists: `kill(pid, 0)`, where `EPERM` (another user's process)
    /// still means it exists. Process IDs are reused, so a `true` is a hint, never a proof.
    package static func isProcessAlive(_ pid: Int32) -> Bool {
        guard pid > 0 else { return false }
        if kill(pid, 0) == 0 { return true }
        return errno == EPERM
    }

    /// `mkdir -p`: creates the missing directories of the absolute `path`, each with `mode`. An
    /// existing component must be a directory (a link to one is accepted here: this is for roots the
    /// user chose, which every later open then walks without following links).
    ///
    /// - Throws: ``KVStoreError/invalidPath(_:reason:)`` if a component is not a directory;
    ///   ``KVStoreError/io(operation:path:errno:)`` if one cannot be created.
    package static func makeDirectories(_ path: String, mode: mode_t) throws {
        var current = ""
        for component in SafePath.split(path, omittingEmptySubsequences: true) {
            current += "/" + component
            var info = stat()
            if stat(current, &info) == 0 {
                guard info.st_mode & S_IFMT == S_IFDIR else {
                    throw KVStoreError.invalidPath(path, reason: "\(current) is not a directory")
                }
                continue
            }
            if mkdir(current, mode) != 0 && errno != EEXIST {
                throw KVStoreError.io(operation: "create directory", path: current, errno: errno)
            }
        }
    }
}
