// kvtest-helper: a second (third, …) process for the multi-process tests. Each command does one
// thing against a real container and prints a result line; any error exits 1 with a message.
import Foundation
import KVStore
import SyncKit
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
    options.store.mapSize = mapSize
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
    case "checklist-write":
        // checklist-write ROOT GROUP FIRST STEP COUNT SEED: puts COUNT checklist records on the days
        // FIRST, FIRST+STEP, … (day numbers), one transaction each, scores from SEED; the records'
        // summaries and month aggregates follow in each transaction. Prints "ok COUNT".
        let checklist = try ChecklistStore(store: open(mapSize: 64 << 20).store)
        let first = Int(rest[0])!, step = Int(rest[1])!, count = Int(rest[2])!, seed = Int(rest[3])!
        for i in 0..<count {
            let day = LogicalDay(dayNumber: Int32(first + i * step))
            var scores: [String: Int] = [:]
            for (c, category) in ChecklistCategory.allCases.enumerated() where (i + c + seed) % 4 != 0 {
                scores["\(category.rawValue).1"] = 1 + (i * 7 + c * 3 + seed) % 5
                scores["\(category.rawValue).2"] = 1 + (i * 5 + c + seed) % 5
            }
            let record = DailyRecord(day: day, scores: scores, memos: [:])
            try checklist.records.store.write { tx in try checklist.records.put(record, forKey: day, in: tx) }
        }
        print("ok \(count)")
    case "count":
        // count ROOT GROUP COLLECTION
        let container = open(readOnly: true)
        let collection = try container.store.collection(rest[0], key: Int.self, value: [UInt8].self)
        print(try collection.count())
    case "sender":
        // sender ROOT GROUP: the extension side of the trainer flow, as JSON
        let sender = TrainerNotificationFlow.resolveSender(groupIdentifier: group, root: root)
        print(String(decoding: try JSONEncoder().encode(sender), as: UTF8.self))
    case "hold-read":
        // hold-read ROOT GROUP: begins a read transaction, says so, and keeps it open until killed.
        let container = open(readOnly: true)
        try container.store.read { _ in
            FileHandle.standardOutput.write(Data("reading\n".utf8))
            while true { sleep(60) }
        }
    case "stale-readers":
        // stale-readers ROOT GROUP read-write|read-only: opens the store (a read-write open clears
        // stale reader slots, a read-only one leaves them) and prints how many slots the open cleared,
        // then how many stale slots an explicit check finds afterwards.
        let store = open(readOnly: rest.first == "read-only").store
        print(store.staleReadersClearedAtOpen, try store.clearStaleReaders())
    case "cbor-dictionary":
        // cbor-dictionary ROOT GROUP: the CBOR of a fixed 100-entry dictionary, in hex (no container).
        print(try CBOREncoder().encode(sampleDictionary()).map { String(format: "%02x", $0) }.joined())
    case "count-defaults":
        // count-defaults ROOT GROUP KEY N: sets KEY to 1, 2 … N (integers), one commit each
        let defaults = try open().defaults()
        for i in 1...Int(rest[1])! { try defaults.set(i, forKey: rest[0]) }
        print("ok")
    case "write-suite":
        // write-suite ROOT GROUP SUITE KEY VALUE: a string in the defaults suite SUITE
        let container = open()
        try container.defaults(suite: rest[0]).set(rest[2], forKey: rest[1])
        print("ok")
    case "serve-fixture":
        // serve-fixture ROOT GROUP: what the tests of `kvtool serve` browse: the checklist's year (history
        // on, widget feed published), `notes` (String → JSON, history on, empty), `blobs` (a 2 MiB value
        // and a 100 kB string), a defaults suite, a PNG in Files/TrainerImages, the replicated files of
        // Files/Shared (``replicatedFilesFixture(_:)``), and one snapshot.
        let container = open(mapSize: 256 << 20)
        let app = try ChecklistWidgetFlow.App(container: container)
        try app.save(ChecklistDataset.records())
        _ = try container.store.collection("notes", key: String.self, value: [String: String].self)
        try app.history.enable(.collection("notes"))
        let blobs = try container.store.collection("blobs", key: String.self, value: String.self)
        try container.store.write(author: "fixture") { tx in
            try blobs.put(String(repeating: "x", count: 2 << 20), forKey: "huge", in: tx)
            try blobs.put(String(repeating: "long text ", count: 10_000), forKey: "long", in: tx)
            try blobs.put("short", forKey: "short", in: tx)
        }
        let settings = try container.defaults(suite: "settings")
        try settings.set("dark", forKey: "theme")
        try settings.set(3, forKey: "reminderHour")
        try settings.set(true, forKey: "onboarded")
        try container.files.write(TrainerNotificationFlow.samplePNG, to: "TrainerImages/sample.png")
        try container.files.write(Data("plain text\n".utf8), to: "notes.txt")
        try replicatedFilesFixture(container)
        _ = try Snapshots(container: container).export(from: container.store)
        print("ok")
    default:
        if try runSnapshotCommand(command, root: root, group: group, rest) { break }
        if try historyCommand(command, root: root, group: group, rest: rest) { break }
        if try observationCommand(command, root: root, group: group, rest: rest) { break }
        if try threadCountCommand(command, root: root, group: group, rest: rest) { break }
        if try stressCommand(command, root: root, group: group, rest: rest) { break }
        if try containerFileCommand(command, root: root, group: group, rest: rest) { break }
        if try powerCutCommand(command, root: root, group: group, rest: rest) { break }
        if try hostileCommand(command, root: root, group: group, rest: rest) { break }
        if try hugeValueCommand(command, root: root, group: group, rest: rest) { break }
        if try syncCommand(command, root: root, group: group, rest: rest) { break }
        if try fileCommand(command, root: root, group: group, rest: rest) { break }
        fail("unknown command \(command)")
    }
} catch {
    fail("\(command): \(error)")
}

/// A dictionary whose iteration order differs between processes (Swift seeds hashing per process).
func sampleDictionary() -> [String: [Int: String]] {
    Dictionary(uniqueKeysWithValues: (0..<100).map { i in ("key-\(i * 7919 % 1000)", [i: "v\(i)", -i - 1: "w"]) })
}

/// `Files/Shared/`, a lazy prefix of 1 KiB, with a file in each state `kvtool serve` shows: `b-new.txt`
/// present (uploaded), `a-old.txt` missing (evicted for the budget: it was read before `b-new.txt`),
/// `c-waiting.txt` waiting to upload, refused for a file limit.
func replicatedFilesFixture(_ container: SharedContainer) throws {
    try FileManifest.declare(prefix: "Shared/", fetch: .lazy(budget: 1 << 10), in: container.store)
    let files: [(path: String, byte: UInt8, state: LocalFileState.Kind, problem: String?)] = [
        ("Shared/a-old.txt", 0x61, .present, nil), ("Shared/b-new.txt", 0x62, .present, nil),
        ("Shared/c-waiting.txt", 0x63, .waitingToUpload, "too_large: the file has 600 bytes, the server's limit is 512"),
    ]
    for (access, file) in files.enumerated() {
        try container.files.write(Data(repeating: file.byte, count: 600), to: file.path)
        let entry = try container.files.manifestEntry(for: file.path)!
        try container.files.setLocalState(LocalFileState(state: file.state, sha256: Array(entry.sha256), size: entry.size,
                                                         lastAccess: Int64(access + 1), problem: file.problem), for: file.path)
    }
    try container.files.evictLazyFiles()
}
