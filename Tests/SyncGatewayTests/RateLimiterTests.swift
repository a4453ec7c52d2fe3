#if PostgreSQL
@testable import SyncGateway
import Testing

/// ``RateLimiter`` at a clock the test moves: a burst, then a refusal that says how long to wait, a
/// refill at the rate, keys apart, and a bounded memory of keys.
@Suite struct RateLimiterTests {
    @Test func aBurstIsAdmittedThenTheWaitIsTheTimeToTheNextToken() {
        let limiter = RateLimiter<String>(perSecond: 2, burst: 3, capacity: 10)
        let start = ContinuousClock.now
        for _ in 0..<3 { #expect(limiter.admit("a", now: start) == nil) }
        // No token left: one comes in 0.5 s, said as 1 s (rounded up, never 0).
        #expect(limiter.admit("a", now: start) == 1)
        // Half a second later, one token: admitted once.
        #expect(limiter.admit("a", now: start + .milliseconds(500)) == nil)
        #expect(limiter.admit("a", now: start + .milliseconds(500)) == 1)
        // Long after, the bucket holds its burst again, no more.
        let later = start + .seconds(60)
        for _ in 0..<3 { #expect(limiter.admit("a", now: later) == nil) }
        #expect(limiter.admit("a", now: later) != nil)
    }

    @Test func aSlowRateSaysTheWholeWait() {
        let limiter = RateLimiter<String>(perSecond: 0.1, burst: 1, capacity: 10)
        let start = ContinuousClock.now
        #expect(limiter.admit("a", now: start) == nil)
        #expect(limiter.admit("a", now: start) == 10)
        #expect(limiter.admit("a", now: start + .seconds(4)) == 6)
    }

    @Test func checkTakesNoToken() {
        let limiter = RateLimiter<String>(perSecond: 1, burst: 2, capacity: 10)
        let start = ContinuousClock.now
        for _ in 0..<5 { #expect(limiter.check("a", now: start) == nil) }
        #expect(limiter.admit("a", now: start) == nil)
        #expect(limiter.admit("a", now: start) == nil)
        #expect(limiter.check("a", now: start) == 1)
    }

    @Test func keysHaveBucketsOfTheirOwn() {
        let limiter = RateLimiter<String>(perSecond: 1, burst: 1, capacity: 10)
        let start = ContinuousClock.now
        #expect(limiter.admit("a", now: start) == nil)
        #expect(limiter.admit("a", now: start) != nil)
        #expect(limiter.admit("b", now: start) == nil)
    }

    /// The keys remembered stay under the capacity; a key evicted comes back with a full bucket (what
    /// an LRU trades for its bound: a flood of new keys forgets only the least recent).
    @Test func theKeysRememberedStayUnderTheCapacity() {
        let limiter = RateLimiter<Int>(perSecond: 1, burst: 1, capacity: 50)
        let start = ContinuousClock.now
        for key in 0..<1_000 { #expect(limiter.admit(key, now: start) == nil) }
        #expect(limiter.remembered == 50)
        #expect(limiter.admit(999, now: start) != nil)
        #expect(limiter.admit(0, now: start) == nil)
    }

    @Test func aBurstBelowOneIsOne() {
        let limiter = RateLimiter<String>(perSecond: 1, burst: 0, capacity: 10)
        #expect(limiter.burst == 1)
        #expect(limiter.admit("a") == nil)
    }
}
#endif
