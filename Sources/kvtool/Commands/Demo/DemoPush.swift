import ArgumentParser
import Foundation
import KVStore
import SyncKit
import Workloads

extension Demo {
    /// The push SDK (seed 003): the app registers its token, the extension (a separate process)
    /// handles two payloads, and the app reads what the extension recorded through history.
    func push(_ container: SharedContainer, group: String, pid: Int32) throws {
        let store = try PushSDKStore(container: container)
        try store.enableHistory()
        try store.saveConfiguration(try PushSampleData.configuration())
        let manager = DeviceTokenManager(store: store, server: PushSampleData.server)
        let response = try blocking { try await manager.registerToken(PushSampleData.deviceToken) }
        print("10. push SDK: the app registers its device token (a local stand-in for POST /api/v1/tokens) and keeps it in the shared defaults:")
        print("   token \(response.token.prefix(8))…, device record \(response.id), registered \(PushJSON.iso8601(response.createdAt))")
        _ = try PushNotificationFlow.newlyReceived(store: store)  // the app is up to date before the pushes
        for payload in [PushSampleData.validPayload, PushSampleData.invalidPayload] {
            try ChildProcess(arguments: ["demo", "push-extension", "--group", group, "--payload", payload] + rootArguments).finish()
        }
        let received = try PushNotificationFlow.newlyReceived(store: store)
        print("   the app (pid \(pid)) reads what the extension recorded, through history: \(received.count) notifications")
        for record in received {
            print("   - \(record.status.rawValue): " + (record.payload.map { "\"\($0.title)\"" } ?? record.error ?? ""))
        }
        print("")
    }

    /// The notification service extension: reads the configuration and token from the App Group,
    /// handles one APNs payload and prints what it would show, or the SDK's error.
    struct PushExtension: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "push-extension",
            abstract: "The demo's notification service extension process (started by kvtool demo).",
            shouldDisplay: false)

        @OptionGroup var global: GlobalOptions
        @Option(help: "The APNs payload, as JSON.") var payload: String

        func run() throws {
            let group = (try? global.groupIdentifier()) ?? Demo.defaultGroup
            let container = try SharedContainer(groupIdentifier: group, root: global.root)
            let store = try PushSDKStore(container: container)
            let handled = try PushNotificationFlow.handle(apnsJSON: Data(payload.utf8), store: store)
            let pid = ProcessInfo.processInfo.processIdentifier
            if global.json {
                print(String(decoding: try PushJSON.encoder().encode(handled.record), as: UTF8.self))
                return
            }
            if let shown = handled.presentation {
                let actions = shown.actions.map { "\($0.title) [\($0.identifier)\($0.options.isEmpty ? "" : ", " + $0.options.names.joined(separator: ", "))]" }
                print("push extension (pid \(pid)): shows \"\(shown.title)\" / \"\(shown.body)\"; actions: \(actions.isEmpty ? "none" : actions.joined(separator: " "))"
                      + "; image \(shown.imageUrl ?? "none"); badge \(shown.badge.map(String.init) ?? "none")")
            } else if let error = handled.error {
                print("push extension (pid \(pid)): rejected: \(error.errorDescription ?? "\(error)")")
            }
        }
    }

    /// The push SDK's widget on the demo's second machine: shows how many notifications the container
    /// holds, then waits, woken by the container's change notifications (a replicator applying
    /// another machine's changes posts them too), until a newer one is stored, and shows it with how
    /// long ago it was received (the demo's machines share one clock).
    struct PushWidget: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "push-widget",
            abstract: "The demo's widget of received notifications, which waits for the next one (started by kvtool demo).",
            shouldDisplay: false)

        @OptionGroup var global: GlobalOptions
        @Option(help: "Give up after this many seconds.") var timeout: Double = 120

        func validate() throws {
            guard timeout > 0 && timeout <= 3600 else { throw ValidationError("--timeout must be in (0, 3600] seconds") }
        }

        func run() throws {
            let group = (try? global.groupIdentifier()) ?? Demo.defaultGroup
            let container = try SharedContainer(groupIdentifier: group, root: global.root)
            let store = try PushSDKStore(container: container)
            let changes = try ChangeNotifier(container: container).subscribe()
            func newest() throws -> ReceivedNotification? {
                try container.store.read { try store.received.cursor(reverse: true, in: $0).next()?.value }
            }
            let shown = try newest()?.id
            let pid = ProcessInfo.processInfo.processIdentifier
            print("push widget (pid \(pid)): \(try store.received.count()) notifications; waiting for the next")
            Output.flush()
            let clock = ContinuousClock()
            let deadline = clock.now + .milliseconds(Int64(timeout * 1000))
            var wakes = 0
            while true {
                if let latest = try newest(), latest.id != shown {
                    let age = Int((Date().timeIntervalSince(latest.receivedAt) * 1000).rounded())
                    let what = latest.payload.map { "\"\($0.title)\"" } ?? "rejected: \(latest.error ?? "")"
                    print("push widget (pid \(pid)): woken \(wakes == 1 ? "once" : "\(wakes) times"); shows \(what), \(age) ms after the extension received it")
                    return
                }
                let left = deadline - clock.now
                guard left > .zero, changes.wait(timeout: left) else {
                    throw CLIError(.failure, "no newer notification within \(timeout) seconds")
                }
                wakes += 1
            }
        }
    }
}
