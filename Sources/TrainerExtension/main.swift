// The notification service extension of seed 000/001 ("推しトレーナー"), as its own lean process: it
// opens the App Group container read-only, reads the selected trainer from the shared defaults and
// its image from Files/, and prints the sender the notification would show. It links KVStore and the
// workload model only (no swift-argument-parser, no Foundation), so that it stays far under the
// seed's 24 MB memory limit. `kvtool demo` starts it for each scenario.
//
// An image that replicates (issue 49) and whose bytes are not here yet is asked for from the
// container's sync owner and waited for, up to --image-wait seconds (2 by default; 0 does not ask);
// then the line names notYetDownloaded. Asking links no networking (SyncKit's readFile).
//
//     trainer-extension [--group GROUP] [--root DIR] [--image-wait SECONDS] [--json]
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LeanProcess
import Workloads

LeanProcess.main("trainer-extension") {
    let arguments = try LaunchArguments(CommandLine.arguments.dropFirst(), options: ["--group", "--root", "--image-wait"], flags: ["--json"])
    let group = arguments["--group"] ?? TrainerNotificationFlow.defaultGroup
    var imageWait = TrainerNotificationFlow.defaultImageWait
    if let seconds = try arguments.number("--image-wait", as: Double.self) {
        guard seconds >= 0 && seconds <= 30 else { throw LaunchError("--image-wait must be from 0 to 30 seconds") }
        imageWait = .milliseconds(Int64((seconds * 1000).rounded()))
    }
    let sender = TrainerNotificationFlow.resolveSender(groupIdentifier: group, root: arguments["--root"], imageWait: imageWait)
    if arguments.has("--json") {
        print(String(decoding: try JSONEncoder().encode(sender), as: UTF8.self))
    } else {
        print("extension (pid \(LeanProcess.pid), max RSS \(LeanProcess.peakResidentMiB()) MiB): \(sender.summary)")
    }
}
