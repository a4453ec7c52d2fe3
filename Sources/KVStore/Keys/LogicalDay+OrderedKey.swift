/// A day as a key: its day number, so that days sort in order and a range of days is one cursor scan.
/// (``LogicalDay`` itself lives in Codecs, whose CBOR and JSON know it; the key order is the store's.)
extension LogicalDay: OrderedKey {
    public static var keyEncoding: KeyEncoding { .day }

    public func encodeKey(into bytes: inout [UInt8], terminal: Bool) {
        dayNumber.encodeKey(into: &bytes, terminal: terminal)
    }

    /// A whole key: its 4 bytes loaded in one step (a scan of days decodes one per entry).
    @inline(__always)
    public static func decodeKey(_ bytes: UnsafeRawBufferPointer) throws(KeyDecodingError) -> LogicalDay {
        LogicalDay(dayNumber: try Int32.decodeKey(bytes))
    }

    public static func decodeKey(from reader: inout KeyReader, terminal: Bool) throws(KeyDecodingError) -> LogicalDay {
        LogicalDay(dayNumber: try Int32.decodeKey(from: &reader, terminal: terminal))
    }
}
