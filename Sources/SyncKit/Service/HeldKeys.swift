#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Keys whose local writes wait behind another device's change that this device quarantined (a value
/// it cannot read, from a newer app or from a member who sent one no device can decode), as the owner
/// recorded them after a round. Only these keys wait: everything else the server has is acknowledged
/// (issue 47: one quarantined value used to refuse every request of the device). The user settles
/// each with `kvtool sync quarantine drop|keep-mine` (SyncKitPostgres's
/// `Replicator.resolveQuarantined`).
public struct HeldKeys: Codable, Hashable, Sendable, CustomStringConvertible {
    /// How many keys wait.
    public var count: Int
    /// One line naming them (the first few), and how to settle them.
    public var message: String

    public init(count: Int, message: String) {
        (self.count, self.message) = (count, message)
    }

    public var description: String { message }
}
