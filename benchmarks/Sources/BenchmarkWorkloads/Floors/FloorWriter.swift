/// Writes CBOR into a buffer whose size was computed beforehand (checked on every write).
struct FloorWriter {
    private let buffer: UnsafeMutableBufferPointer<UInt8>
    private(set) var written = 0

    init(_ buffer: UnsafeMutableBufferPointer<UInt8>) { self.buffer = buffer }

    @inline(__always)
    private mutating func reserve(_ count: Int) {
        precondition(buffer.count - written >= count, "DailyRecordFloor's size computation does not match the bytes written")
    }

    @inline(__always)
    mutating func byte(_ value: UInt8) {
        reserve(1)
        buffer[written] = value
        written += 1
    }

    /// A head in its shortest form.
    @inline(__always)
    mutating func head(_ major: UInt8, _ argument: UInt64) {
        let high = major << 5
        let width: Int
        switch argument {
        case 0..<24: byte(high | UInt8(argument)); return
        case 24...0xFF: byte(high | 24); width = 1
        case 0x100...0xFFFF: byte(high | 25); width = 2
        case 0x1_0000...0xFFFF_FFFF: byte(high | 26); width = 4
        default: byte(high | 27); width = 8
        }
        bigEndian(argument, width)
    }

    @inline(__always)
    private mutating func bigEndian(_ value: UInt64, _ width: Int) {
        reserve(width)
        for i in 0..<width { buffer[written + i] = UInt8(truncatingIfNeeded: value >> (8 * (width - 1 - i))) }
        written += width
    }

    @inline(__always)
    mutating func int(_ value: Int) {
        if value < 0 { head(1, UInt64(~value)) } else { head(0, UInt64(value)) }
    }

    @inline(__always)
    mutating func double(_ value: Double) {
        byte(0xFB)
        bigEndian(value.bitPattern, 8)
    }

    @inline(__always)
    mutating func text(_ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            head(3, UInt64(utf8.count))
            reserve(utf8.count)
            guard let source = utf8.baseAddress, let target = buffer.baseAddress else { return }
            (target + written).update(from: source, count: utf8.count)
            written += utf8.count
        }
    }

    @inline(__always)
    mutating func text(_ text: StaticString) {
        head(3, UInt64(text.utf8CodeUnitCount))
        reserve(text.utf8CodeUnitCount)
        (buffer.baseAddress! + written).update(from: text.utf8Start, count: text.utf8CodeUnitCount)
        written += text.utf8CodeUnitCount
    }

    /// `value`'s digits, zero-padded to `width`.
    @inline(__always)
    mutating func digits(_ value: Int, _ width: Int) {
        reserve(width)
        var value = value
        for i in (0..<width).reversed() {
            buffer[written + i] = UInt8(ascii: "0") + UInt8(value % 10)
            value /= 10
        }
        written += width
    }

    /// A map of `dictionary`'s entries, keys in RFC 8949's deterministic order (shorter first, then
    /// bytewise), sorted in a temporary buffer (on the stack) by their length and first 16 bytes, as
    /// integers; only keys longer than that which share those bytes are compared further.
    @inline(__always)
    mutating func sortedMap<V>(_ dictionary: [String: V], _ value: (inout FloorWriter, V) -> Void) {
        head(5, UInt64(dictionary.count))
        withUnsafeTemporaryAllocation(of: SortEntry<V>.self, capacity: dictionary.count) { buffer in
            var entries = buffer
            _ = entries.initialize(from: dictionary.lazy.map { SortEntry(key: $0.key, value: $0.value) })
            defer { entries.deinitialize() }
            entries.sort { a, b in
                if a.count != b.count { return a.count < b.count }
                if a.high != b.high { return a.high < b.high }
                if a.low != b.low { return a.low < b.low }
                return a.count > 16 && a.key.utf8.lexicographicallyPrecedes(b.key.utf8)
            }
            for entry in entries {
                text(entry.key)
                value(&self, entry.value)
            }
        }
    }
}

/// A dictionary entry with what orders its key: the UTF-8 length, then the first 16 bytes as two
/// big-endian integers (zero-padded).
private struct SortEntry<V> {
    let key: String
    let value: V
    let count: Int
    let high: UInt64
    let low: UInt64

    @inline(__always)
    init(key: String, value: V) {
        self.key = key
        self.value = value
        var prefix: (UInt64, UInt64) = (0, 0)
        var key = key
        count = key.withUTF8 { utf8 in
            withUnsafeMutableBytes(of: &prefix) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(utf8).prefix(16))) }
            return utf8.count
        }
        high = UInt64(bigEndian: prefix.0)
        low = UInt64(bigEndian: prefix.1)
    }
}
