#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import SyncTestSupport
import SyncWire
import PostgresTesting
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What one member can make others wait for: resyncs taken in turn, and pushes within the budgets of
/// the server (issue 47, findings 5 and 6).
@Suite(.serialized) struct ResyncFairnessAttacks {
    /// Ten whole-state resyncs from one member, which it never reads, while another group resyncs and
    /// an honest member of the same group does: the other group's resync is answered while the
    /// member's others still wait (one of its reads at most went before it: one credential, one
    /// resync at a time, the groups in turn), in about its own time plus one of the member's reads; and
    /// the honest member's resync fits in the answer budget beside the one answer the member holds.
    @Test func oneMembersResyncsDelayAnotherGroupByOneReadAtMostAndHoldOneAnswer() async throws {
        // A budget for answers of 16 MiB, and a state of about 6 MiB: two and a half states.
        let arena = try await Arena("fair-resyncs", gatewayArguments: ["--answer-timeout", "120", "--max-answer-bytes", String(16 << 20)])
        let writer = try Device(group: arena.group)
        try writer.write { tx in
            for index in 0..<3 { try writer.notes.put(String(repeating: "\(index)", count: 2 << 20), forKey: "big\(index)", in: tx) }
        }
        #expect(try await writer.kvtoolOffPool(["sync", "run", "--once", "--server", arena.cluster.tcpURL.description]).status == 0)
        // The other group: one small note.
        let otherGroup = "group.com.example.adversary.fair-other"
        let other = try Device(group: otherGroup)
        try other.put("small", "k")
        #expect(try await other.kvtoolOffPool(["sync", "run", "--once", "--server", arena.cluster.tcpURL.description]).status == 0)
        let otherToken = try await issueToken(arena.cluster, ["--group", otherGroup, "--device", "other"])
        let otherHeaders = ["Authorization: Bearer \(otherToken)", "\(GatewayWire.groupHeader): \(otherGroup)"]
        let mallory = try await arena.token(["--device", "mallory"])
        let honest = try await arena.token(["--device", "honest"])

        /// A whole state, read in full, and how long it took.
        @Sendable func resync(_ headers: [String]) async throws -> (RawHTTP.Answer, Duration) {
            let started = ContinuousClock.now
            let answer = try await offPool { [url = arena.url] in try RawHTTP.request(url, "GET /v1/state", headers: headers) }
            return (answer, ContinuousClock.now - started)
        }
        // Alone: the other group's resync, and one of the member's reads (the honest member's, read whole).
        let (otherAlone, otherAloneTime) = try await resync(otherHeaders)
        #expect(otherAlone.status == 200, "\(otherAlone.status) \(otherAlone.text)")
        let (page, pageTime) = try await resync(arena.headers(honest))
        #expect(page.status == 200, "\(page.status) \(page.text)")
        #expect(try GatewayState(decoding: page.body, maxValueBytes: 16 << 20).rows.count == 3)

        // The member's ten, on ten connections that read nothing (a small receive buffer each).
        let request = RawHTTP.head("GET /v1/state", headers: arena.headers(mallory), length: nil)
        let sockets = try await offPool { [url = arena.url] in
            try (0..<10).map { _ -> Int32 in
                let fd = try RawHTTP.connect(url, timeout: 30)
                var small: Int32 = 64 << 10
                setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
                RawHTTP.sendAll(fd, request)
                return fd
            }
        }
        defer { for fd in sockets { close(fd) } }
        // When each of them began to be answered (its first byte readable), watched without reading.
        let answeredAt = Locked([ContinuousClock.Instant?](repeating: nil, count: sockets.count))
        let stop = Locked(false)
        let watcher = Task {
            try await offPool {
                while !stop.withLock({ $0 }) {
                    var polls = sockets.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
                    _ = poll(&polls, nfds_t(polls.count), 20)
                    let now = ContinuousClock.now
                    answeredAt.withLock { at in
                        for (index, entry) in polls.enumerated() where entry.revents != 0 && at[index] == nil { at[index] = now }
                    }
                }
            }
        }
        defer { stop.withLock { $0 = true } }
        // The first of them is being answered (and stalls: nobody reads it).
        #expect(await eventuallyAsync(BuildScale.seconds(60)) { answeredAt.withLock { $0.contains { $0 != nil } } })
        // Now the other group resyncs, and an honest member of the member's group.
        async let honestResync = resync(arena.headers(honest))
        let (otherDuring, otherDuringTime) = try await resync(otherHeaders)
        let answeredBefore = answeredAt.withLock { $0.filter { $0 != nil }.count }
        let (honestDuring, _) = try await honestResync
        let seconds = { (duration: Duration) in Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18 }
        print(String(format: "[adversary] the other group's resync: %.3f s alone, %.3f s beside ten of one member's (one of the member's reads: %.3f s); the member's answered before it: %d of 10; the honest member: %d",
                     seconds(otherAloneTime), seconds(otherDuringTime), seconds(pageTime), answeredBefore, honestDuring.status))
        #expect(otherDuring.status == 200, "\(otherDuring.status) \(otherDuring.text)")
        #expect(otherDuring.body == otherAlone.body)
        // Structurally: while the other group's resync was answered, the member had one read going
        // (and one more refused at once, past the eight its credential may have waiting); the others wait.
        #expect(answeredBefore <= 2, "\(answeredBefore) of the member's ten resyncs were answered before another group's")
        // And in time: its own, plus one of the member's reads, with a margin for a loaded machine.
        let bound = (otherAloneTime + pageTime) * 4 + .seconds(BuildScale.seconds(10))
        #expect(otherDuringTime <= bound, "the other group's resync took \(otherDuringTime) beside the member's, against \(otherAloneTime) alone")
        // The honest member of the same group is answered, whole: the member holds one answer of the
        // budget (6 of 16 MiB), not the budget.
        #expect(honestDuring.status == 200, "\(honestDuring.status) \(honestDuring.text)")
        stop.withLock { $0 = true }
        _ = try? await watcher.value
        // The member's own: one went, one was refused with the reason (429), the others still wait.
        let early = try await offPool { sockets.map { fd -> Int in
            var buffer = [UInt8](repeating: 0, count: 256)
            return recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT | MSG_PEEK)) > 0 ? 1 : 0
        } }
        #expect(early.reduce(0, +) <= 2, "\(early)")
    }
}
#endif
