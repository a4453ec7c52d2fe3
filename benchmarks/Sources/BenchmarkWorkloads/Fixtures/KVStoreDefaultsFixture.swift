import KVStore

/// A defaults suite holding "key-0"…"key-99" → "value-0"…"value-99", in a container of its own.
final class KVStoreDefaultsFixture: @unchecked Sendable {
    private static let built = Result { try KVStoreDefaultsFixture() }
    static func shared() throws -> KVStoreDefaultsFixture { try built.get() }

    let defaults: SharedDefaults

    private init() throws {
        let container = try SharedContainer(groupIdentifier: "group.com.example.bench", root: try Dataset.temporaryDirectory("defaults"))
        let defaults = try container.defaults()
        try container.store.write { tx in for i in 0..<100 { try defaults.set("value-\(i)", forKey: "key-\(i)", in: tx) } }
        self.defaults = defaults
    }
}
