import ArgumentParser
import Foundation
import KVStore

/// `kvtool readers [--check]`: LMDB's reader table.
struct Readers: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "readers",
        abstract: "List the reader slots of the store's lock file; --check clears those of dead processes.",
        discussion: """
            Every process reading the store holds a slot while its read transaction is open (TXN is \
            the transaction it sees; - means an idle slot kept for reuse). A process that died while \
            reading leaves a stale slot, which keeps old pages from being reused, so the file grows. \
            Opening a store from the library clears stale slots; this command opens it without doing \
            so, to show them. --check clears them (mdb_reader_check) and says how many.
            """)

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Clear the slots of processes that no longer exist, and say how many.") var check = false

    func run() throws {
        let container = try global.openContainer(readOnly: true, clearStaleReaders: false)
        if check {
            let cleared = try container.store.clearStaleReaders()
            if global.json {
                try Output.json(["cleared": .integer(cleared)])
            } else {
                print("cleared \(cleared) stale reader slot\(cleared == 1 ? "" : "s")")
            }
            return
        }
        let slots = try container.store.readerSlots()
        let me = getpid()
        if global.json {
            try Output.json(.array(slots.map { slot in
                ["pid": .integer(slot.pid), "thread": .string(String(slot.thread, radix: 16)),
                 "alive": .bool(slot.processAlive), "self": .bool(slot.pid == me),
                 "process": .string(orNull: Self.processName(slot.pid)),
                 "transactionID": slot.transactionID.map { .integer($0) } ?? .null]
            }))
            return
        }
        guard !slots.isEmpty else {
            print("no reader slots in use")
            return
        }
        Output.table(["PID", "THREAD", "TXN", "STATUS", "PROCESS"], slots.map { slot in
            [String(slot.pid), String(slot.thread, radix: 16), slot.transactionID.map(String.init) ?? "-",
             slot.pid == me ? "this kvtool" : slot.processAlive ? "alive" : "stale (process gone)",
             Self.processName(slot.pid) ?? ""]
        })
    }

    /// The process's command name from `/proc/<pid>/comm`, if it still exists.
    static func processName(_ pid: Int32) -> String? {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/comm") else { return nil }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
