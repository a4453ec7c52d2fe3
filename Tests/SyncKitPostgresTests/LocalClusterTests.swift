#if PostgreSQL
import Foundation
import PostgresTesting
import TestSupport
import Testing

/// The throwaway cluster the tests, the demo and the benchmarks start.
@Suite struct LocalClusterTests {
    /// The server `pg_ctl start` leaves running holds none of the starting process's descriptors. A
    /// pipe another thread made for its own child (Foundation's pipes are not close-on-exec) would
    /// otherwise stay open in the server for as long as it runs, and that child's reader would wait
    /// for its end: a test's `openssl req` was reported hung for 60 s after it had exited.
    @Test func theServerInheritsNoneOfTheStartingProcesssDescriptors() async throws {
        // The blocking steps off the pool; the expectations here, in the test's own task.
        let (inheritable, ours, held) = try await offPool {
            let pipe = Pipe()
            defer {
                try? pipe.fileHandleForReading.close()
                try? pipe.fileHandleForWriting.close()
            }
            let descriptor = pipe.fileHandleForWriting.fileDescriptor
            let ours = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)")
            let cluster = try LocalPostgresCluster()
            let server = cluster.serverProcessID ?? 0
            let held = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(server)/fd")) ?? []).compactMap {
                try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(server)/fd/\($0)")
            }
            return (fcntl(descriptor, F_GETFD) & FD_CLOEXEC == 0, ours, held)
        }
        #expect(inheritable, "the pipe must be inheritable for this test to mean anything")
        #expect(held.contains { $0.hasPrefix("/") }, "the server's descriptors were not read: \(held)")
        #expect(!held.contains(ours), "the server holds the pipe \(ours) of the process that started it: \(held)")
    }
}
#endif
