import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// The system calls the publishers make directly (everything else goes through ``KVStore/SharedFiles``):
/// `EINTR` retries and whole writes.
enum SystemCalls {
    /// Runs a system call until it does not fail with `EINTR`.
    @inline(__always)
    static func retry<T: BinaryInteger>(_ call: () -> T) -> T {
        while true {
            let result = call()
            if result == -1 && errno == EINTR { continue }
            return result
        }
    }

    /// Writes all of `bytes` to `fd`, retrying short writes and `EINTR`.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws {
        guard let base = bytes.baseAddress else { return }
        var offset = 0
        while offset < bytes.count {
            let written = write(fd, base + offset, min(bytes.count - offset, 1 << 30))
            if written < 0 {
                if errno == EINTR { continue }
                throw KVStoreError.io(operation: "write", path: path, errno: errno)
            }
            if written == 0 { throw KVStoreError.io(operation: "write", path: path, errno: EIO) }
            offset += written
        }
    }
}
