// The push SDK's notification service extension (seed 003), as its own lean process: it opens the App
// Group container, handles one APNs payload with the SDK's flow (the configuration and the device token
// the app stored in the shared defaults; the notification recorded, shown or rejected, in
// `receivedNotifications`), and, with --sync-wait, asks the container's sync service for that record to
// reach the server before it exits: the process that owns sync is woken, or, when none does, the
// registered agent is started. It links KVStore, SyncKit and the workload model only (no
// swift-argument-parser, no Foundation, no networking), to stay small: issue 38 budgets 12 MiB (8.6 - 10.6
// MiB in release under parallel load since issue 46 placed the code it runs together, LeanProcessMemoryTests;
// 10.5 - 12.5 before, 12.9 - 13.9 in the demo's container; LeanProcesses.md says where it goes).
//
//     push-extension [--group GROUP] [--root DIR] --payload JSON [--sync-wait SECONDS] [--json]
//
// It prints one line: what it shows (or why it rejected the payload), then, with --sync-wait, the
// request's outcome and the time from its committed write to the server's acknowledgement; its pid
// and its peak RSS. The outcome never changes the exit status: a notification is shown whether or not
// the server has it yet (the agent goes on after this process exits). When the App Group's store
// cannot be opened (no container, a store that is truncated, not LMDB's or not this user's) or the
// record cannot be written, it says why in one line on standard error, and still shows the
// notification with what its payload carries (nothing is recorded, nothing is synced); it exits 0.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import KVStore
import LeanProcess
import SyncKit
import Workloads

/// What `--json` prints.
struct Report: Encodable {
    var record: ReceivedNotification
    /// Whether the record is in the App Group's store.
    var recorded: Bool
    /// Why it is not, when it is not.
    var notRecorded: String?
    /// `acknowledged`, `refused`, `notWithinDeadline` or `nothingSyncs`; `nil` without --sync-wait.
    var sync: String?
    var syncDetail: String?
    /// From the committed write to the acknowledgement.
    var acknowledgedAfterMilliseconds: Int64?
    var pid: Int32
    var peakResidentKiB: Int?
}

LeanProcess.main("push-extension") {
    let arguments = try LaunchArguments(CommandLine.arguments.dropFirst(), options: ["--group", "--root", "--payload", "--sync-wait"],
                                        flags: ["--json"])
    guard let payload = arguments["--payload"] else { throw LaunchError("--payload JSON is required") }
    let wait = try arguments.number("--sync-wait", as: Double.self)
    if let wait, !(wait >= 0 && wait <= 3600) { throw LaunchError("--sync-wait must be from 0 to 3600 seconds") }
    let group = arguments["--group"] ?? TrainerNotificationFlow.defaultGroup
    // The app makes the container: an extension that finds none does not make an empty one (whose
    // SDK is not configured), it shows the notification from its payload.
    let layout = try ContainerLayout(groupIdentifier: group, root: arguments["--root"])
    var opened: SharedContainer?
    let delivery = PushNotificationFlow.deliver(apnsJSON: Data(payload.utf8)) {
        var found = stat()
        guard stat(layout.storeDataFile, &found) == 0 else {
            let code = errno
            guard code == ENOENT else { throw LaunchError("the store at \(layout.store) cannot be opened: \(String(cString: strerror(code)))") }
            throw LaunchError(stat(layout.path, &found) == 0 ? "the App Group container at \(layout.path) has no store yet"
                                                              : "no App Group container for \(group) at \(layout.path)")
        }
        do {
            let container = try SharedContainer(groupIdentifier: group, root: arguments["--root"])
            opened = container
            return try PushSDKStore(container: container)
        } catch {
            throw LaunchError("the store at \(layout.store) cannot be opened: \(error)")
        }
    }
    let handled = delivery.handled
    if let reason = delivery.notRecorded {
        LeanProcess.note("push-extension: the notification is not recorded, and its payload alone decides what is shown: \(reason)")
    }
    // The record is committed: from here to the server's acknowledgement.
    let clock = ContinuousClock()
    let written = clock.now
    var outcome: SyncRequestOutcome?
    var acknowledgedAfter: Duration?
    if let wait, delivery.notRecorded == nil, let container = opened {
        let answer = try SyncService(container: container).request(within: .milliseconds(Int64(wait * 1000)))
        if case .acknowledged = answer { acknowledgedAfter = clock.now - written }
        outcome = answer
    }
    let pid = LeanProcess.pid
    if arguments.has("--json") {
        let kind: String? = switch outcome {
        case .acknowledged?: "acknowledged"
        case .acknowledgedExceptHeld?: "acknowledgedExceptHeld"
        case .refused?: "refused"
        case .notWithinDeadline?: "notWithinDeadline"
        case .nothingSyncs?: "nothingSyncs"
        case nil: nil
        }
        let report = Report(record: handled.record, recorded: delivery.notRecorded == nil, notRecorded: delivery.notRecorded,
                            sync: kind, syncDetail: outcome?.description,
                            acknowledgedAfterMilliseconds: acknowledgedAfter.map(\.wholeMilliseconds), pid: pid,
                            peakResidentKiB: LeanProcess.peakResidentKiB())
        print(String(decoding: try PushJSON.encoder().encode(report), as: UTF8.self))
        return
    }
    var line = "push extension (pid \(pid), max RSS \(LeanProcess.peakResidentMiB()) MiB): "
    if let shown = handled.presentation {
        line += "shows \"\(shown.title)\""
    } else {
        line += "rejected: \(handled.error?.errorDescription ?? "invalid payload")"
    }
    if delivery.notRecorded != nil { line += "; not recorded (the App Group's store cannot be used)" }
    switch outcome {
    case .acknowledged(let token, _)?:
        line += "; sync: acknowledged through token \(token), \((acknowledgedAfter ?? .zero).wholeMilliseconds) ms after its write"
    case .acknowledgedExceptHeld?:
        line += "; sync: " + (outcome?.description ?? "")
    case .refused(let failure)?:
        line += "; sync: refused (\(failure.reason.rawValue)): \(failure.message)"
    case .notWithinDeadline(let shortfall)?:
        line += "; sync: not within \(wait ?? 0) s: \(shortfall)"
    case .nothingSyncs?:
        line += "; sync: " + (outcome?.description ?? "")
    case nil:
        break
    }
    print(line)
}
