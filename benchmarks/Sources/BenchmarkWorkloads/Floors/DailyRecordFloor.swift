import Foundation
import KVStore
import Workloads

/// The floor of the codec workloads: CBOR for `DailyRecord` alone, written by hand, reading and writing
/// exactly what `CBOREncoder().encode(record)` produces:
///
///     {"day": "YYYY-MM-DD", "scores": {text: int}, "memos": {text: text},
///      "cachedCategoryAverages": {text: float64}, "cachedTotalAverage": float64, "cachedInputCount": int}
///
/// a definite-length map with the fields in that order, each dictionary's keys in RFC 8949's
/// deterministic order (shorter first, then bytewise), integers in their shortest form, every float as
/// a float64 (0xFB). What a general codec cannot skip it does too: every length is checked against the
/// input, text is checked as UTF-8, the day must exist, a field or a dictionary key may not appear twice.
enum DailyRecordFloor {
    // MARK: Decoding

    /// The record in `bytes`, in one pass (fields in any order, each once), dictionaries reserved at
    /// their final size.
    ///
    /// - Throws: ``FloorError`` for anything but one such record.
    static func decode(_ bytes: [UInt8]) throws -> DailyRecord {
        try bytes.withUnsafeBytes { buffer in
            var reader = FloorReader(buffer)
            guard try reader.head(5) == 6 else { throw FloorError(reason: "not a map of the 6 fields", offset: 0) }
            var day: LogicalDay?
            var scores: [String: Int]?
            var memos: [String: String]?
            var averages: [String: Double]?
            var total: Double?
            var count: Int?
            for _ in 0..<6 {
                let keyOffset = reader.offset
                let key = try reader.textBytes()
                if FloorReader.matches(key, "day"), day == nil {
                    day = try reader.day()
                } else if FloorReader.matches(key, "scores"), scores == nil {
                    scores = try map(&reader) { try $0.int() }
                } else if FloorReader.matches(key, "memos"), memos == nil {
                    memos = try map(&reader) { try $0.text() }
                } else if FloorReader.matches(key, "cachedCategoryAverages"), averages == nil {
                    averages = try map(&reader) { try $0.double() }
                } else if FloorReader.matches(key, "cachedTotalAverage"), total == nil {
                    total = try reader.double()
                } else if FloorReader.matches(key, "cachedInputCount"), count == nil {
                    count = try reader.int()
                } else {
                    throw FloorError(reason: "unknown or repeated field", offset: keyOffset)
                }
            }
            try reader.finish()
            // Six distinct known fields were read, so none is missing.
            var record = DailyRecord(day: day!, scores: [:], memos: [:])
            record.scores = scores!
            record.memos = memos!
            record.cachedCategoryAverages = averages!
            record.cachedTotalAverage = total!
            record.cachedInputCount = count!
            return record
        }
    }

    /// A map of text keys to values that `value` reads, its capacity reserved first.
    @inline(__always)
    private static func map<V>(_ reader: inout FloorReader, _ value: (inout FloorReader) throws -> V) throws -> [String: V] {
        let count = try reader.mapCount()
        var result = [String: V](minimumCapacity: count)
        for _ in 0..<count {
            let offset = reader.offset
            let key = try reader.text()
            guard result.updateValue(try value(&reader), forKey: key) == nil else {
                throw FloorError(reason: "repeated key", offset: offset)
            }
        }
        return result
    }

    // MARK: Encoding

    /// The record's CBOR, byte for byte what `CBOREncoder().encode(record)` gives: the size computed
    /// first, then one array of exactly that size written in place.
    ///
    /// - Throws: ``FloorError`` for a day outside the years 0000 to 9999 (another text form).
    static func encode(_ record: DailyRecord) throws -> [UInt8] {
        let (year, month, day) = record.day.components
        guard (0...9999).contains(year) else { throw FloorError(reason: "year outside 0000…9999", offset: 0) }
        var size = 1 + 4 + 11 + 7 + 6 + 23 + 19 + 9 + 17 + intSize(record.cachedInputCount)
        size += headSize(record.scores.count)
        for (key, value) in record.scores { size += textSize(key) + intSize(value) }
        size += headSize(record.memos.count)
        for (key, value) in record.memos { size += textSize(key) + textSize(value) }
        size += headSize(record.cachedCategoryAverages.count)
        for (key, _) in record.cachedCategoryAverages { size += textSize(key) + 9 }

        return [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
            var writer = FloorWriter(buffer)
            writer.byte(0xA6)
            writer.text("day")
            writer.byte(0x6A)
            writer.digits(year, 4); writer.byte(UInt8(ascii: "-")); writer.digits(month, 2); writer.byte(UInt8(ascii: "-")); writer.digits(day, 2)
            writer.text("scores")
            writer.sortedMap(record.scores) { writer, value in writer.int(value) }
            writer.text("memos")
            writer.sortedMap(record.memos) { writer, value in writer.text(value) }
            writer.text("cachedCategoryAverages")
            writer.sortedMap(record.cachedCategoryAverages) { writer, value in writer.double(value) }
            writer.text("cachedTotalAverage")
            writer.double(record.cachedTotalAverage)
            writer.text("cachedInputCount")
            writer.int(record.cachedInputCount)
            precondition(writer.written == size, "DailyRecordFloor's size computation does not match the bytes written")
            initialized = size
        }
    }

    @inline(__always)
    private static func headSize(_ argument: Int) -> Int {
        argument < 24 ? 1 : argument <= 0xFF ? 2 : argument <= 0xFFFF ? 3 : argument <= 0xFFFF_FFFF ? 5 : 9
    }

    @inline(__always)
    private static func textSize(_ text: String) -> Int {
        let count = text.utf8.count
        return headSize(count) + count
    }

    @inline(__always)
    private static func intSize(_ value: Int) -> Int {
        headSize(value < 0 ? ~value : value)
    }
}
