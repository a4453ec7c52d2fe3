#if PostgreSQL
import Foundation
import KVStore
import NIOCore

/// A map that holds `capacity` entries at most, forgetting the least recently used one to make room
/// for a new one: what a limiter remembers of its keys is bounded, and a flood of new keys evicts
/// only keys that were not used since, one at a time (never everything at once).
struct BoundedLRU<Key: Hashable, Value> {
    private struct Node {
        var key: Key
        var value: Value
        var newer: Int
        var older: Int
    }

    let capacity: Int
    private var index: [Key: Int] = [:]
    private var nodes: [Node] = []
    /// The most and least recently used slots (-1 when empty).
    private var newest = -1
    private var oldest = -1

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    var count: Int { index.count }

    /// The value of `key`, marked as just used, or `make()`'s (the oldest entry evicted if full).
    mutating func withValue<R>(for key: Key, make: () -> Value, _ body: (inout Value) -> R) -> R {
        let slot: Int
        if let found = index[key] {
            slot = found
            unlink(slot)
        } else if nodes.count < capacity {
            slot = nodes.count
            nodes.append(Node(key: key, value: make(), newer: -1, older: -1))
            index[key] = slot
        } else {
            slot = oldest
            unlink(slot)
            index[nodes[slot].key] = nil
            nodes[slot] = Node(key: key, value: make(), newer: -1, older: -1)
            index[key] = slot
        }
        linkAsNewest(slot)
        return body(&nodes[slot].value)
    }

    /// The value of `key` without marking it used.
    func peek(_ key: Key) -> Value? { index[key].map { nodes[$0].value } }

    private mutating func unlink(_ slot: Int) {
        let (newer, older) = (nodes[slot].newer, nodes[slot].older)
        if newer >= 0 { nodes[newer].older = older } else { newest = older }
        if older >= 0 { nodes[older].newer = newer } else { oldest = newer }
        nodes[slot].newer = -1
        nodes[slot].older = -1
    }

    private mutating func linkAsNewest(_ slot: Int) {
        nodes[slot].older = newest
        nodes[slot].newer = -1
        if newest >= 0 { nodes[newest].newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
    }
}
#endif
