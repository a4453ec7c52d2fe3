#if PostgreSQL
import ArgumentParser
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import PostgresTesting
import Workloads
#if canImport(Glibc)
import Glibc
#endif

extension GatewayReadyLine: ReadyLine {}

extension Demo {
    /// A second machine: its own root and processes, converging with this one through a throwaway
    /// PostgreSQL cluster that is stopped (and its directory removed) at the end; this machine syncs
    /// with the database directly, the second through a sync gateway with a token it was issued.
    func secondMachine(group: String) throws {
        print("12. a second machine, through a sync gateway in front of PostgreSQL")
        let cluster: LocalPostgresCluster
        do {
            cluster = try LocalPostgresCluster()
        } catch {
            print("   skipped: \(error) (make demo installs it: scripts/install-deps.sh)")
            print("")
            return
        }
        // A step that fails leaves no child running (a live replicator or a gateway would hold this
        // process's output open) and no cluster.
        var finished = false
        defer {
            if !finished {
                ChildProcess.killRunning()
                try? cluster.stop(immediate: true)
            }
        }
        let machineB = try Self.temporaryDirectory("kvstore-demo-machine-b-")
        defer { try? FileManager.default.removeItem(atPath: machineB) }
        let server = "postgres://\(cluster.user)@127.0.0.1:\(cluster.port)/\(cluster.database)"
        print("   a throwaway cluster: \(server) (data in \(cluster.directory)); machine B's root: \(machineB)")
        let a = rootArguments, b = ["--root", machineB]
        let suite = group   // the container's own defaults suite: the trainers and the one selected
        func on(_ root: [String], _ arguments: [String]) throws {
            try ChildProcess(arguments: arguments + ["--group", group] + root).finish()
        }

        print("   machine A's app declares its trainers' images replicated, fetched eagerly (Replication.files(prefix: \"TrainerImages/\", fetch: .eager)),")
        print("   and writes the trainers with the selected one's image in one transaction (SharedFiles.write(_:to:in:)):")
        try on(a, ["demo", "machine", "--label", "A", "--replicate-images", "--publish-trainers"])
        print("   machine A declares what replicates and pushes it (kvtool sync enable, kvtool sync run --once):")
        try on(a, ["sync", "enable", ChecklistStore.recordsName])
        try on(a, ["sync", "enable", "--suite", suite])
        try on(a, ["sync", "run", "--once", "--server", server])

        // Machine A is trusted with the database; machine B is a device: it gets a credential of this
        // group only, and syncs through a gateway (kvtool sync gateway) that PostgreSQL's row-level
        // security keeps to that group.
        print("   the owner prepares the database for gateways: a login that is only a member of kvsync_gateway (kvtool sync setup --gateway-login \(LocalPostgresCluster.gatewayLogin)):")
        try ChildProcess(arguments: ["sync", "setup", "--database", server, "--gateway-login", LocalPostgresCluster.gatewayLogin]).finish()
        let gatewayLogin = "postgres://\(LocalPostgresCluster.gatewayLogin)@127.0.0.1:\(cluster.port)/\(cluster.database)"
        print("   a sync gateway logged in as it, and a credential for machine B (kvtool sync token issue --group \(group) --device machine-b):")
        let gateway = try ChildProcess(arguments: ["sync", "gateway", "--database", gatewayLogin, "--listen", "127.0.0.1:0",
                                                                "--metrics-listen", "off"])
        let gatewayURL = try gateway.ready(GatewayReadyLine.self, what: "the gateway").url
        let serverURL = try ServerURL(server)
        let token = try blocking { try await SyncTokens.issue(on: serverURL, group: group, device: "machine-b").token }
        // The token goes in a file only machine B's user reads: on the command line, `ps` would show it.
        let tokenFile = machineB + "/sync-token"
        guard FileManager.default.createFile(atPath: tokenFile, contents: Data((token + "\n").utf8), attributes: [.posixPermissions: 0o600]) else {
            throw CLIError(.failure, "cannot write \(tokenFile)")
        }
        print("   issued \(token.prefix(9))… (\(token.count) characters, shown once; the database keeps its SHA-256), kept in \(tokenFile) (0600)")
        let viaGateway = ["--server", gatewayURL, "--token-file", tokenFile]

        print("   machine B: its app starts empty, declares the same, and its widget waits; B's first sync wakes it, and brings the trainer with its image:")
        try on(b, ["demo", "machine", "--label", "B", "--replicate-images"])
        try on(b, ["sync", "enable", ChecklistStore.recordsName])
        try on(b, ["sync", "enable", "--suite", suite])
        let widget = try ChildProcess(program: "checklist-widget", arguments: ["--group", group, "--wait-for-next"] + b)
        widget.relay(untilLineContaining: "waiting")
        try on(b, ["sync", "run", "--once"] + viaGateway)
        try widget.finish()
        try ChildProcess(program: "trainer-extension", arguments: ["--group", group] + b).finish()

        print("   both machines answer the unanswered item think.6 of today's record, each writes a memo, and each selects a trainer, while offline; A syncs first, then B:")
        try on(a, ["demo", "machine", "--label", "A", "--score", "think.6=3", "--memo", "perceive=A: slept well", "--trainer", "1"])
        try on(b, ["demo", "machine", "--label", "B", "--score", "think.6=4", "--memo", "sustain=B: long walk", "--trainer", "0"])
        try on(a, ["sync", "run", "--once", "--server", server])
        try on(b, ["sync", "run", "--once"] + viaGateway)
        try on(a, ["sync", "run", "--once", "--server", server])
        print("   the record merged (the union of the items and memos, the higher score), the trainer by last writer (B, later):")
        try on(a, ["demo", "machine", "--label", "A"])
        try on(b, ["demo", "machine", "--label", "B"])

        print("   the push SDK's notification records replicate too (kvtool sync enable \(PushSDKStore.collectionName) on A; B, which has never opened it, joins it through the gateway):")
        try on(a, ["sync", "enable", PushSDKStore.collectionName])
        try on(a, ["sync", "run", "--once", "--server", server])
        try on(b, ["sync", "enable", PushSDKStore.collectionName] + viaGateway)
        try on(b, ["sync", "run", "--once"] + viaGateway)

        print("   live: B's replicator follows the gateway's stream (one LISTEN in the gateway) and B's widget waits; A's app raises perceive.4 and pushes:")
        let live = try ChildProcess(arguments: ["sync", "run"] + viaGateway + ["--seconds", "900", "--group", group] + b, timeout: 1000)
        live.relay(untilLineContaining: "syncing")
        let liveWidget = try ChildProcess(program: "checklist-widget", arguments: ["--group", group, "--wait-for-next"] + b)
        liveWidget.relay(untilLineContaining: "waiting")
        try on(a, ["demo", "machine", "--label", "A", "--score", "perceive.4=5"])
        let clock = ContinuousClock()
        let pushed = clock.now
        try on(a, ["sync", "run", "--once", "--server", server])
        liveWidget.relay(untilLineContaining: "woken")
        let elapsed = clock.now - pushed
        try liveWidget.finish()
        print("   from the start of A's push process to B's widget showing the record: \(elapsed.formatted(.units(allowed: [.milliseconds], fractionalPart: .hide)))")

        try imageToALiveMachine(group: group, a: a, b: b, machineB: machineB, server: server)

        try pushFromAnExtension(group: group, a: a, b: b, server: server)

        live.process.interrupt()
        try live.finish(acceptingSignal: SIGINT)

        try backend(group: group, a: a, b: b, viaGateway: viaGateway, server: server, cluster: cluster)

        gateway.process.interrupt()
        try gateway.finish()
        try cluster.stop()
        finished = true
        print("   the gateway drained (SIGINT) and the cluster is stopped; machine B's root is removed")
        print("")
    }

