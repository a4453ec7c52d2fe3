import KVStore

/// Where a page of a group's current state ends: its last row's kind, name and key. The server
/// orders a group's state by kind, name (in the database's collation), then key (byte order, which is
/// LMDB's), and the next page starts after the cursor; within one kind and name, a device can compare
/// keys itself.
///
/// ```swift
/// let cursor = StateCursor(kind: "collection", name: "notes", key: Array("k7".utf8))
/// GatewayEndpoint.state(after: cursor, limit: 1_000)   // "/v1/state?after=…&limit=1000"
/// ```
package struct StateCursor: Hashable, Sendable {
    package var kind: String
    package var name: String
    package var key: [UInt8]

    package init(kind: String, name: String, key: [UInt8]) { (self.kind, self.name, self.key) = (kind, name, key) }

    /// The cursor as a request target carries it: its wire form (the kind, the name and the key, each
    /// with its length first) in lower-case hex. At most 1,838 characters.
    package var text: String {
        var writer = WireWriter(capacity: 8 + kind.utf8.count + name.utf8.count + key.count)
        writer.text(kind)
        writer.text(name)
        writer.data(key)
        return Hex.encode(writer.bytes)
    }

    /// Reads ``text``'s form: a kind and a name of at most ``GatewayWire/maxNameBytes`` bytes of UTF-8
    /// without a NUL (PostgreSQL's text holds none), and a key of at most `Store.maxKeySize` bytes.
    package init(text: some StringProtocol) throws(GatewayRefusal) {
        guard let bytes = Hex.decode(text.utf8) else { throw GatewayRefusal(.badRequest, "the state cursor is not hexadecimal") }
        var reader = WireReader(bytes)
        do {
            kind = try reader.text(max: GatewayWire.maxNameBytes)
            name = try reader.text(max: GatewayWire.maxNameBytes)
            key = try reader.data(max: Store.maxKeySize)
            try reader.end()
        } catch {
            throw GatewayRefusal(.badRequest, "the state cursor is malformed: \(error)")
        }
        guard !kind.utf8.contains(0), !name.utf8.contains(0) else { throw GatewayRefusal(.badRequest, "the state cursor holds a NUL byte") }
    }
}
