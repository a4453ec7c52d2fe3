#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An operation of ``SubscriptionStore`` named a record that is not there.
///
/// ```swift
/// do { try subscriptions.confirmEvent(id, now: Date()) }
/// catch { print(error) }   // no billing event with id 6f1c…
/// ```
public enum SubscriptionStoreError: Error, Hashable, Sendable, CustomStringConvertible {
    case subscriptionNotFound(UUID)
    case eventNotFound(UUID)

    public var description: String {
        switch self {
        case .subscriptionNotFound(let id): "no subscription with id \(id.uuidString.lowercased())"
        case .eventNotFound(let id): "no billing event with id \(id.uuidString.lowercased())"
        }
    }
}
