// kvtest-helper commands for the observation and async-access tests.
import Foundation
import KVStore
import SyncKit

/// Runs the observation commands; returns `false` for a command it does not know.
func observationCommand(_ command: String, root: String, group: String, rest: [String]) throws -> Bool {
    switch command {
    case "hold-write":
        // hold-write ROOT GROUP RELEASE_PATH: begins a write transaction (putting 1 at "held" in the
        // collection "held"), prints "writing", and commits once RELEASE_PATH exists (at most 120 s).
        let container = try SharedContainer(groupIdentifier: group, root: root)
        let held = try container.store.collection("held", key: String.self, value: Int.self)
        let deadline = Date().addingTimeInterval(120)
        try container.store.write { tx in
            try held.put(1, forKey: "held", in: tx)
            say("writing")
            while !FileManager.default.fileExists(atPath: rest[0]), Date() < deadline { usleep(2_000) }
        }
        say("committed")
    default:
        return false
    }
    return true
}