    /// Issue 49's demo: A's app writes a new image of the selected trainer with the trainers, in one
    /// transaction, and pushes; B's live replicator pulls the manifest row and fetches the bytes (the
    /// prefix is eager) before it posts its status. Prints the time from the start of A's write process
    /// to B having the bytes (this process reads B's container until they are there), then B's extension.
    private func imageToALiveMachine(group: String, a: [String], b: [String], machineB: String, server: String) throws {
        let size = 200 << 10
        print("   live: A's app writes a new \(size >> 10) KiB image of the selected trainer with the trainers (one transaction) and pushes; B's live replicator pulls the row and fetches the bytes:")
        var options = SharedContainer.Options()
        options.readOnly = true
        let containerB = try SharedContainer(groupIdentifier: group, root: machineB, options: options)
        let selected = try containerB.defaults().string(forKey: TrainerDefaultsKey.selectedTrainerId)
        guard let trainer = TrainerNotificationFlow.sampleTrainers.first(where: { $0.id.uuidString == selected }),
              let path = trainer.imagePath else { throw CLIError(.failure, "machine B has no sample trainer selected") }
        let clock = ContinuousClock()
        let written = clock.now
        try ChildProcess(arguments: ["demo", "machine", "--label", "A", "--publish-trainers", "--image-bytes", "\(size)", "--group", group] + a).finish()
        try ChildProcess(arguments: ["sync", "run", "--once", "--server", server, "--group", group] + a).finish()
        let deadline = clock.now + .seconds(60)
        while (try? containerB.files.readVerified(path))?.count != size {
            guard clock.now < deadline else { throw CLIError(.failure, "machine B did not have the image within 60 s") }
            usleep(2_000)
        }
        let elapsed = clock.now - written
        containerB.close()
        print("   from the start of A's write process to B having the image's \(size) bytes (hash checked, renamed into place): \(elapsed.formatted(.units(allowed: [.milliseconds], fractionalPart: .hide)))")
        try ChildProcess(program: "trainer-extension", arguments: ["--group", group] + b).finish()
    }

