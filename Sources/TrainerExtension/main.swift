// The notification service extension of seed 000/001 ("推しトレーナー"), as its own lean process: it
// opens the App Group container read-only, reads the selected trainer from the shared defaults and
// its image from Files/, and prints the sender the notification would show. It links KVStore and the
// workload model only (no swift-argument-parser, no Foundation), so that it stays far under the
// seed's 24 MB memory limit. `kvtool demo` starts it for each scenario.
//
//     trainer-extension [--group GROUP] [--root DIR] [--json]
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LeanProcess
import Workloads

LeanProcess.main("trainer-extension") {
    let arguments = try LaunchArguments(CommandLine.arguments.dropFirst(), options: ["--group", "--root"], flags: ["--json"])
    let group = arguments["--group"] ?? TrainerNotificationFlow.defaultGroup
    let sender = TrainerNotificationFlow.resolveSender(groupIdentifier: group, root: arguments["--root"])
    if arguments.has("--json") {
        print(String(decoding: try JSONEncoder().encode(sender), as: UTF8.self))
    } else {
        print("extension (pid \(LeanProcess.pid), max RSS \(LeanProcess.peakResidentMiB()) MiB): \(sender.summary)")
    }
}
