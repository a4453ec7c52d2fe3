import Foundation
import KVStore
import SyncKit

/// A store with history attached, its defaults, and a task that signals each change notification.
final class NotificationFixture: @unchecked Sendable {
    private let container: SharedContainer
    private let defaults: SharedDefaults
    private let woke = DispatchSemaphore(value: 0)
    private let observer: Task<Void, Never>
    private var sequence = 0

    init() throws {
        var options = SharedContainer.Options()
        options.store.durability = .noSync
        container = try SharedContainer(groupIdentifier: "group.com.example.notify", root: try Dataset.temporaryDirectory("notify"), options: options)
        _ = try History.attach(to: container)
        defaults = try container.defaults()
        let wakes = try ChangeNotifier(directory: container.notifyDirectory).notifications()
        let woke = woke
        observer = Task { for await _ in wakes { woke.signal() } }
    }

    deinit { observer.cancel() }

    func commitAndWait() throws {
        sequence += 1
        try defaults.set(sequence, forKey: "seq")
        guard woke.wait(timeout: .now() + 5) == .success else {
            throw KVStoreError.io(operation: "wait 5 s for a wakeup on", path: container.notifyDirectory, errno: ETIMEDOUT)
        }
    }
}
