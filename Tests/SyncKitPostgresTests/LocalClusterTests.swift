#if PostgreSQL
import Foundation
import PostgresTesting
import SyncTestSupport
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

    /// A port found free can be taken before the server binds it (here, by a listener of the test's):
    /// the cluster starts on another port, and works.
    @Test func aPortTakenBeforeTheServerBindsItIsReplacedByAnother() async throws {
        let (taken, port, answer) = try await offPool {
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(listener) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 }
            }
            guard bound, listen(listener, 1) == 0 else { throw POSIXError(.EADDRINUSE) }
            let taken = Int(UInt16(bigEndian: address.sin_port))
            let cluster = try LocalPostgresCluster(tryingFirst: taken)
            return (taken, cluster.port, try cluster.psql("SELECT 40 + 2"))
        }
        #expect(port != taken)
        #expect(answer.trimmingCharacters(in: .whitespacesAndNewlines) == "42")
    }

    /// A hot standby of a cluster (`pg_basebackup -R`) replays the primary's rows and refuses writes;
    /// promoted, it takes them.
    @Test(.oneServerFleetAtATime) func aStandbyReplaysThePrimarysRowsRefusesWritesAndTakesThemOncePromoted() async throws {
        let (seen, refused, written) = try await offPool {
            let primary = try LocalPostgresCluster()
            try primary.psql("CREATE TABLE t (v int); INSERT INTO t VALUES (1)")
            let standby = try LocalPostgresCluster(standbyOf: primary, applyDelay: .milliseconds(200), synchronous: true)
            try primary.psql("INSERT INTO t VALUES (2)")
            try standby.catchUp(with: primary)
            let seen = try standby.psql("SELECT string_agg(v::text, ',' ORDER BY v) FROM t")
            let refused: String
            do {
                try standby.psql("INSERT INTO t VALUES (3)")
                refused = ""
            } catch {
                refused = "\(error)"
            }
            try primary.stop(immediate: true)
            try standby.promote()
            try standby.psql("INSERT INTO t VALUES (3)")
            return (seen, refused, try standby.psql("SELECT count(*) FROM t"))
        }
        #expect(seen.trimmingCharacters(in: .whitespacesAndNewlines) == "1,2")
        #expect(refused.contains("read-only transaction"), "the standby took a write: \(refused)")
        #expect(written.trimmingCharacters(in: .whitespacesAndNewlines) == "3")
    }
}
#endif
