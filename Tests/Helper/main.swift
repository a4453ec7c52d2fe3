// kvtest-helper: a second (third, …) process for the multi-process tests. Each command does one
// thing against a real container and prints a result line; any error exits 1 with a message.
import Foundation
import KVStore
import Workloads

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("kvtest-helper: \(message)\n".utf8))
    exit(1)
}

let args = Array(CommandLine.arguments.dropFirst())
guard args.count >= 3 else { fail("usage: kvtest-helper COMMAND ROOT GROUP [ARGS…]") }
let (command, root, group) = (args[0], args[1], args[2])
let rest = Array(args.dropFirst(3))

func open(mapSize: Int = 16 << 20, readOnly: Bool = false) -> SharedContainer {
    var options = SharedContainer.Options()
    options.mapSize = mapSize
    options.readOnly = readOnly
    do { return try SharedContainer(groupIdentifier: group, root: root, options: options) }
    catch { fail("open: \(error)") }
}

do {
    switch command {
    case "write-defaults":
        // write-defaults ROOT GROUP KEY VALUE
        try open().defaults().set(rest[1], forKey: rest[0])
        print("ok")
    case "read-defaults":
        // read-defaults ROOT GROUP KEY
        print(try open(readOnly: true).defaults().string(forKey: rest[0]) ?? "<nil>")
    case "grow":
        // grow ROOT GROUP COLLECTION COUNT VALUE_SIZE FIRST: puts COUNT values of VALUE_SIZE bytes at
        // keys FIRST…, one transaction each, starting from a 64 KiB map.
        let container = open(mapSize: 64 << 10)
        let collection = try container.store.collection(rest[0], key: Int.self, value: [UInt8].self)
        let count = Int(rest[1])!, size = Int(rest[2])!, first = Int(rest[3])!
        for i in first..<(first + count) {
            try collection.put([UInt8](repeating: UInt8(truncatingIfNeeded: i), count: size), forKey: i)
        }
        print("ok \(try container.store.environmentInfo().mapSize)")
    case "count":
        // count ROOT GROUP COLLECTION
        let container = open(readOnly: true)
        let collection = try container.store.collection(rest[0], key: Int.self, value: [UInt8].self)
        print(try collection.count())
    case "sender":
        // sender ROOT GROUP: the extension side of the trainer flow, as JSON
        let sender = TrainerNotificationFlow.resolveSender(groupIdentifier: group, root: root)
        print(String(decoding: try JSONEncoder().encode(sender), as: UTF8.self))
    case "bench-point":
        // bench-point ROOT GROUP N: point put and get cost, one transaction per operation, at each
        // durability mode. Prints one line per measurement.
        let n = Int(rest[0])!
        for durability in Durability.allCases {
            var options = SharedContainer.Options()
            options.durability = durability
            options.mapSize = 256 << 20
            let container = try SharedContainer(groupIdentifier: group + "." + durability.rawValue, root: root, options: options)
            let c = try container.store.collection("bench", key: Int.self, value: String.self)
            let value = String(repeating: "x", count: 100)
            let puts = durability == .durable ? min(n, 2000) : n
            var start = DispatchTime.now().uptimeNanoseconds
            for i in 0..<puts { try c.put(value, forKey: i) }
            let putNs = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(puts)
            start = DispatchTime.now().uptimeNanoseconds
            var found = 0
            for i in 0..<n where try c.get(i % puts) != nil { found += 1 }
            let getNs = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(n)
            start = DispatchTime.now().uptimeNanoseconds
            try container.store.read { tx in for i in 0..<n where try c.get(i % puts, in: tx) != nil { found += 1 } }
            let getInTxNs = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(n)
            guard found == 2 * n else { fail("bench-point: \(found) of \(2 * n) gets found their key") }
            print("\(durability.rawValue): put (own txn) \(Int(putNs)) ns, get (own txn) \(Int(getNs)) ns, get (shared txn) \(Int(getInTxNs)) ns")
        }
    default:
        fail("unknown command \(command)")
    }
} catch {
    fail("\(command): \(error)")
}
