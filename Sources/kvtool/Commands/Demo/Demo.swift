import ArgumentParser
import Foundation
import KVStore
import SyncKit
import Workloads

/// `kvtool demo`: the seed apps sharing one container across processes.
struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the demo: an app, a widget and a notification extension sharing one container.",
        discussion: """
            This process plays the main app. It saves a year of checklist records with history, publishes \
            the widget feed and starts a widget process, which the next save wakes; it stores trainers in \
            the shared defaults and an image in Files/TrainerImages/ and, for each scenario, starts a \
            notification-extension process that prints the sender it would show (falling back to the \
            default trainer when data is missing); it exports the subscription tracker's data as JSON and \
            CSV; and it publishes a snapshot of the whole store. Then a second machine (another root, its own \
            processes) converges with this one through a throwaway PostgreSQL cluster, this machine directly and \
            the other through a sync gateway with a credential it was issued: a first sync wakes its widget, \
            concurrent edits are merged or settled by last writer, and a live replicator following the \
            gateway's stream wakes its widget within milliseconds of this machine's push. Then this machine's \
            push extension (its own lean process) records a notification, requests sync within 2 s and exits: \
            this machine's registered sync agent, then its app syncing live, pushes it, and the other machine's \
            widget shows it (both times are printed, with the extension's peak RSS); the gateway drains and the \
            cluster is stopped at the end.
            """,
        subcommands: [PushExtension.self, PushWidget.self] + machineSubcommands)

    #if PostgreSQL
    static let machineSubcommands: [any ParsableCommand.Type] = [Machine.self]
    #else
    static let machineSubcommands: [any ParsableCommand.Type] = []
    #endif

    static let defaultGroup = TrainerNotificationFlow.defaultGroup

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let group = (try? global.groupIdentifier()) ?? Self.defaultGroup
        let container = try SharedContainer(groupIdentifier: group, root: global.root)
        let pid = ProcessInfo.processInfo.processIdentifier
        print("container: \(container.path)")
        print("")
        try checklist(container, group: group, pid: pid)
        try trainer(container, group: group, pid: pid)
        try subscriptions(container)
        try snapshot(container)
        try push(container, group: group, pid: pid)
        print("11. kvtool check, in its own process, walks the whole container: every key and value, the index, the derived summaries, history and the snapshot")
        try ChildProcess(arguments: ["check", "--group", group] + rootArguments).finish()
        print("")
        #if PostgreSQL
        try secondMachine(group: group)
        #endif

        let tool = (try? Self.executablePath()) ?? "kvtool"
        let options = " --group \(group)" + (global.root.map { " --root \($0)" } ?? "")
        print("Inspect it: \(tool) info\(options)")
        let token = try History.attach(to: container).currentToken()
        print("            \(tool) history --since \(token.advanced(by: -1))\(options)")
        print("            \(tool) snapshot list\(options)")
        print("            \(tool) defaults read\(options)")
        print("            \(tool) scan \(PushSDKStore.collectionName) --json\(options)")
        if let widget = try? Self.programPath("checklist-widget"), let trainer = try? Self.programPath("trainer-extension") {
            print("The widget and the extension again, as their own processes:")
            print("            \(widget)\(options)")
            print("            \(trainer)\(options)")
        }
        #if Serve
        print("Explore what it just did in a browser (catalog, collections, Files/, the live timeline of every")
        print("process's commits, consumers, snapshots, reader slots, the dashboard chart); it prints the URL:")
        print("            \(tool) serve\(options)")
        #endif
    }

    // MARK: - The checklist app and its widget

    private func checklist(_ container: SharedContainer, group: String, pid: Int32) throws {
        let app = try ChecklistWidgetFlow.App(container: container)
        let year = ChecklistDataset.records()
        let generation = try app.save(Array(year.dropLast()))
        print("1. main app (pid \(pid)) saves \(year.count - 1) daily records with history, publishes the widget feed (generation \(generation))")
        let (months, fromMonths, dayByDay) = try container.store.read { tx in
            (try app.checklist.months.count(in: tx),
             try app.checklist.dashboard([.year], today: ChecklistDataset.today, in: tx),
             try app.checklist.dashboardDayByDay([.year], today: ChecklistDataset.today, in: tx))
        }
        if let yearResult = fromMonths[.year] {
            print("   \(ChecklistWidgetFlow.yearLine(yearResult)), from \(months) month aggregates (checklistMonths, kept in each write)")
            print("   \(fromMonths == dayByDay ? "the same, to the bit, as" : "DIFFERENT from") the day-by-day scan of \(yearResult.records) summaries")
        }
        let widget = try ChildProcess(program: "checklist-widget", arguments: ["--group", group, "--after", String(generation)] + rootArguments)
        widget.relay(untilLineContaining: "waiting")
        print("")

        print("2. main app saves today's record; the commit wakes the widget (its own lean executable), which reads the feed and "
              + "the year dashboard from the month aggregates, opening the store read-only")
        try app.save([year[year.count - 1]])
        try widget.finish()
        if case .changes(let transactions, _) = try app.history.changes(since: try app.history.currentToken().advanced(by: -1)),
           let entry = transactions.last?.entries.last {
            print("   history: token \(entry.token), \(entry.operation.rawValue) \(entry.name) \(try entry.decodeKey(as: LogicalDay.self)) by \(entry.author ?? "-")")
        }
        print("")
    }

    // MARK: - The trainer notification extension

    private func trainer(_ container: SharedContainer, group: String, pid: Int32) throws {
        let trainers = TrainerNotificationFlow.sampleTrainers
        let selected = trainers[0]
        print("3. main app stores \(trainers.count) trainers, selects \(selected.displayName), writes its image")
        try TrainerNotificationFlow.publish(
            trainers: trainers, selected: selected.id,
            images: [selected.id: TrainerNotificationFlow.samplePNG], in: container, author: "app")
        try runExtension(group: group)

        print("4. main app replaces the image with bytes that are not a PNG")
        try container.files.write(Data("not a png".utf8), to: OshiTrainerTemplate.imagePath(for: selected.id))
        try runExtension(group: group)

        print("5. main app selects a trainer that is not stored")
        try container.defaults().set(UUID().uuidString, forKey: TrainerDefaultsKey.selectedTrainerId)
        try runExtension(group: group)

        print("6. the extension is configured with an App Group that does not exist")
        try runExtension(group: "group.com.yourcompany.Misconfigured")

        print("7. main app restores the trainer and its image")
        try TrainerNotificationFlow.publish(
            trainers: trainers, selected: selected.id,
            images: [selected.id: TrainerNotificationFlow.samplePNG], in: container, author: "app")
        try runExtension(group: group)

        // A getter without a transaction answers from memory while nothing commits.
        let defaults = try container.defaults()
        let first = try defaults.string(forKey: TrainerDefaultsKey.selectedTrainerId)
        let clock = ContinuousClock()
        let start = clock.now
        var same = 0
        for _ in 0 ..< 10_000 where try defaults.string(forKey: TrainerDefaultsKey.selectedTrainerId) == first { same += 1 }
        let elapsed = (clock.now - start).components
        let nanoseconds = elapsed.seconds * 1_000_000_000 + elapsed.attoseconds / 1_000_000_000
        print("   the app reads the selected trainer 10,000 times more: \(same) the same, \(nanoseconds / 10_000) ns a read, "
              + "from memory while no process commits (the next read after a commit goes to the store)")
    }

    // MARK: - Exports and snapshots

    private func subscriptions(_ container: SharedContainer) throws {
        let tracker = try SubscriptionStore(store: container.store)
        try SubscriptionSampleData.populate(tracker, author: "app")
        let export = SubscriptionExport(tracker: tracker, timeZone: SubscriptionSampleData.timeZone,
                                        historyRange: SubscriptionSampleData.historyRange)
        let (json, csv) = try export.files()
        let events = try tracker.billingEvents.count()
        print("8. main app saves \(SubscriptionSampleData.subscriptions.count) subscriptions with \(events) billing events and exports them from one read transaction:")
        for file in [json, csv] {
            try container.files.write(file.contents, to: "Exports/" + file.name)
            print("   Files/Exports/\(file.name) (\(file.contents.count) bytes)")
        }
        for line in csv.text.split(separator: "\r\n", omittingEmptySubsequences: false).prefix(3) { print("   | \(line)") }
        print("")
    }

    private func snapshot(_ container: SharedContainer) throws {
        let clock = ContinuousClock()
        let start = clock.now
        let entry = try Snapshots(container: container).export(from: container.store)
        let elapsed = clock.now - start
        print("9. main app publishes a snapshot: Snapshots/\(entry.file), generation \(entry.generation), \(entry.size) bytes, store txn \(entry.sourceTransactionID), \(elapsed.formatted(.units(allowed: [.milliseconds], fractionalPart: .show(length: 1))))")
        print("")
    }

    // MARK: - Child processes

    var rootArguments: [String] { global.root.map { ["--root", $0] } ?? [] }

    /// Starts the `trainer-extension` executable as a separate process and relays what it prints.
    private func runExtension(group: String) throws {
        let child = try ChildProcess(program: "trainer-extension", arguments: ["--group", group] + rootArguments)
        try child.finish()
        print("")
    }

    static func executablePath() throws -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { throw CLIError(.failure, "cannot find the kvtool executable: \(String(cString: strerror(errno)))") }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `program` built next to this executable (`swift build` puts every product of the package in
    /// one directory), or this executable itself when `program` is `nil`.
    static func programPath(_ program: String?) throws -> String {
        let own = try executablePath()
        guard let program else { return own }
        let path = URL(fileURLWithPath: own).deletingLastPathComponent().appendingPathComponent(program).path
        guard access(path, X_OK) == 0 else {
            throw CLIError(.failure, "the demo needs the \(program) executable next to kvtool (\(path)); build it with: swift build --product \(program)")
        }
        return path
    }
}

extension ChangeToken {
    /// The token `distance` entries away (never below zero).
    func advanced(by distance: Int64) -> ChangeToken {
        ChangeToken(rawValue: UInt64(max(0, Int64(rawValue) + distance)))
    }
}
