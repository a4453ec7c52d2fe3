#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

/// How a conflict between this device's write and another's was settled.
public struct ConflictEvent: Hashable, Sendable, CustomStringConvertible {
    public enum Resolution: String, Hashable, Sendable {
        /// This device's value won (last-writer-wins) and was sent again on top of the server's.
        case keptLocal
        /// The other device's value won and replaced this device's.
        case tookRemote
        /// Both values were merged by the collection's merge function; the result is on both sides.
        case merged
        /// This device's write was refused (reject-and-report): the other device's value stands.
        case rejectedLocal
    }

    /// Where the conflict was found: sending this device's change, or applying another's.
    public enum Stage: String, Hashable, Sendable { case push, pull, resync }

    public var target: Mutation.Target
    /// The key's stored bytes.
    public var key: [UInt8]
    public var resolution: Resolution
    public var stage: Stage
    public var localClock: HybridTimestamp
    public var remoteClock: HybridTimestamp
    public var remoteDevice: String
    /// The server version of the other device's write.
    public var serverVersion: Int64

    /// One line; the key is its bytes in hex (`0x6b`): ``description(key:)`` takes it as the
    /// collection's key encoding renders it (`kvtool` shows it so, as `kvtool get` takes it).
    public var description: String { description(key: "0x" + Hex.encode(key)) }

    /// ``description`` with the key shown as `key`.
    public func description(key: String) -> String {
        "\(target) key \(key): \(resolution.rawValue) (\(stage.rawValue); local \(localClock), remote \(remoteClock) from \(remoteDevice))"
    }
}
#endif
