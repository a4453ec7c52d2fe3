/// Stores a small trivial struct as its in-memory bytes and reads it straight from the memory map,
/// without a copy into an intermediate buffer and without allocating.
///
/// Use it for hot paths such as a dashboard that scans a year of compact daily summaries:
///
/// ```swift
/// struct DailySummary: BitwiseCopyable { var day: Int32; var total: Float; … }
/// let summaries = try store.collection("dailySummaries", key: LogicalDay.self,
///                                      codec: FixedLayoutCodec<DailySummary>())
/// ```
///
/// The type must be made of plain numbers only (no references, strings, arrays or pointers). The
/// bytes are the machine's own layout and byte order (little-endian on every platform Swift runs on
/// Linux); the catalog records the size, and a stored value whose size differs is reported as corrupt.
/// Change the layout only together with the collection's schema version and a migration.
@frozen
public struct FixedLayoutCodec<Value: BitwiseCopyable>: ValueCodec {
    @inlinable
    public init() {}

    public var encodingName: String { ValueEncoding.fixed(size: MemoryLayout<Value>.size).description }

    @inlinable
    public func encode(_ value: Value) throws -> [UInt8] {
        withUnsafeBytes(of: value) { Array($0) }
    }

    // Inlinable, so that a scan in another module (a dashboard) reads each value without a call.
    @inlinable @inline(__always)
    public func decode(_ bytes: UnsafeRawBufferPointer) throws -> Value {
        guard bytes.count == MemoryLayout<Value>.size else {
            throw FixedLayoutError(expected: MemoryLayout<Value>.size, actual: bytes.count)
        }
        return bytes.loadUnaligned(as: Value.self)
    }
}

/// A fixed-layout value of the wrong size.
public struct FixedLayoutError: Error, Hashable, Sendable, CustomStringConvertible {
    public let expected: Int
    public let actual: Int

    @inlinable
    public init(expected: Int, actual: Int) {
        self.expected = expected
        self.actual = actual
    }

    public var description: String { "fixed-layout value is \(actual) bytes, expected \(expected)" }
}
