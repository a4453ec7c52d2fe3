// The checklist app's widget (seed 004), as its own lean process: it opens the App Group container
// read-only, reads the widget feed the app publishes, and computes the year dashboard from the store's
// month aggregates. It links KVStore, SyncKit and the workload model only (no swift-argument-parser, no
// Foundation). With `--after GENERATION` (or `--wait-for-next`: after the one published now) it first
// waits, woken by the app's change notifications, until a newer feed is published, as the demo's
// widget does.
//
//     checklist-widget [--group GROUP] [--root DIR] [--after GENERATION | --wait-for-next] [--timeout SECONDS]
import KVStore
import LeanProcess
import SyncKit
import Workloads

/// The store, kept open until the process exits rather than closed just before: a store's environment
/// ends its pooled read transactions at exit anyway, and closing it first cost 0.17M instructions
/// (issue 39). Set once, on the main thread.
nonisolated(unsafe) var store: SharedContainer?

LeanProcess.main("checklist-widget") {
    let arguments = try LaunchArguments(CommandLine.arguments.dropFirst(), options: ["--group", "--root", "--after", "--timeout"], flags: ["--wait-for-next"])
    let group = try GroupIdentifier(arguments["--group"] ?? ChecklistWidgetFlow.defaultGroup)
    let root = arguments["--root"]
    let widget = try ChecklistWidgetFlow.Widget(groupIdentifier: group, root: root)
    let published: PublishedFeed<ChecklistWidgetFeed>
    let waitForNext = arguments.has("--wait-for-next") ? try widget.feed.readIfPublished()?.generation ?? 0 : nil
    if let after = try arguments.number("--after", as: UInt64.self) ?? waitForNext {
        let timeout = try arguments.number("--timeout", as: Double.self) ?? 20
        guard timeout > 0, timeout <= 3600 else { throw LaunchError("--timeout must be in (0, 3600] seconds") }
        let (feed, wakes) = try widget.waitForFeed(after: after, timeout: .seconds(timeout)) {
            print("widget (pid \(LeanProcess.pid)): showing feed generation \(after); waiting for a change")
            LeanProcess.flushOutput()
        }
        published = feed
        print("widget (pid \(LeanProcess.pid), max RSS \(LeanProcess.peakResidentMiB()) MiB): woken \(wakes == 1 ? "once" : "\(wakes) times"); \(ChecklistWidgetFlow.summary(published))")
    } else {
        guard let feed = try widget.feed.readIfPublished() else {
            throw LaunchError("no checklist feed is published in \(group.rawValue) yet")
        }
        published = feed
        print("widget (pid \(LeanProcess.pid), max RSS \(LeanProcess.peakResidentMiB()) MiB): \(ChecklistWidgetFlow.summary(published))")
    }
    let opened = try widget.openStore()
    store = opened
    print("  \(ChecklistWidgetFlow.yearLine(try widget.yearDashboard(today: published.payload.day, in: opened)))")
}
