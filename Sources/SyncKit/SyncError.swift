/// An error raised by SyncKit about history and notifications. Each description is one line naming the
/// problem. A failed system call is ``KVStore/KVStoreError/io(operation:path:errno:)``, as everywhere.
public enum SyncError: Error, Hashable, Sendable, CustomStringConvertible {
    /// No consumer of that name is registered.
    case unknownConsumer(String)
    /// A consumer name is empty or longer than 200 bytes.
    case invalidConsumerName(String)
    /// A token beyond the last one recorded was acknowledged.
    case tokenFromTheFuture(token: ChangeToken, current: ChangeToken)
    /// A notification name is not 1–100 letters, digits, `.`, `_` or `-`.
    case invalidNotificationName(String)
    /// History's own records hold something SyncKit never writes (a token counter at its maximum,
    /// say): written by another process or damaged. `kvtool check` names every such problem.
    case corruptHistory(String)
    /// The container's sync agent registration (kept outside the container since issue 47:
    /// ``SyncAgentRegistration/registrationPath(for:)``) cannot be used: a link, a FIFO, a socket or a
    /// device, another user's file, readable by others, too long, not a registration, made for another
    /// container; or a `.sync-agent` in the container, which is never run.
    case invalidAgentRegistration(String)
    /// The lock was free, yet the container's record names another live owner of its sync: two
    /// owners at once, which must never be. The process refuses to sync rather than push twice.
    case ownershipConflict(SyncOwner)

    public var description: String {
        switch self {
        case .unknownConsumer(let name): "no history consumer named '\(name)'"
        case .invalidConsumerName(let name): "invalid consumer name '\(name)': it must be 1 to 200 bytes"
        case .tokenFromTheFuture(let token, let current):
            "token \(token) is beyond the last recorded change (\(current))"
        case .invalidNotificationName(let name):
            "invalid notification name '\(name)': use 1 to 100 letters, digits, '.', '_' or '-'"
        case .corruptHistory(let detail): "corrupt history: \(detail)"
        case .invalidAgentRegistration(let detail): "invalid sync agent registration: \(detail)"
        case .ownershipConflict(let owner):
            "two owners of sync: the sync lock was free, yet \(owner) is alive and recorded as owner; refusing to sync"
        }
    }
}
