import Foundation

// The typed getters without a transaction: each reads in a read transaction of its own. To read
// several values from one consistent snapshot, pass a transaction to the `in:` forms instead:
//
//     let (id, count) = try defaults.store.read { tx in
//         (try defaults.string(forKey: "selectedTrainerId", in: tx), try defaults.integer(forKey: "count", in: tx))
//     }
//
// Inside a write transaction, pass it (a `WriteTransaction` is a `ReadTransaction`): these forms would
// begin a read inside the write, which ``KVStoreError/nestedTransaction(outer:inner:)`` refuses.
extension SharedDefaults {
    /// ``string(forKey:in:)`` in a read transaction of its own.
    public func string(forKey key: String) throws -> String? {
        try store.read { try string(forKey: key, in: $0) }
    }

    /// ``integer(forKey:in:)`` in a read transaction of its own.
    public func integer(forKey key: String) throws -> Int {
        try store.read { try integer(forKey: key, in: $0) }
    }

    /// ``double(forKey:in:)`` in a read transaction of its own.
    public func double(forKey key: String) throws -> Double {
        try store.read { try double(forKey: key, in: $0) }
    }

    /// ``bool(forKey:in:)`` in a read transaction of its own.
    public func bool(forKey key: String) throws -> Bool {
        try store.read { try bool(forKey: key, in: $0) }
    }

    /// ``data(forKey:in:)`` in a read transaction of its own.
    public func data(forKey key: String) throws -> Data? {
        try store.read { try data(forKey: key, in: $0) }
    }

    /// ``array(forKey:in:)`` in a read transaction of its own.
    public func array(forKey key: String) throws -> [Any]? {
        try store.read { try array(forKey: key, in: $0) }
    }

    /// ``stringArray(forKey:in:)`` in a read transaction of its own.
    public func stringArray(forKey key: String) throws -> [String]? {
        try store.read { try stringArray(forKey: key, in: $0) }
    }

    /// ``dictionary(forKey:in:)`` in a read transaction of its own.
    public func dictionary(forKey key: String) throws -> [String: Any]? {
        try store.read { try dictionary(forKey: key, in: $0) }
    }

    /// ``url(forKey:in:)`` in a read transaction of its own.
    public func url(forKey key: String) throws -> URL? {
        try store.read { try url(forKey: key, in: $0) }
    }
}
