#if PostgreSQL
import Foundation
import NIOCore
@testable import SyncGateway
import Testing

/// The accept loop's gate (``ConnectionsAwaitingRequest``): full at its limit of connections that
/// have sent no request yet, open again when one sends its request's head, and a connection that
/// says nothing counts for its window only. The clock is passed in: nothing here waits.
@Suite struct ConnectionsAwaitingRequestTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    @Test func fullAtItsLimitAndOpenAgainWhenARequestComes() {
        let gate = ConnectionsAwaitingRequest(limit: 3, window: .seconds(1))
        let entries = (0..<3).map { gate.accepted(now: start + .milliseconds(Int64($0))) }
        #expect(gate.isFull(now: start + .milliseconds(10)))
        gate.requestArrived(entries[1])
        #expect(!gate.isFull(now: start + .milliseconds(10)) && gate.count == 2)
        // Counted once: a second head on the same connection (keep-alive), or its end after its
        // head, changes nothing.
        gate.requestArrived(entries[1])
        #expect(gate.count == 2)
        _ = gate.accepted(now: start + .milliseconds(20))
        #expect(gate.isFull(now: start + .milliseconds(20)))
    }

    @Test func aSilentConnectionCountsForItsWindowOnly() {
        let gate = ConnectionsAwaitingRequest(limit: 2, window: .seconds(1))
        let first = gate.accepted(now: start)
        _ = gate.accepted(now: start + .milliseconds(500))
        #expect(gate.isFull(now: start + .milliseconds(999)))
        // The first is a second old: it no longer holds the gate, though it never sent anything.
        #expect(!gate.isFull(now: start + .seconds(1)) && gate.count == 1)
        // Its head coming later does not count it off twice.
        gate.requestArrived(first)
        #expect(gate.count == 1)
        #expect(!gate.isFull(now: start + .milliseconds(1_600)) && gate.count == 0)
    }

    /// Entries whose request came are forgotten from the front, so what the gate keeps is bounded by
    /// the connections of the last window, not by every connection ever accepted.
    @Test func itKeepsNoEntryPastItsWindow() {
        let gate = ConnectionsAwaitingRequest(limit: 1_000, window: .seconds(1))
        for index in 0..<10_000 {
            let now = start + .milliseconds(Int64(index))
            gate.requestArrived(gate.accepted(now: now))
            _ = gate.isFull(now: now)
        }
        #expect(gate.count == 0)
        #expect(gate.kept == 0)
    }
}
#endif
