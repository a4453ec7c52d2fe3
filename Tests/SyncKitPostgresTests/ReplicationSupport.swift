#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import PostgresTesting
import TestSupport
import SyncTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The resync both paths (direct and through a gateway) must handle: A writes 20 keys and both devices
/// sync; B goes offline while A deletes ten and rewrites one; `prune` prunes everything, B's cursor
/// included. B, with a write of its own pending, resyncs (and says so), keeps its write, and both
/// converge with the server.
func expectResyncAfterAPruneThatPassedACursor(_ cluster: LocalPostgresCluster, group: String,
                                              a: Device, _ ra: Replicator, b: Device, _ rb: Replicator,
                                              resynced: Locked<Bool>, prune: () async throws -> Int64) async throws {
    for i in 0..<20 { try a.put("v\(i)", "k\(i)") }
    try await ra.sync(); try await rb.sync()
    #expect(try b.noteLines().count == 20)
    for i in 0..<10 { try a.delete("k\(i)") }
    try a.put("new", "k5")
    try await ra.sync()
    // Nine tombstones: k5 was written again.
    #expect(try await offPool { try cluster.count("SELECT count(*) FROM kvsync_state WHERE group_id = '\(group)' AND value IS NULL") } == 9)
    #expect(try await prune() > 0)
    try b.put("b's pending write survives", "b-only")
    let report = try await rb.sync()
    #expect(report.resynchronized && resynced.withLock { $0 })
    try await ra.sync()
    #expect(try await offPool { try b.storedNotes() == cluster.storedNotes(group: group) })
    #expect(try a.noteLines() == b.noteLines())
    #expect(try b.noteLines().contains("b-only=b's pending write survives"))
    #expect(try !b.noteLines().contains { $0.hasPrefix("k1=") })
}
#endif
