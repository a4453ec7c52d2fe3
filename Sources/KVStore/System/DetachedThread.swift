#if canImport(Glibc)
import Glibc
#endif

package extension SystemCall {
    /// Runs `body` on a new detached thread (what Foundation's `Thread` does, without linking
    /// Foundation). A thread that cannot be created is a resource failure the caller reports.
    ///
    /// - Throws: ``KVStoreError/io(operation:path:errno:)`` with `pthread_create`'s error.
    static func startThread(_ body: @escaping @Sendable () -> Void) throws(KVStoreError) {
        final class Box: Sendable {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        let context = Unmanaged.passRetained(Box(body)).toOpaque()
        var thread = pthread_t()
        let code = pthread_create(&thread, nil, { raw in
            let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
            box.body()
            return nil
        }, context)
        guard code == 0 else {
            Unmanaged<Box>.fromOpaque(context).release()
            throw .io(operation: "pthread_create", path: "", errno: code)
        }
        pthread_detach(thread)
    }
}
