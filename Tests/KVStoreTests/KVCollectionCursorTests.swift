import Foundation
import Testing
import TestSupport
@testable import KVStore

@Suite struct KVCollectionCursorTests {
    let dir = TemporaryDirectory()

    func numbers(_ count: Int = 1000) throws -> (Store, KVCollection<Int, Int>) {
        let store = try dir.store()
        let values = try store.collection("values", key: Int.self, value: Int.self)
        try store.write { tx in for i in 0..<count { try values.put(i * 10, forKey: i, in: tx) } }
        return (store, values)
    }

    /// Puts bytes that are not CBOR at `key`.
    func corrupt(_ store: Store, _ key: Int) throws {
        let raw = try store.untypedCollection(named: "values").collection
        try raw.put([0xFF, 0x00, 0x13], forKey: ByteKey(key.encodedKey))
    }

    @Test func aScanThatStopsEarlyDecodesNothingPastWhereItStopped() throws {
        let (store, values) = try numbers()
        // A value that does not decode, far past where the scan stops: an array scan throws on it,
        // the cursor never reaches it.
        try corrupt(store, 500)
        #expect(throws: KVStoreError.self) { try store.read { tx in try values.entries(in: tx) } }
        let firstThree = try store.read { tx in
            let cursor = try values.cursor(in: tx)
            var taken: [(key: Int, value: Int)] = []
            while let entry = try cursor.next() {
                taken.append(entry)
                if taken.count == 3 { break }
            }
            return taken
        }
        #expect(firstThree.map(\.key) == [0, 1, 2])
        #expect(firstThree.map(\.value) == [0, 10, 20])
    }

    @Test func aCursorStreamsEveryEntryOfARangeInOrderAndInReverse() throws {
        let (store, values) = try numbers()
        try store.read { tx throws in
            var sum = 0
            var count = 0
            try values.cursor(in: tx).forEach { _, value in
                sum += value
                count += 1
            }
            #expect(count == 1000)
            #expect(sum == (0..<1000).reduce(0) { $0 + $1 * 10 })
            // Ranges give exactly what the array API gives, forwards and backwards.
            for reverse in [false, true] {
                func streamed(_ cursor: KVCursor<Int, Int>) throws -> [Int] {
                    var keys: [Int] = []
                    while let key = try cursor.nextKey() { keys.append(key) }
                    return keys
                }
                #expect(try streamed(values.cursor(10..<20, reverse: reverse, in: tx))
                        == values.keys(10..<20, reverse: reverse, in: tx))
                #expect(try streamed(values.cursor(10...20, reverse: reverse, in: tx))
                        == values.keys(10...20, reverse: reverse, in: tx))
                #expect(try streamed(values.cursor(995..., reverse: reverse, in: tx))
                        == values.keys(995..., reverse: reverse, in: tx))
                #expect(try streamed(values.cursor(..<3, reverse: reverse, in: tx))
                        == values.keys(..<3, reverse: reverse, in: tx))
                #expect(try streamed(values.cursor(2000..., reverse: reverse, in: tx)).isEmpty)
            }
            let last = try values.cursor(reverse: true, in: tx).next()
            #expect(last?.key == 999 && last?.value == 9990)
        }
    }

    @Test func aCursorUsedAfterItsTransactionEndedThrowsTransactionEnded() throws {
        let (store, values) = try numbers(10)
        let fromRead = try store.read { tx in
            let cursor = try values.cursor(in: tx)
            _ = try cursor.next()
            return cursor
        }
        #expect(throws: KVStoreError.transactionEnded) { try fromRead.next() }
        #expect(throws: KVStoreError.transactionEnded) { try fromRead.nextKey() }
        let fromWrite = try store.write { tx in try values.cursor(5..., in: tx) }
        #expect(throws: KVStoreError.transactionEnded) { try fromWrite.next() }
        // Neither opening one on an ended transaction.
        var escaped: ReadTransaction?
        try store.read { escaped = $0 }
        #expect(throws: KVStoreError.transactionEnded) { try values.cursor(in: escaped!) }
        // The store goes on working: reads reuse the pooled transactions the cursors were opened in.
        for _ in 0..<10 { #expect(try values.get(3) == 30) }
    }

    @Test func aCorruptValueMidStreamThrowsWithItsCauseAndTheCursorGoesOnPastIt() throws {
        let (store, values) = try numbers(5)
        try corrupt(store, 2)
        try store.read { tx throws in
            let cursor = try values.cursor(in: tx)
            #expect(try cursor.next()?.key == 0)
            #expect(try cursor.next()?.key == 1)
            do {
                _ = try cursor.next()
                Issue.record("the value at 2 does not decode")
            } catch let error as KVStoreError {
                guard case .corruptValue(let collection, let key, _, let underlying?) = error else {
                    Issue.record("\(error)")
                    return
                }
                #expect(collection == "values" && key == "2")
                #expect(underlying.error is CBORError || underlying.error is DecodingError, "\(type(of: underlying.error))")
                #expect(error.underlyingError != nil)
            }
            #expect(try cursor.next()?.key == 3)
        }
    }

    @Test func aCursorInAWriteSeesTheTransactionsOwnWrites() throws {
        let (store, values) = try numbers(3)
        try store.write { tx throws in
            try values.put(-1, forKey: 100, in: tx)
            let cursor = try values.cursor(50..., in: tx)
            #expect(try cursor.next()?.value == -1)
            #expect(try cursor.next() == nil)
        }
    }

    @Test func manyCursorsInOneTransactionAreClosedAsTheyGo() throws {
        let (store, values) = try numbers(10)
        let total = try store.read { tx in
            var total = 0
            for i in 0..<500 {
                let cursor = try values.cursor((i % 10)..., in: tx)
                total += try cursor.next()?.value ?? 0
            }
            #expect(tx.cursors.count < 20)
            return total
        }
        #expect(total == 50 * (0..<10).reduce(0) { $0 + $1 * 10 })
    }
}
