// kvtest-helper commands of a "compromised widget": a co-tenant of the container that writes garbage
// into the live metadata with raw LMDB calls (no KVStore code) and plain file writes, and the readers
// that show what every other process then gets (LiveMetadataGarbageTests).
import CLMDB
import Foundation
import KVStore
import SyncKit
#if canImport(Glibc)
import Glibc
#endif

/// Bytes from a command-line spec: `hex:AABB…`, or `big:HEAD:COUNT:FILL:TAIL` for HEAD, then FILL
/// repeated COUNT times, then TAIL (each part hex), which builds values larger than an argument may be.
func hostileBytes(_ spec: String) throws -> [UInt8] {
    func hex(_ text: Substring) throws -> [UInt8] {
        guard text.count % 2 == 0 else { throw HostileError("odd hex '\(text)'") }
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            guard let byte = UInt8(text[index..<next], radix: 16) else { throw HostileError("bad hex '\(text)'") }
            bytes.append(byte)
            index = next
        }
        return bytes
    }
    if spec.hasPrefix("hex:") { return try hex(spec.dropFirst(4)) }
    let parts = spec.split(separator: ":", omittingEmptySubsequences: false)
    guard parts.count == 5, parts[0] == "big", let count = Int(parts[2]) else { throw HostileError("bad byte spec '\(spec.prefix(40))'") }
    let fill = try hex(parts[3])
    var bytes = try hex(parts[1])
    bytes.reserveCapacity(bytes.count + fill.count * count)
    for _ in 0..<count { bytes += fill }
    return bytes + (try hex(parts[4]))
}

struct HostileError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Puts one raw key and value into the named database of the container's store, in one LMDB write
/// transaction of a raw environment: what a compromised process with write access to `Store/` can do.
func hostilePut(storeDirectory: String, database: String, key: [UInt8], value: [UInt8]) throws {
    func check(_ rc: Int32, _ what: String) throws {
        if rc != 0 { throw HostileError("\(what): \(String(cString: mdb_strerror(rc)))") }
    }
    var env: OpaquePointer?
    try check(mdb_env_create(&env), "mdb_env_create")
    defer { mdb_env_close(env) }
    try check(mdb_env_set_maxdbs(env, 256), "mdb_env_set_maxdbs")
    try check(mdb_env_open(env, storeDirectory, UInt32(MDB_NOTLS), 0o600), "mdb_env_open")
    // Adopt the map size the store recorded, so that this commit does not record another one.
    try check(mdb_env_set_mapsize(env, 0), "mdb_env_set_mapsize")
    var txn: OpaquePointer?
    try check(mdb_txn_begin(env, nil, 0, &txn), "mdb_txn_begin")
    var dbi: MDB_dbi = 0
    let rc = mdb_dbi_open(txn, database, UInt32(MDB_CREATE), &dbi)
    if rc != 0 { mdb_txn_abort(txn); try check(rc, "mdb_dbi_open \(database)") }
    var key = key, value = value
    let put = key.withUnsafeMutableBytes { k in
        value.withUnsafeMutableBytes { v in
            var mk = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
            var mv = MDB_val(mv_size: v.count, mv_data: v.baseAddress)
            return mdb_put(txn, dbi, &mk, &mv, 0)
        }
    }
    if put != 0 { mdb_txn_abort(txn); try check(put, "mdb_put") }
    try check(mdb_txn_commit(txn), "mdb_txn_commit")
}

/// Resident-set high-water mark of this process, in KiB (`VmHWM`).
func peakResidentKiB() -> Int {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
}

/// A reader's outcome as one line: `ok DETAIL`, or `error TYPE: DESCRIPTION` (exit status 3).
func report(_ body: () throws -> String) -> Never {
    do {
        say("ok \(try body())")
        say("peak-rss-kib \(peakResidentKiB())")
        exit(0)
    } catch {
        say("error \(type(of: error)): \(error)")
        say("peak-rss-kib \(peakResidentKiB())")
        exit(3)
    }
}

/// Runs the hostile commands; returns `false` for a command it does not know.
func hostileCommand(_ command: String, root: String, group: String, rest: [String]) throws -> Bool {
    let containerPath = root + "/" + group
    switch command {
    case "hostile-put":
        // hostile-put ROOT GROUP DATABASE KEYSPEC VALUESPEC: a raw put into Store/ (see hostileBytes).
        try hostilePut(storeDirectory: containerPath + "/Store", database: rest[0],
                       key: try hostileBytes(rest[1]), value: try hostileBytes(rest[2]))
        say("ok")
    case "hostile-file":
        // hostile-file ROOT GROUP RELATIVE_PATH BYTESPEC: replaces a container file's bytes in place.
        let bytes = try hostileBytes(rest[1])
        let path = containerPath + "/" + rest[0]
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw HostileError("open \(path): errno \(errno)") }
        defer { close(fd) }
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count else { throw HostileError("write \(path): \(written) of \(bytes.count)") }
        say("ok")
    case "hostile-sparse":
        // hostile-sparse ROOT GROUP RELATIVE_PATH SIZE: a sparse file of SIZE bytes (ftruncate).
        let path = containerPath + "/" + rest[0]
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw HostileError("open \(path): errno \(errno)") }
        defer { close(fd) }
        guard ftruncate(fd, off_t(rest[1])!) == 0 else { throw HostileError("ftruncate \(path): errno \(errno)") }
        say("ok")
    case "garbage-read":
        // garbage-read ROOT GROUP WHAT [NAME]: one reader of the live metadata, as another process of
        // the container runs it; prints "ok …" or "error TYPE: …", then "peak-rss-kib N".
        let what = rest[0]
        report {
            switch what {
            case "feed":
                let feed = try WidgetFeed<TestFeedPayloadShape>(name: rest[1], groupIdentifier: group, root: root)
                return "generation \(try feed.read().generation)"
            case "manifest":
                return "\(try Snapshots(directory: containerPath + "/Snapshots", create: false).list().count) snapshots"
            default:
                let container = try SharedContainer(groupIdentifier: group, root: root)
                switch what {
                case "catalog":
                    return "\(try container.store.catalog().count) entries"
                case "collection":
                    return "\(try container.store.collection(rest[1], key: Int.self, value: Int.self).count()) entries"
                case "defaults":
                    return try container.defaults(suite: rest[1]).string(forKey: "k") ?? "<nil>"
                case "history":
                    let history = try History.attach(to: container)
                    return "\(try history.changes(since: .zero).transactions?.count ?? -1) transactions"
                case "consumer":
                    let history = try History.attach(to: container)
                    let changes = try history.consumer(named: rest[1]).pendingChanges()
                    return "\(changes.transactions.map { "\($0.count) transactions" } ?? "expired")"
                case "write":
                    // A write to a history-enabled collection: the history observer reads the state.
                    let history = try History.attach(to: container)
                    let events = try container.store.collection("events", key: Int.self, value: Int.self)
                    try container.store.write(author: "app") { tx in try events.put(1, forKey: 1, in: tx) }
                    return "token \(try history.currentToken())"
                case "purge":
                    return "\(try History.attach(to: container).purge().removed) removed"
                default:
                    throw HostileError("unknown reader \(what)")
                }
            }
        }
    default:
        return false
    }
    return true
}

/// Any CBOR map decodes far enough to reach the feed's own checks.
struct TestFeedPayloadShape: Codable, Sendable {}
