/// An unsigned 128-bit integer as two words, for `Decimal` mantissas. (`UInt128` needs macOS 15 /
/// iOS 18, which this package does not require everywhere.)
struct CBORMagnitude: Equatable {
    var high: UInt64
    var low: UInt64

    static let zero = CBORMagnitude(high: 0, low: 0)

    var isZero: Bool { high == 0 && low == 0 }

    /// `self = self * 10 + digit`; false (and unchanged) on overflow.
    mutating func multiplyBy10(adding digit: UInt64) -> Bool {
        let lowProduct = low.multipliedFullWidth(by: 10)
        let highProduct = high.multipliedFullWidth(by: 10)
        guard highProduct.high == 0 else { return false }
        let (newHigh, o1) = highProduct.low.addingReportingOverflow(lowProduct.high)
        guard !o1 else { return false }
        let (newLow, o2) = lowProduct.low.addingReportingOverflow(digit)
        let (finalHigh, o3) = newHigh.addingReportingOverflow(o2 ? 1 : 0)
        guard !o3 else { return false }
        high = finalHigh
        low = newLow
        return true
    }

    /// Divides by 10 and returns the remainder.
    mutating func divideBy10() -> UInt64 {
        let highQuotient = high / 10
        let highRemainder = high % 10
        let (lowQuotient, remainder) = (10 as UInt64).dividingFullWidth((high: highRemainder, low: low))
        high = highQuotient
        low = lowQuotient
        return remainder
    }

    /// `self + 1`, or nil on overflow.
    func plusOne() -> CBORMagnitude? {
        let (newLow, carry) = low.addingReportingOverflow(1)
        if !carry { return CBORMagnitude(high: high, low: newLow) }
        let (newHigh, overflow) = high.addingReportingOverflow(1)
        return overflow ? nil : CBORMagnitude(high: newHigh, low: newLow)
    }

    /// `self - 1`; self must not be zero.
    func minusOne() -> CBORMagnitude {
        low == 0 ? CBORMagnitude(high: high &- 1, low: .max) : CBORMagnitude(high: high, low: low - 1)
    }

    /// Big-endian bytes without leading zeros (empty for zero), as bignums carry them.
    var bigEndianBytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        for word in [high, low] {
            for shift in stride(from: 56, through: 0, by: -8) {
                let b = UInt8(truncatingIfNeeded: word >> UInt64(shift))
                if bytes.isEmpty && b == 0 { continue }
                bytes.append(b)
            }
        }
        return bytes
    }

    /// Reads big-endian bytes; nil when the value needs more than 128 bits.
    init?(bigEndian bytes: UnsafeRawBufferPointer) {
        var start = 0
        while start < bytes.count && bytes[start] == 0 { start += 1 }
        guard bytes.count - start <= 16 else { return nil }
        high = 0
        low = 0
        for i in start ..< bytes.count {
            high = (high << 8) | (low >> 56)
            low = (low << 8) | UInt64(bytes[i])
        }
    }

    init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Decimal digits.
    var decimalString: String {
        if high == 0 { return String(low) }
        var digits: [UInt8] = []
        var value = self
        while !value.isZero { digits.append(UInt8(value.divideBy10()) + 0x30) }
        return String(decoding: digits.reversed(), as: UTF8.self)
    }
}
