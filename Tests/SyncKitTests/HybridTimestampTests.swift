import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport

/// The hybrid logical clock's rules, and the bound on the stamps a history adopts from other machines.
@Suite struct HybridTimestampTests {
    let dir = TemporaryDirectory()
    static let start = Date(timeIntervalSince1970: 1_790_000_000)

    @Test func stampsNeverGoBackwardsWhateverTheWallClockDoes() {
        var last = HybridTimestamp.zero
        var wall = Self.start
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var stamps: [HybridTimestamp] = []
        for _ in 0..<10_000 {
            // Forward, still, or back by up to a second: NTP steps, a VM resumed, a user's clock.
            state ^= state << 13; state ^= state >> 7; state ^= state << 17   // xorshift64
            wall = wall.addingTimeInterval(Double(Int(state % 2001) - 1000) / 1000)
            let next = HybridTimestamp.next(after: last, now: wall)
            #expect(next > last)
            #expect(next >= HybridTimestamp(date: wall))
            stamps.append(next)
            last = next
        }
        #expect(stamps == stamps.sorted())
        #expect(Set(stamps).count == stamps.count)
    }

    @Test func aWallClockThatGoesBackwardsKeepsTheLastMillisecondAndCounts() {
        let first = HybridTimestamp.next(after: .zero, now: Self.start)
        #expect(first.counter == 0)
        let earlier = Self.start.addingTimeInterval(-30)
        let second = HybridTimestamp.next(after: first, now: earlier)
        let third = HybridTimestamp.next(after: second, now: earlier)
        #expect(second.milliseconds == first.milliseconds && second.counter == 1)
        #expect(third.milliseconds == first.milliseconds && third.counter == 2)
        // Once the wall clock passes the last stamp again, the counter starts over.
        let later = HybridTimestamp.next(after: third, now: Self.start.addingTimeInterval(1))
        #expect(later.milliseconds == first.milliseconds + 1000 && later.counter == 0)
    }

    @Test func theCounterCarriesIntoTheMillisecondsPastSixteenBits() {
        var last = HybridTimestamp.next(after: .zero, now: Self.start)
        let milliseconds = last.milliseconds
        for _ in 0..<65_535 { last = HybridTimestamp.next(after: last, now: Self.start) }
        #expect(last.milliseconds == milliseconds && last.counter == 65_535)
        let carried = HybridTimestamp.next(after: last, now: Self.start)
        #expect(carried > last)
        #expect(carried.milliseconds == milliseconds + 1 && carried.counter == 0)
        // And the end of the range holds instead of wrapping around to zero.
        let end = HybridTimestamp(rawValue: .max)
        #expect(HybridTimestamp.next(after: end, now: Self.start) == end)
    }

    @Test func anOffsetIsMeasuredFromTheWallClock() {
        let stamp = HybridTimestamp(date: Self.start.addingTimeInterval(90))
        #expect(stamp.offset(from: Self.start) == .seconds(90))
        #expect(stamp.isAhead(of: Self.start, by: .seconds(60)))
        #expect(!stamp.isAhead(of: Self.start, by: .seconds(90)))
        #expect(!stamp.isAhead(of: Self.start.addingTimeInterval(40), by: .seconds(60)))
        #expect(HybridTimestamp(date: Self.start).offset(from: Self.start.addingTimeInterval(5)) == .seconds(-5))
        #expect(HybridTimestamp(rawValue: .max).isAhead(of: Self.start, by: .seconds(31_536_000)))
    }

    /// `observeClock` adopts a remote stamp within the bound, and one beyond it not at all: the next
    /// local stamp stays near the local wall clock.
    @Test func aRemoteStampIsAdoptedOnlyWithinTheBound() throws {
        let container = try dir.container("group.com.example.clock")
        let history = try History.attach(to: container)
        let notes = try container.store.collection("notes", key: Int.self, value: String.self)
        try history.enable(.collection("notes"))
        let now = Date()
        let near = HybridTimestamp(date: now.addingTimeInterval(30))
        let adopted = try container.store.write { tx in try history.observeClock(near, now: now, maxSkew: .seconds(60), in: tx) }
        #expect(adopted)
        #expect(try history.clock() == near)
        let dayAhead = HybridTimestamp(date: now.addingTimeInterval(86_400))
        let refused = try container.store.write { tx in try history.observeClock(dayAhead, now: now, maxSkew: .seconds(60), in: tx) }
        #expect(!refused)
        #expect(try history.clock() == near)
        // A stamp behind the clock changes nothing and is within the bound.
        let behind = try container.store.write { tx in
            try history.observeClock(HybridTimestamp(date: now.addingTimeInterval(-10)), now: now, in: tx)
        }
        #expect(behind)
        #expect(try history.clock() == near)
        // The next local write is stamped just after the adopted stamp, not a day ahead.
        try container.store.write(author: "app") { tx in try notes.put("x", forKey: 1, in: tx) }
        let stamp = try #require(history.changes(since: .zero).transactions?.last?.entries.first?.clock)
        #expect(stamp > near)
        #expect(!stamp.isAhead(of: Date(), by: .seconds(60)))
    }
}