    /// Issue 38's demo: A's push extension receives a notification, writes it, asks for it to reach the
    /// server within 2 s, and exits; B's live replicator pulls it and B's push widget shows it. First
    /// with no process of A syncing (the request starts A's registered agent), then with A's app
    /// syncing live (the request wakes it).
    private func pushFromAnExtension(group: String, a: [String], b: [String], server: String) throws {
        let service = try SyncService(container: try SharedContainer(groupIdentifier: group, root: global.root))
        /// Waits until no process of A owns sync (an agent goes on while requests come, then exits).
        func untilNoOwner() throws {
            let deadline = ContinuousClock.now + .seconds(60)
            while try service.status().owner != nil {
                guard ContinuousClock.now < deadline else { throw CLIError(.failure, "A's sync agent did not exit within 60 s") }
                usleep(20_000)
            }
        }
        /// The extension on A and the widget on B: returns the time from the extension's write to
        /// B's widget showing it, and the extension's peak RSS.
        func deliver(title: String, body: String) throws -> (milliseconds: String, rss: String) {
            let widget = try ChildProcess(arguments: ["demo", "push-widget", "--timeout", "120", "--group", group] + b, timeout: 180)
            widget.relay(untilLineContaining: "waiting")
            let payload = #"{"aps":{"alert":{"title":"\#(title)","body":"\#(body)"},"sound":"default"}}"#
            let pushExtension = try ChildProcess(program: "push-extension",
                                                 arguments: ["--group", group, "--payload", payload, "--sync-wait", "2"] + a, timeout: 120)
            let handled = pushExtension.relay(untilLineContaining: "push extension (pid") ?? ""
            try pushExtension.finish()
            let shown = widget.relay(untilLineContaining: "shows") ?? ""
            try widget.finish()
            let milliseconds = shown.components(separatedBy: " ms after").first?.split(separator: " ").last.map(String.init) ?? "?"
            let rss = handled.components(separatedBy: "max RSS ").dropFirst().first?.split(separator: " ").first.map(String.init) ?? "?"
            return (milliseconds, rss)
        }

        try untilNoOwner()
        print("   a. A's app is not running, and no process of A syncs. A registers its sync agent once (kvtool sync agent set --server …);")
        print("      B's push widget waits; A's push extension receives a notification, writes it, requests sync within 2 s, and exits:")
        try ChildProcess(arguments: ["sync", "agent", "set", "--server", server, "--group", group] + a).finish()
        let agentRun = try deliver(title: "Mission 2 unlocked", body: "while A's app is closed")
        print("   from the extension's write on A (A's agent syncing) to B's widget showing it: \(agentRun.milliseconds) ms; the extension's peak RSS \(agentRun.rss) MiB")

        try untilNoOwner()
        print("   b. the same with A's app running (kvtool sync run, live, owns A's sync): the request wakes it:")
        let appLive = try ChildProcess(arguments: ["sync", "run", "--server", server, "--seconds", "600", "--group", group] + a, timeout: 700)
        appLive.relay(untilLineContaining: "syncing")
        let liveRun = try deliver(title: "Mission 3 unlocked", body: "while A's app syncs live")
        appLive.process.interrupt()
        try appLive.finish(acceptingSignal: SIGINT)
        print("   from the extension's write on A (A's live app syncing) to B's widget showing it: \(liveRun.milliseconds) ms; the extension's peak RSS \(liveRun.rss) MiB")
        // The cluster is stopped below: a later request on A must not start an agent for it.
        try ChildProcess(arguments: ["sync", "agent", "clear", "--group", group] + a).finish()
    }

