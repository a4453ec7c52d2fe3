import KVStore

/// Posts a container's change notification after each commit that changed something: for processes
/// that write to a container without ``History`` (which posts by itself).
///
/// ```swift
/// let container = try SharedContainer(groupIdentifier: "group.com.example.app")
/// container.store.addObserver(CommitNotifier(notifier: ChangeNotifier(container: container)))
/// try container.defaults().set(3, forKey: "streak")     // observers in every process wake up
/// ```
///
/// The post runs on the committing thread, after the commit: a small write of one file, which never
/// waits for an observer. A post that fails is dropped (observers lose nothing they could not find by
/// reading the store).
public final class CommitNotifier: WriteObserver {
    /// Where the notifications go.
    public let notifier: ChangeNotifier
    /// The name posted (``ChangeNotifier/changes`` unless told otherwise).
    public let name: String

    public init(notifier: ChangeNotifier, name: String = ChangeNotifier.changes) {
        self.notifier = notifier
        self.name = name
    }

    public func transactionDidCommit(_ commit: CommittedTransaction) {
        guard !commit.mutations.isEmpty else { return }
        try? notifier.post(name)
    }
}
