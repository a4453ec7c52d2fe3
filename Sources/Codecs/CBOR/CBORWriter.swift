// Nothing in this file uses Foundation: the writer stores into a buffer whose exact size is
// computed first.

/// Writes CBOR into a buffer allocated to the exact size computed beforehand.
struct CBORWriter {
    private var pointer: UnsafeMutableRawPointer
    private let limit: UnsafeMutableRawPointer

    private init(start: UnsafeMutableRawPointer, count: Int) {
        pointer = start
        limit = start + count
    }

    /// Allocates `size` bytes and lets `body` fill them.
    static func serialize(size: Int, _ body: (inout CBORWriter) -> Void) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
            // Every data item is at least one byte, so the buffer is never empty.
            guard let start = buffer.baseAddress, size > 0 else { return }
            var writer = CBORWriter(start: UnsafeMutableRawPointer(start), count: size)
            body(&writer)
            // A mismatch would be a bug in the size computation, not a property of any input.
            precondition(writer.pointer == writer.limit, "CBOR size computation does not match the bytes written")
            initialized = size
        }
    }

    @inline(__always)
    private mutating func reserve(_ count: Int) {
        precondition(limit - pointer >= count, "CBOR size computation does not match the bytes written")
    }

    /// The size of a head whose argument is `argument`.
    @inline(__always)
    static func headSize(_ argument: UInt64) -> Int {
        argument < 24 ? 1 : argument <= 0xFF ? 2 : argument <= 0xFFFF ? 3 : argument <= 0xFFFF_FFFF ? 5 : 9
    }

    /// The size of a text string item.
    @inline(__always)
    static func textSize(_ s: String) -> Int {
        let count = s.utf8.count
        return headSize(UInt64(count)) + count
    }

    @inline(__always)
    mutating func byte(_ value: UInt8) {
        reserve(1)
        pointer.storeBytes(of: value, as: UInt8.self)
        pointer += 1
    }

    /// Writes a head in its shortest form.
    @inline(__always)
    mutating func head(_ major: UInt8, _ argument: UInt64) {
        let high = major << 5
        if argument < 24 {
            byte(high | UInt8(truncatingIfNeeded: argument))
        } else if argument <= 0xFF {
            reserve(2)
            pointer.storeBytes(of: high | 24, as: UInt8.self)
            pointer.storeBytes(of: UInt8(truncatingIfNeeded: argument), toByteOffset: 1, as: UInt8.self)
            pointer += 2
        } else if argument <= 0xFFFF {
            reserve(3)
            pointer.storeBytes(of: high | 25, as: UInt8.self)
            pointer.storeBytes(of: UInt16(truncatingIfNeeded: argument).bigEndian, toByteOffset: 1, as: UInt16.self)
            pointer += 3
        } else if argument <= 0xFFFF_FFFF {
            reserve(5)
            pointer.storeBytes(of: high | 26, as: UInt8.self)
            pointer.storeBytes(of: UInt32(truncatingIfNeeded: argument).bigEndian, toByteOffset: 1, as: UInt32.self)
            pointer += 5
        } else {
            reserve(9)
            pointer.storeBytes(of: high | 27, as: UInt8.self)
            pointer.storeBytes(of: argument.bigEndian, toByteOffset: 1, as: UInt64.self)
            pointer += 9
        }
    }

    @inline(__always)
    mutating func raw(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        pointer.copyMemory(from: source, byteCount: bytes.count)
        pointer += bytes.count
    }

    @inline(__always)
    mutating func text(_ s: String) {
        var s = s
        s.withUTF8 { utf8 in
            head(3, UInt64(utf8.count))
            raw(UnsafeRawBufferPointer(utf8))
        }
    }

    /// Writes a float64 (0xFB and eight big-endian bytes).
    @inline(__always)
    mutating func double(_ value: Double) {
        reserve(9)
        pointer.storeBytes(of: 0xFB, as: UInt8.self)
        pointer.storeBytes(of: value.bitPattern.bigEndian, toByteOffset: 1, as: UInt64.self)
        pointer += 9
    }
}