    static func temporaryDirectory(_ prefix: String) throws -> String {
        var template = Array((NSTemporaryDirectory() + prefix + "XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else {
            throw CLIError(.failure, "cannot make a temporary directory: \(String(cString: strerror(errno)))")
        }
        return String(cString: made)
    }

    /// The app of one machine in the demo's second part: opens the checklist (its collections and
    /// feed), applies the edits it is given to today's record, and prints that record and the
    /// selected trainer.
    struct Machine: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "machine",
            abstract: "The demo's app on one machine (started by kvtool demo).",
            shouldDisplay: false)

        @OptionGroup var global: GlobalOptions
        @Option(help: "The machine's name in what it prints.") var label = "A"
        @Option(help: "ITEM=SCORE to answer on today's record.") var score: [String] = []
        @Option(help: "CATEGORY=TEXT to write on today's record.") var memo: [String] = []
        @Option(help: "Select this sample trainer (0 or 1).") var trainer: Int?
        @Flag(help: "Declare Files/TrainerImages/ replicated, fetched eagerly.") var replicateImages = false
        @Flag(help: "Write the sample trainers and the selected one's image in one transaction.") var publishTrainers = false
        @Option(help: "With --publish-trainers: the image's size (the sample PNG, padded).") var imageBytes: Int?
        @Option(help: "NAME=AMOUNT: save the named sample subscription with this amount, unchecked (as an older release of the app that did not check amounts).")
        var subscriptionAmount: String?
        @Option(help: "Print the amount of the named sample subscription.") var showSubscription: String?

        func validate() throws {
            for pair in score + memo where !pair.contains("=") { throw ValidationError("'\(pair)' is not NAME=VALUE") }
            for pair in score {
                guard let value = Int(pair.split(separator: "=", maxSplits: 1)[1]), (1...5).contains(value) else {
                    throw ValidationError("'\(pair)': a score is 1 to 5")
                }
            }
            if let imageBytes, !(TrainerNotificationFlow.samplePNG.count...(8 << 20)).contains(imageBytes) {
                throw ValidationError("--image-bytes must be from \(TrainerNotificationFlow.samplePNG.count) to \(8 << 20)")
            }
            if let subscriptionAmount {
                let parts = subscriptionAmount.split(separator: "=", maxSplits: 1).map(String.init)
                guard parts.count == 2, Decimal(string: parts[1]) != nil else { throw ValidationError("'\(subscriptionAmount)' is not NAME=AMOUNT") }
                guard Self.sampleSubscription(parts[0]) != nil else { throw ValidationError("'\(parts[0])' is not a sample subscription") }
            }
            if let showSubscription, Self.sampleSubscription(showSubscription) == nil {
                throw ValidationError("'\(showSubscription)' is not a sample subscription")
            }
            if let trainer, !TrainerNotificationFlow.sampleTrainers.indices.contains(trainer) {
                throw ValidationError("--trainer must be 0 to \(TrainerNotificationFlow.sampleTrainers.count - 1)")
            }
        }

