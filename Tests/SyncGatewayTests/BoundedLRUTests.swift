#if PostgreSQL
@testable import SyncGateway
import Testing

/// ``BoundedLRU``: what the limiters remember of their keys stays under its capacity, and a new key
/// evicts the least recently used one, never a key used since.
@Suite struct BoundedLRUTests {
    /// Adds `key` with `value` (or uses it: the value is then left as it was).
    static func use(_ lru: inout BoundedLRU<String, Int>, _ key: String, _ value: Int = 0) {
        lru.withValue(for: key, make: { value }) { _ in }
    }

    @Test func aNewKeyEvictsTheLeastRecentlyUsedOneAndNoOther() {
        var lru = BoundedLRU<String, Int>(capacity: 3)
        for (index, key) in ["a", "b", "c"].enumerated() { Self.use(&lru, key, index) }
        // "a" used again: "b" is now the least recently used.
        Self.use(&lru, "a")
        Self.use(&lru, "d", 3)
        #expect(lru.count == 3)
        #expect(lru.peek("b") == nil)
        #expect(lru.peek("a") == 0 && lru.peek("c") == 2 && lru.peek("d") == 3)
        // Then "c" (the oldest left), then "a".
        Self.use(&lru, "e", 4)
        #expect(lru.peek("c") == nil && lru.peek("a") == 0)
        Self.use(&lru, "f", 5)
        #expect(lru.peek("a") == nil && lru.peek("d") == 3 && lru.peek("e") == 4 && lru.peek("f") == 5)
    }

    @Test func peekDoesNotCountAsAUse() {
        var lru = BoundedLRU<String, Int>(capacity: 2)
        Self.use(&lru, "a", 1)
        Self.use(&lru, "b", 2)
        #expect(lru.peek("a") == 1)
        Self.use(&lru, "c", 3)
        // "a" was only peeked at: it was still the least recently used.
        #expect(lru.peek("a") == nil && lru.peek("b") == 2)
    }

    @Test func theBodyChangesTheStoredValueAndReturnsItsResult() {
        var lru = BoundedLRU<String, Int>(capacity: 2)
        let first = lru.withValue(for: "a", make: { 10 }) { value -> Int in value += 1; return value }
        let second = lru.withValue(for: "a", make: { 100 }) { value -> Int in value += 1; return value }
        #expect(first == 11 && second == 12 && lru.peek("a") == 12)
    }

    /// A flood of new keys (10,000 through a capacity of 100) keeps exactly the last 100.
    @Test func aFloodOfNewKeysKeepsTheCapacityAndTheNewestKeys() {
        var lru = BoundedLRU<Int, Int>(capacity: 100)
        for key in 0..<10_000 { lru.withValue(for: key, make: { key }) { _ in } }
        #expect(lru.count == 100)
        #expect((9_900..<10_000).allSatisfy { lru.peek($0) == $0 })
        #expect(lru.peek(9_899) == nil)
    }

    @Test func aCapacityBelowOneHoldsOneKey() {
        var lru = BoundedLRU<String, Int>(capacity: 0)
        Self.use(&lru, "a", 1)
        Self.use(&lru, "b", 2)
        #expect(lru.capacity == 1 && lru.count == 1 && lru.peek("b") == 2)
    }
}
#endif
