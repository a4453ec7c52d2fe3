// kvtest-helper's "another process stores a huge value" command: it writes with raw LMDB calls, as a
// process that does not go through KVStore (or an older or hostile one) could, past every size limit
// KVStore's writers enforce.
import CLMDB
import Foundation
import KVStore

/// `huge-values ROOT GROUP SIZE`: declares the collection `blobs` (string keys, CBOR strings, with
/// `small` = "hello") and the defaults suite `prefs` (`small` = "hi") through the API, then, with raw
/// LMDB calls, stores at key `huge` of each a value of SIZE bytes, and at key `over` one byte more than
/// the limit that applies (16 MiB + 1 in the collection, ``SharedDefaults/maxValueSize`` + 1 in the
/// suite). Each value is a well-formed CBOR byte string, so that only its size is wrong. Prints
/// `stored <database> <key> <bytes>` per value, then `ok`.
func hugeValueCommand(_ command: String, root: String, group: String, rest: [String]) throws -> Bool {
    guard command == "huge-values" else { return false }
    guard let size = Int(rest.first ?? ""), size >= 16 else { fail("usage: huge-values ROOT GROUP SIZE") }
    let directory: String
    let collectionDatabase: String
    let suiteDatabase: String
    do {
        let container = open()
        let blobs = try container.store.collection("blobs", key: String.self, value: String.self)
        try blobs.put("hello", forKey: "small")
        try container.defaults(suite: "prefs").set("hi", forKey: "small")
        directory = container.store.directory
        guard let entry = try container.store.catalogEntry(forCollection: "blobs"),
              let suite = try container.store.catalog().first(where: { $0.kind == .defaults && $0.name == "prefs" }) else {
            fail("huge-values: the catalog lacks blobs or prefs")
        }
        collectionDatabase = entry.database
        suiteDatabase = suite.database
    }

    let values: [(database: String, key: [UInt8], size: Int)] = [
        (collectionDatabase, "huge".encodedKey, size),
        (collectionDatabase, "over".encodedKey, CBORLimits.default.maxInputSize + 1),
        (suiteDatabase, Array("huge".utf8), size),
        (suiteDatabase, Array("over".utf8), SharedDefaults.maxValueSize + 1),
    ]
    func check(_ rc: Int32, _ what: String) {
        if rc != 0 { fail("huge-values: \(what): \(String(cString: mdb_strerror(rc)))") }
    }
    var env: OpaquePointer?
    check(mdb_env_create(&env), "mdb_env_create")
    defer { mdb_env_close(env) }
    check(mdb_env_set_maxdbs(env, 64), "mdb_env_set_maxdbs")
    // Room for the values, their overflow pages and what is there already.
    let used = (try? FileManager.default.attributesOfItem(atPath: directory + "/data.mdb")[.size] as? Int) ?? 0
    let total = values.reduce(0) { $0 + $1.size }
    let mapSize = ((used + total + (64 << 20)) / (1 << 20) + 1) << 20
    check(mdb_env_set_mapsize(env, mapSize), "mdb_env_set_mapsize")
    check(mdb_env_open(env, directory, 0, 0o660), "mdb_env_open")
    var txn: OpaquePointer?
    check(mdb_txn_begin(env, nil, 0, &txn), "mdb_txn_begin")
    for value in values {
        var dbi: MDB_dbi = 0
        check(mdb_dbi_open(txn, value.database, 0, &dbi), "mdb_dbi_open \(value.database)")
        var key = value.key
        try key.withUnsafeMutableBytes { keyBytes in
            var mdbKey = MDB_val(mv_size: keyBytes.count, mv_data: keyBytes.baseAddress)
            var mdbValue = MDB_val(mv_size: value.size, mv_data: nil)
            check(mdb_put(txn, dbi, &mdbKey, &mdbValue, UInt32(MDB_RESERVE)), "mdb_put \(value.database)")
            guard let data = mdbValue.mv_data else { throw POSIXError(.EIO) }
            // A CBOR byte string (major type 2, 8-byte length) filling the value exactly.
            let bytes = data.assumingMemoryBound(to: UInt8.self)
            bytes[0] = 0x5b
            var length = UInt64(value.size - 9).bigEndian
            withUnsafeBytes(of: &length) { for i in 0..<8 { bytes[1 + i] = $0[i] } }
            memset(bytes + 9, 0x41, value.size - 9)
        }
        print("stored \(value.database) \(String(decoding: value.key, as: UTF8.self)) \(value.size)")
    }
    check(mdb_txn_commit(txn), "mdb_txn_commit")
    print("ok")
    return true
}
