import Foundation
import KVStore

extension BenchmarkWorkload {
    /// Getting and setting one of 100 string settings. The keys and values are made in setup: building
    /// a String per operation would be measured too.
    static let defaults: [BenchmarkWorkload] = {
        let keys = (0..<100).map { "key-\($0)" }
        // Set cycles through 1,000 values, so that a key never gets the value it already holds.
        let values = (0..<1_000).map { "value-\($0)" }
        return [
            // Getters without a transaction serve a key from memory while nothing has committed since
            // they last read it, as UserDefaults does: every key is read once in setup.
            BenchmarkWorkload("Defaults get", "KVStore") {
                let defaults = try KVStoreDefaultsFixture.shared().defaults
                for key in keys { _ = try defaults.string(forKey: key) }
                var i = 0
                return {
                    sink(try defaults.string(forKey: keys[i]))
                    i = i == 99 ? 0 : i + 1
                }
            },
            // The same read through the `in:` form in a read transaction of its own: the path to compare
            // with raw LMDB. (A cached getter's first read after a commit also decodes into the cache.)
            BenchmarkWorkload("Defaults get", "KVStore in a transaction") {
                let defaults = try KVStoreDefaultsFixture.shared().defaults
                let store = defaults.store
                var i = 0
                return {
                    sink(try store.read { try defaults.string(forKey: keys[i], in: $0) })
                    i = i == 99 ? 0 : i + 1
                }
            },
            BenchmarkWorkload("Defaults get", "UserDefaults") {
                let defaults = UserDefaultsFixture.shared()
                var i = 0
                return {
                    sink(defaults.string(forKey: keys[i]))
                    i = i == 99 ? 0 : i + 1
                }
            },
            // The floor: the same CBOR text under the same key bytes in plain LMDB, read with
            // mdb_txn_renew + mdb_get, then the text checked as UTF-8 into a String.
            BenchmarkWorkload("Defaults get", "raw LMDB") {
                let raw = try RawLMDB.sharedDefaults()
                var i = 0
                return {
                    sink(try raw.string(forKey: keys[i]))
                    i = i == 99 ? 0 : i + 1
                }
            },
            BenchmarkWorkload("Defaults set", "KVStore", instructionIterations: 50) {
                let defaults = try KVStoreDefaultsFixture.shared().defaults
                var i = 0
                return {
                    try defaults.set(values[i], forKey: keys[i % 100])
                    i = i == 999 ? 0 : i + 1
                }
            },
            BenchmarkWorkload("Defaults set", "UserDefaults") {
                let defaults = UserDefaultsFixture.shared()
                var i = 0
                return {
                    defaults.set(values[i], forKey: keys[i % 100])
                    i = i == 999 ? 0 : i + 1
                }
            },
        ]
    }()
}
