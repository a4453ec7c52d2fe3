#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The typed getters without a transaction: each gives the value as of the last commit of any process,
// read in a read transaction of its own, or from memory when no transaction has committed since this
// suite last read the key (``SharedDefaults/committedValue(forKey:)``). To read several values from one
// consistent snapshot, pass a transaction to the `in:` forms instead:
//
//     let (id, count) = try defaults.store.read { tx in
//         (try defaults.string(forKey: "selectedTrainerId", in: tx), try defaults.integer(forKey: "count", in: tx))
//     }
//
// Inside a write transaction, pass it (a `WriteTransaction` is a `ReadTransaction`): these forms would
// begin a read inside the write, which ``KVStoreError/nestedTransaction(outer:inner:)`` refuses.
extension SharedDefaults {
    /// ``string(forKey:in:)`` as of the last commit. Served from memory while no transaction has
    /// committed since the key was last read (see "Defaults reads from memory" in the DocC article
    /// "Sharing a store between processes").
    public func string(forKey key: String) throws -> String? {
        Self.string(from: try rawValue(forKey: key))
    }

    /// ``integer(forKey:in:)`` as of the last commit.
    public func integer(forKey key: String) throws -> Int {
        Self.integer(from: try rawValue(forKey: key))
    }

    /// ``double(forKey:in:)`` as of the last commit.
    public func double(forKey key: String) throws -> Double {
        Self.double(from: try rawValue(forKey: key))
    }

    /// ``bool(forKey:in:)`` as of the last commit.
    public func bool(forKey key: String) throws -> Bool {
        Self.bool(from: try rawValue(forKey: key))
    }

    /// ``data(forKey:in:)`` as of the last commit.
    public func data(forKey key: String) throws -> Data? {
        Self.data(from: try rawValue(forKey: key))
    }

    /// ``array(forKey:in:)`` as of the last commit.
    public func array(forKey key: String) throws -> [Any]? {
        try object(forKey: key) as? [Any]
    }

    /// ``stringArray(forKey:in:)`` as of the last commit.
    public func stringArray(forKey key: String) throws -> [String]? {
        try object(forKey: key) as? [String]
    }

    /// ``dictionary(forKey:in:)`` as of the last commit.
    public func dictionary(forKey key: String) throws -> [String: Any]? {
        try object(forKey: key) as? [String: Any]
    }

    /// ``url(forKey:in:)`` as of the last commit.
    public func url(forKey key: String) throws -> URL? {
        try object(forKey: key) as? URL
    }
}

/// The values that a suite's getters without a transaction read, by key, all as of one committed
/// transaction; bounded, since a co-tenant may store many large values.
struct CommittedValueCache {
    /// At most this many keys are kept, and values of at most this many bytes in all: past either, the
    /// cache starts again empty.
    static let maxEntries = 1_024
    static let maxBytes = 1 << 20
    /// Larger values are read from the map every time.
    static let maxValueBytes = 16 << 10

    /// The transaction every kept value was read in; 0 before the first.
    private var transactionID: UInt64 = 0
    /// `nil` for a key with nothing stored.
    private var values: [String: CBORValue?] = [:]
    private var bytes = 0

    /// The value kept for `key`, if it was read in transaction `last`, the last one committed.
    func value(forKey key: String, at last: UInt64) -> CBORValue?? {
        guard last == transactionID, last != 0 else { return nil }
        return values[key]
    }

    /// Keeps `value` (stored in `size` bytes), read in transaction `id`. A newer transaction empties
    /// the cache first; a read of an older one (a thread that lost a race) is not kept.
    mutating func remember(_ value: CBORValue?, size: Int, forKey key: String, at id: UInt64) {
        if id > transactionID {
            values.removeAll(keepingCapacity: true)
            bytes = 0
            transactionID = id
        }
        guard id == transactionID, size <= Self.maxValueBytes else { return }
        let cost = size + key.utf8.count
        if values.count >= Self.maxEntries || bytes + cost > Self.maxBytes {
            values.removeAll(keepingCapacity: true)
            bytes = 0
        }
        if values.updateValue(value, forKey: key) == nil { bytes += cost }
    }

    var count: Int { values.count }
}
