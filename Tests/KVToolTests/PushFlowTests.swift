import Foundation
import Testing
import TestSupport
import KVStore
import SyncKit
import Workloads
import Synchronization

/// Seed 003 across real processes: the app (this test) configures the SDK and registers its token;
/// the notification service extension (`kvtool demo push-extension`, a separate process) reads them
/// from the App Group and handles payloads; the app reads what it recorded through history.
@Suite struct PushFlowTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.push"

    func kvtool(_ arguments: [String]) throws -> ProcessResult {
        try run(productsDirectory() + "/kvtool", arguments + ["--root", dir.path, "--group", group])
    }

    func extensionHandles(_ payload: String) throws -> String {
        let r = try kvtool(["demo", "push-extension", "--payload", payload])
        #expect(r.status == 0, "\(r.stderr)")
        return r.stdout.replacingOccurrences(of: #"\(pid \d+\)"#, with: "(pid _)", options: .regularExpression)
    }

    /// The app, configured (and registered): awaited, never waited for on a semaphore, which would
    /// block a thread of the cooperative pool that the registration itself may need (with two cores it
    /// has two; the full suite deadlocked on it once, beside another test blocked in `waitUntilExit`).
    func configuredApp(register: Bool = true) async throws -> PushSDKStore {
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        let store = try PushSDKStore(container: container)
        try store.enableHistory()
        try store.saveConfiguration(try PushSampleData.configuration())
        if register {
            let manager = DeviceTokenManager(store: store, server: PushSampleData.server)
            try await manager.registerToken(PushSampleData.deviceToken)
        }
        return store
    }

    @Test(.blockingWork) func theTokenAndItsRegistrationSurviveARestartAndOtherProcessesReadThem() async throws {
        let store = try await configuredApp(register: false)
        let manager = DeviceTokenManager(store: store, server: PushSampleData.server)
        #expect(try await manager.currentToken() == nil)
        await #expect(throws: PushNotificationError.self) { try await manager.registerToken("0123") }
        #expect(try await manager.currentToken() == nil, "a refused token stores nothing")
        let failing = DeviceTokenManager(store: store) { _ in throw PushNotificationError.serverError(statusCode: 503, message: "busy") }
        await #expect(throws: PushNotificationError.self) { try await failing.registerToken(PushSampleData.deviceToken) }
        #expect(try await manager.lastRegistration() == nil, "a failed registration stores nothing")

        let response = try await manager.registerToken(PushSampleData.deviceToken)
        #expect(response.createdAt == PushSampleData.registeredAt && response.playerAccountId == PushSampleData.playerAccountId)
        // Another manager (as after a restart) finds both.
        let restarted = DeviceTokenManager(store: store, server: PushSampleData.server)
        #expect(try await restarted.currentToken() == PushSampleData.deviceToken)
        #expect(try await restarted.lastRegistration() == response)
        // Another process reads them from the shared defaults.
        let token = try kvtool(["defaults", "read", PushSDKStore.deviceTokenKey])
        #expect(token.stdout == PushSampleData.deviceToken + "\n", "\(token.stderr)")
        let registration = try kvtool(["defaults", "read", PushSDKStore.lastRegistrationKey, "--json"])
        #expect(registration.stdout.contains(#""createdAt":"2025-10-30T09:00:00"#) && registration.stdout.contains(#""id":"6f9619ff"#), "\(registration.stdout)")
    }

    @Test(.blockingWork) func theExtensionHandlesEachPayloadInItsOwnProcessAndTheAppSeesItThroughHistory() async throws {
        let store = try await configuredApp()
        #expect(try PushNotificationFlow.newlyReceived(store: store).isEmpty)

        var out = try extensionHandles(PushSampleData.validPayload)
        #expect(out == "push extension (pid _): shows \"New Mission Available!\" / \"Check out the new daily mission\"; actions: 確認 [CONFIRM, foreground] 後で [LATER]; image https://example.com/mission.png; badge 1\n")
        out = try extensionHandles(#"{"aps":{"alert":{"title":"承認","body":"依頼が届きました"},"category":"ACCEPT_DECLINE_CATEGORY"}}"#)
        #expect(out == "push extension (pid _): shows \"承認\" / \"依頼が届きました\"; actions: 受け入れる [ACCEPT, foreground] 拒否 [DECLINE, destructive]; image none; badge none\n")

        let prefix = "push extension (pid _): rejected: レスポンスのデコードに失敗しました: "
        let invalid: [(String, String)] = [
            (PushSampleData.invalidPayload, "aps.alert.title: title must be 1 to 100 characters, got 0"),
            (#"{"aps":{"alert":{"title":"t","body":"\#(String(repeating: "b", count: 501))"}}}"#, "aps.alert.body: body must be 1 to 500 characters, got 501"),
            (#"["not", "an", "object"]"#, "the payload must be a JSON object, not an array"),
            (#"{"aps":{"alert":{"title":"t","body":"b"}},"customData":"x"}"#, "customData: customData must be an object, not a string"),
            (#"{"aps":"#, "The given data was not valid JSON."),
        ]
        for (payload, detail) in invalid {
            #expect(try extensionHandles(payload) == prefix + detail + "\n", "\(payload)")
        }

        // The app reads, through history, what the extension processes recorded, in order.
        let received = try PushNotificationFlow.newlyReceived(store: store)
        #expect(received.map(\.status) == [.shown, .shown, .rejected, .rejected, .rejected, .rejected, .rejected])
        #expect(received.first?.payload?.customData?["missionId"] == .string("123"))
        #expect(received.last?.error == "レスポンスのデコードに失敗しました: The given data was not valid JSON.")
        #expect(try PushNotificationFlow.newlyReceived(store: store).isEmpty, "acknowledged")
        // kvtool renders the records from the catalog alone.
        let scan = try kvtool(["scan", PushSDKStore.collectionName, "--json"])
        #expect(scan.status == 0 && scan.stdout.contains(#""title":"New Mission Available!""#) && scan.stdout.contains(#""status":"rejected""#), "\(scan.stderr)")
        let check = try kvtool(["check"])
        #expect(check.status == 0, "\(check.stdout)")
    }

    /// The lean `push-extension` (issue 46): when the App Group's store cannot be opened (no
    /// container, a file that is not LMDB's, a store truncated below a page it needs, a `Store` that
    /// is not a directory), it says why in one line on standard error and still delivers the
    /// notification with what its payload carries, exit 0; it records nothing and creates nothing.
    @Test(.blockingWork) func theLeanExtensionDeliversFromThePayloadWhenTheStoreCannotBeOpened() async throws {
        let extensionPath = productsDirectory() + "/push-extension"
        let layout = try ContainerLayout(groupIdentifier: group, root: dir.path)
        func deliver(_ payload: String = PushSampleData.validPayload, _ extra: [String] = []) throws -> ProcessResult {
            try run(extensionPath, ["--root", dir.path, "--group", group, "--payload", payload] + extra, timeout: 60)
        }
        func shown(_ r: ProcessResult) -> String {
            r.stdout.replacingOccurrences(of: #"\(pid \d+, max RSS [0-9.]+ MiB\)"#, with: "(pid _)", options: .regularExpression)
        }
        let note = "push-extension: the notification is not recorded, and its payload alone decides what is shown: "
        let delivered = "push extension (pid _): shows \"New Mission Available!\"; not recorded (the App Group's store cannot be used)\n"

        // No container: none is made.
        var r = try deliver()
        #expect(r.status == 0 && shown(r) == delivered, "\(r.stdout)\(r.stderr)")
        #expect(r.stderr == note + "no App Group container for \(group) at \(layout.path)\n", "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: layout.path))

        // Stores that cannot be opened, each for its own reason: one line saying why, the notification shown.
        func expectDeliveredDespite(_ what: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            let r = try deliver()
            #expect(r.status == 0 && shown(r) == delivered, "\(what): \(r.stdout)\(r.stderr)", sourceLocation: sourceLocation)
            let prefix = note + "the store at \(layout.store) cannot be opened: "
            #expect(r.stderr.hasPrefix(prefix) && r.stderr.count > prefix.count + 1 && r.stderr.filter { $0 == "\n" }.count == 1,
                    "\(what): \(r.stderr)", sourceLocation: sourceLocation)
        }
        // A store truncated to its two meta pages: every page of its trees is past the end.
        do {
            let store = try await configuredApp()
            for index in 0..<200 {
                try store.record(ReceivedNotification(id: UUID(), receivedAt: Date(timeIntervalSince1970: 1_795_831_112 + Double(index)),
                                                      status: .rejected, payload: nil, error: String(repeating: "x", count: 500), rawJSON: "{}"))
            }
            store.container.store.close()
        }
        #expect(truncate(layout.storeDataFile, 8192) == 0)
        try expectDeliveredDespite("a store truncated below its pages")
        // A file that is not LMDB's.
        try Data(repeating: 0xAB, count: 16_384).write(to: URL(fileURLWithPath: layout.storeDataFile))
        try expectDeliveredDespite("a data.mdb that is not LMDB's")
        // A Store that is not a directory.
        try FileManager.default.removeItem(atPath: layout.store)
        try Data("not a directory".utf8).write(to: URL(fileURLWithPath: layout.store))
        try expectDeliveredDespite("a Store that is a file")

        // A payload it rejects is rejected from the payload alone too; --json says it was not recorded.
        r = try deliver(PushSampleData.invalidPayload)
        #expect(r.status == 0 && shown(r) == "push extension (pid _): rejected: レスポンスのデコードに失敗しました: aps.alert.title: title must be 1 to 100 characters, got 0; not recorded (the App Group's store cannot be used)\n",
                "\(r.stdout)\(r.stderr)")
        r = try deliver(PushSampleData.validPayload, ["--json", "--sync-wait", "1"])
        let report = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        #expect(r.status == 0 && report?["recorded"] as? Bool == false && report?["sync"] == nil
                && (report?["notRecorded"] as? String)?.hasPrefix("the store at \(layout.store) cannot be opened: ") == true
                && (report?["record"] as? [String: Any])?["status"] as? String == "shown", "\(r.stdout)\(r.stderr)")
    }

    @Test(.blockingWork) func theExtensionRefusesToWorkBeforeTheAppConfiguredTheSDKOrRegistered() throws {
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        let store = try PushSDKStore(container: container)
        #expect(try extensionHandles(PushSampleData.validPayload)
                == "push extension (pid _): rejected: SDK設定が無効です: the app has not configured the SDK in the App Group\n")
        try store.saveConfiguration(try PushSampleData.configuration())
        #expect(try extensionHandles(PushSampleData.validPayload) == "push extension (pid _): rejected: 無効なデバイストークンです。\n")
        // A stored token that is not 64 hex characters (63 here) is refused too.
        try container.defaults().set(String(PushSampleData.deviceToken.dropLast()), forKey: PushSDKStore.deviceTokenKey)
        #expect(try extensionHandles(PushSampleData.validPayload) == "push extension (pid _): rejected: 無効なデバイストークンです。\n")
        try container.defaults().set(String(PushSampleData.deviceToken.dropLast()) + "z", forKey: PushSDKStore.deviceTokenKey)
        #expect(try extensionHandles(PushSampleData.validPayload) == "push extension (pid _): rejected: 無効なデバイストークンです。\n")
        // A shared configuration tampered with in place (http://) is refused when read.
        try container.defaults().set(["apiURL": "http://push.example.com", "apiKey": "12345678"], forKey: PushSDKStore.configurationKey)
        #expect(try extensionHandles(PushSampleData.validPayload).hasPrefix("push extension (pid _): rejected: SDK設定が無効です: "))
    }
}
