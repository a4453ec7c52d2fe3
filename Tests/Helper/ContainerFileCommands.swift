import Foundation
import KVStore

/// Commands for the container-file safety tests (planted links, owners and modes, limits one process
/// imposes on the others). Each opens a store in a fresh process, so no environment is cached.
func containerFileCommand(_ command: String, root: String, group: String, rest: [String]) throws -> Bool {
    switch command {
    case "store-put":
        // store-put ROOT GROUP DIRECTORY MAP_SIZE MAX_READERS COUNT: opens the store in DIRECTORY with
        // that map size and reader table, writes COUNT values to "items", prints "ok".
        var options = Store.Options()
        options.mapSize = Int(rest[1])!
        options.maxMapSize = max(options.mapSize, 64 << 30)
        options.maxReaders = UInt32(rest[2])!
        let store = try Store(directory: rest[0], options: options)
        let items = try store.collection("items", key: Int.self, value: [UInt8].self)
        try store.write { tx in
            for i in 0..<Int(rest[3])! { try items.put([UInt8](repeating: UInt8(i & 0xFF), count: 512), forKey: i, in: tx) }
        }
        print("ok")
    case "container-put":
        // container-put ROOT GROUP SHARING: opens the container (privateToUser or groupShared) and puts
        // "1" at "a" in the string-keyed collection "notes".
        var options = SharedContainer.Options()
        options.sharing = rest[0] == "groupShared" ? .groupShared : .privateToUser
        let container = try SharedContainer(groupIdentifier: group, root: root, options: options)
        try container.store.collection("notes", key: String.self, value: String.self).put("1", forKey: "a")
        print("ok")
    case "store-count":
        // store-count ROOT GROUP DIRECTORY MAX_MAP_SIZE [FILE_MODE]: opens the store read-only with that
        // limit (and file mode, in octal: 660 is group-shared) and prints the number of values in "items".
        var options = Store.Options()
        options.readOnly = true
        if rest.count > 2 { options.fileMode = mode_t(rest[2], radix: 8)! }
        options.maxMapSize = Int(rest[1])!
        options.mapSize = min(options.mapSize, options.maxMapSize)
        let store = try Store(directory: rest[0], options: options)
        print(try store.collection("items", key: Int.self, value: [UInt8].self).count())
    case "store-hold-read":
        // store-hold-read ROOT GROUP DIRECTORY MAX_READERS: opens the store, begins a read transaction,
        // says "reading", and keeps it open until killed.
        var options = Store.Options()
        options.maxReaders = UInt32(rest[1])!
        let store = try Store(directory: rest[0], options: options)
        try store.read { _ in
            FileHandle.standardOutput.write(Data("reading\n".utf8))
            while true { sleep(60) }
        }
    case "store-read-loop":
        // store-read-loop ROOT GROUP DIRECTORY: reads every value of "items" over and over; prints
        // "reading" after the first pass and "error <description>" (then exits 3) on a typed error.
        let store = try Store(directory: rest[0])
        let items = try store.collection("items", key: Int.self, value: [UInt8].self)
        var first = true
        while true {
            do {
                let total = try store.read { tx in try items.entries(in: tx).reduce(0) { $0 + $1.value.count } }
                if first { print("reading \(total)"); flushOutput(); first = false }
            } catch {
                print("error \(error)"); flushOutput()
                exit(3)
            }
        }
    case "store-readers-retry":
        // store-readers-retry ROOT GROUP DIRECTORY TRIGGERS: opens the store and says "open"; then, each
        // time the file TRIGGERS/N appears (N = 1, 2, …), tries a read and prints "N ok COUNT" or
        // "N error DESCRIPTION". Runs until killed.
        let store = try Store(directory: rest[0])
        let items = try store.collection("items", key: Int.self, value: [UInt8].self)
        _ = try items.count()
        print("open"); flushOutput()
        var round = 1
        while true {
            guard access(rest[1] + "/\(round)", F_OK) == 0 else { usleep(10_000); continue }
            // The outer read reuses this process's pooled slot; the inner one needs a second slot.
            do { print("\(round) ok \(try store.read { _ in try items.count() })") } catch { print("\(round) error \(error)") }
            flushOutput()
            round += 1
        }
    default:
        return false
    }
    return true
}

/// Writes out what `print` buffered, so that a test waiting for a line sees it now.
private func flushOutput() { fflush(nil) }
