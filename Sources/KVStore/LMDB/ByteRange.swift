internal import CLMDB

/// A range of stored keys in LMDB's byte order, scanned forwards or backwards with a cursor.
struct ByteRange: Sendable {
    var lower: [UInt8]?
    var lowerInclusive = true
    var upper: [UInt8]?
    var upperInclusive = true

    static let all = ByteRange()

    /// Every key that starts with `prefix`.
    static func prefix(_ prefix: [UInt8]) -> ByteRange {
        ByteRange(lower: prefix, lowerInclusive: true, upper: successor(of: prefix), upperInclusive: false)
    }

    /// The smallest byte string greater than every string that starts with `prefix`, or `nil` if there
    /// is none (the prefix is empty or all `FF`).
    static func successor(of prefix: [UInt8]) -> [UInt8]? {
        var bytes = prefix
        while let last = bytes.last {
            if last < 0xFF {
                bytes[bytes.count - 1] = last + 1
                return bytes
            }
            bytes.removeLast()
        }
        return nil
    }

    func aboveLower(_ key: UnsafeRawBufferPointer) -> Bool {
        guard let lower else { return true }
        let c = compareBytes(key, lower)
        return lowerInclusive ? c >= 0 : c > 0
    }

    /// A bound of 1, 2, 4 or 8 bytes as a big-endian integer: for a key of the same length, the
    /// integers compare as the bytes do.
    struct WordBound {
        let word: UInt64
        let count: Int
        init?(_ bytes: [UInt8]) {
            guard let word = bytes.withUnsafeBytes({ loadBigEndian($0, width: bytes.count) }) else { return nil }
            self.word = word
            count = bytes.count
        }
    }

    func belowUpper(_ key: UnsafeRawBufferPointer) -> Bool {
        guard let upper else { return true }
        let c = compareBytes(key, upper)
        return upperInclusive ? c <= 0 : c < 0
    }

    /// Calls `body` for each entry in range, in key order (or reverse order), until it returns `false`.
    /// The buffers are valid only during the call.
    func scan(
        _ transaction: OpaquePointer,
        _ database: DatabaseHandle,
        reverse: Bool,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        let cursor = try Cursor(transaction: transaction, database: database)
        if !reverse {
            var entry = try lower.map { try cursor.seek(atOrAfter: $0) } ?? cursor.first()
            if let current = entry, !aboveLower(current.key) { entry = try cursor.next() }
            // A bound of up to 8 bytes (an integer or a day) is compared as one big-endian integer with
            // keys of its length, instead of a memcmp per entry.
            let upperBound = upper.flatMap(WordBound.init)
            while let current = entry {
                if let upperBound, let word = loadBigEndian(current.key, width: upperBound.count) {
                    guard upperInclusive ? word <= upperBound.word : word < upperBound.word else { return }
                } else if !belowUpper(current.key) {
                    return
                }
                guard try body(current.key, current.value) else { return }
                entry = try cursor.next()
            }
        } else {
            var entry: Cursor.Entry?
            if let upper {
                entry = try cursor.seek(atOrAfter: upper)
                if let current = entry {
                    if !belowUpper(current.key) { entry = try cursor.previous() }
                } else {
                    entry = try cursor.last()
                }
            } else {
                entry = try cursor.last()
            }
            while let current = entry, aboveLower(current.key) {
                guard try body(current.key, current.value) else { return }
                entry = try cursor.previous()
            }
        }
    }
}
