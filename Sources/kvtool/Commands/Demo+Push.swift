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
}
