/// A range of keys to scan. Swift's own ranges convert to it, so you can write `a..<b`, `a...b`,
/// `a...`, `..<b` or `...b` wherever a ``KeyRangeExpression`` is expected, or ``KeyRange/all``.
public struct KeyRange<Key: OrderedKey>: Sendable {
    public enum Bound: Sendable {
        case unbounded, inclusive(Key), exclusive(Key)
    }

    public var lower: Bound
    public var upper: Bound

    public init(lower: Bound, upper: Bound) {
        self.lower = lower
        self.upper = upper
    }

    /// Every key.
    public static var all: KeyRange { KeyRange(lower: .unbounded, upper: .unbounded) }

    /// The byte range for a primary-key scan: keys encoded as terminal.
    var bytes: ByteRange {
        var range = ByteRange()
        switch lower {
        case .unbounded: break
        case .inclusive(let k): range.lower = k.encodedKey; range.lowerInclusive = true
        case .exclusive(let k): range.lower = k.encodedKey; range.lowerInclusive = false
        }
        switch upper {
        case .unbounded: break
        case .inclusive(let k): range.upper = k.encodedKey; range.upperInclusive = true
        case .exclusive(let k): range.upper = k.encodedKey; range.upperInclusive = false
        }
        return range
    }

    /// The byte range for an index scan, whose stored keys are the index key (non-terminal) followed
    /// by the primary key: a bound covers every entry whose index key equals it.
    var indexBytes: ByteRange {
        func prefix(_ k: Key) -> [UInt8] {
            var bytes: [UInt8] = []
            k.encodeKey(into: &bytes, terminal: false)
            return bytes
        }
        var range = ByteRange()
        switch lower {
        case .unbounded: break
        case .inclusive(let k): range.lower = prefix(k); range.lowerInclusive = true
        case .exclusive(let k): range.lower = ByteRange.successor(of: prefix(k)); range.lowerInclusive = true
            if range.lower == nil { range.lower = prefix(k); range.lowerInclusive = false }
        }
        switch upper {
        case .unbounded: break
        case .inclusive(let k): range.upper = ByteRange.successor(of: prefix(k)); range.upperInclusive = false
        case .exclusive(let k): range.upper = prefix(k); range.upperInclusive = false
        }
        return range
    }
}

/// Anything that describes a ``KeyRange``: Swift's range types and `KeyRange` itself.
public protocol KeyRangeExpression<Key> {
    associatedtype Key: OrderedKey
    var keyRange: KeyRange<Key> { get }
}

extension KeyRange: KeyRangeExpression {
    public var keyRange: KeyRange<Key> { self }
}

extension Range: KeyRangeExpression where Bound: OrderedKey {
    public var keyRange: KeyRange<Bound> { KeyRange(lower: .inclusive(lowerBound), upper: .exclusive(upperBound)) }
}

extension ClosedRange: KeyRangeExpression where Bound: OrderedKey {
    public var keyRange: KeyRange<Bound> { KeyRange(lower: .inclusive(lowerBound), upper: .inclusive(upperBound)) }
}

extension PartialRangeFrom: KeyRangeExpression where Bound: OrderedKey {
    public var keyRange: KeyRange<Bound> { KeyRange(lower: .inclusive(lowerBound), upper: .unbounded) }
}

extension PartialRangeUpTo: KeyRangeExpression where Bound: OrderedKey {
    public var keyRange: KeyRange<Bound> { KeyRange(lower: .unbounded, upper: .exclusive(upperBound)) }
}

extension PartialRangeThrough: KeyRangeExpression where Bound: OrderedKey {
    public var keyRange: KeyRange<Bound> { KeyRange(lower: .unbounded, upper: .inclusive(upperBound)) }
}