        func run() throws {
            let group = (try? global.groupIdentifier()) ?? Demo.defaultGroup
            let container = try SharedContainer(groupIdentifier: group, root: global.root)
            let app = try ChecklistWidgetFlow.App(container: container)
            let today = ChecklistDataset.today
            let defaults = try container.defaults()
            if replicateImages { try Replication.files(prefix: "TrainerImages/", fetch: .eager, in: container) }
            if publishTrainers {
                // A replicated file's manifest entry is a change history records: attached before the write.
                _ = try History.attach(to: container)
                // The trainer selected here (the first when none is), with its image, in one transaction.
                let trainers = TrainerNotificationFlow.sampleTrainers
                let current = try defaults.string(forKey: TrainerDefaultsKey.selectedTrainerId)
                let selected = trainers.first { $0.id.uuidString == current } ?? trainers[0]
                try TrainerNotificationFlow.publish(trainers: trainers, selected: selected.id,
                                                    images: [selected.id: Self.image(bytes: imageBytes)], in: container)
            }
            if !score.isEmpty || !memo.isEmpty {
                let old = try app.checklist.records.get(today)
                var scores = old?.scores ?? [:], memos = old?.memos ?? [:]
                for pair in score {
                    let parts = pair.split(separator: "=", maxSplits: 1)
                    scores[String(parts[0])] = Int(parts[1])
                }
                for pair in memo {
                    let parts = pair.split(separator: "=", maxSplits: 1)
                    memos[String(parts[0])] = String(parts[1])
                }
                try app.save([DailyRecord(day: today, scores: scores, memos: memos)])
            }
            if let trainer {
                try defaults.set(TrainerNotificationFlow.sampleTrainers[trainer].id.uuidString, forKey: TrainerDefaultsKey.selectedTrainerId)
            }
            let pid = ProcessInfo.processInfo.processIdentifier
            if subscriptionAmount != nil || showSubscription != nil {
                try subscriptions(in: container, pid: pid)
                return
            }
            guard let record = try app.checklist.records.get(today) else {
                print("machine \(label) app (pid \(pid)): no record for \(today) (\(try app.checklist.records.count()) days stored)")
                return
            }
            let selected = try defaults.string(forKey: TrainerDefaultsKey.selectedTrainerId)
            let name = TrainerNotificationFlow.sampleTrainers.first { $0.id.uuidString == selected }?.displayName ?? "none"
            let memos = record.memos.sorted { $0.key < $1.key }
                .map { "\($0.key) \"\($0.value.count > 14 ? $0.value.prefix(12) + "…" : $0.value)\"" }.joined(separator: ", ")
            let items = ["think.6", "perceive.4"].map { "\($0) = \(record.scores[$0].map(String.init) ?? "-")" }.joined(separator: ", ")
            print("machine \(label) app (pid \(pid)): \(today): \(record.scores.count) items, \(items), average \(String(format: "%.2f", record.cachedTotalAverage)); memos \(memos.isEmpty ? "none" : memos); trainer \(name)")
        }

        /// Seed 002's subscriptions on this machine: one saved with an amount the app does not check
        /// (`--subscription-amount`), or one's amount printed (`--show-subscription`).
        private func subscriptions(in container: SharedContainer, pid: Int32) throws {
            let tracker = try SubscriptionStore(store: container.store)
            if let subscriptionAmount {
                let parts = subscriptionAmount.split(separator: "=", maxSplits: 1).map(String.init)
                guard let sample = Self.sampleSubscription(parts[0]), let amount = Decimal(string: parts[1]) else { return }
                var subscription = try tracker.subscriptions.get(sample.id) ?? sample
                subscription.amount = amount
                subscription.updatedAt = Date()
                // What an older release did: no validate() before the write.
                try tracker.subscriptions.put(subscription, forKey: subscription.id, author: "app")
                print("machine \(label) app (pid \(pid)): saved \(subscription.name) at \(amount) \(subscription.currency), unchecked")
            }
            if let showSubscription, let sample = Self.sampleSubscription(showSubscription) {
                let amount = try tracker.subscriptions.get(sample.id).map { "\($0.amount) \($0.currency)" } ?? "not stored"
                print("machine \(label) app (pid \(pid)): \(sample.name) is \(amount)")
            }
        }

        static func sampleSubscription(_ name: String) -> Subscription? {
            SubscriptionSampleData.subscriptions.first { $0.name == name }
        }

        /// The sample PNG followed by `bytes` - its size of filler after its end chunk (a reader stops at
        /// the end chunk), each size its own bytes: a new image that still loads.
        static func image(bytes: Int?) -> Data {
            var image = TrainerNotificationFlow.samplePNG
            var state = UInt64(bytes ?? 0)
            while image.count < (bytes ?? 0) {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                image.append(UInt8(truncatingIfNeeded: state >> 33))
            }
            return image
        }
    }
}
#endif
