#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A feed as a reader got it: the payload with its generation and publication time.
///
/// ```swift
/// let feed = try WidgetFeed<ChecklistWidgetFeed>(name: "checklist", groupIdentifier: group).read()
/// print(feed.generation, feed.publishedAt, feed.payload.streak.current)
/// ```
public struct PublishedFeed<Payload: Sendable>: Sendable {
    /// Increases with every publication of the feed, across processes; never reused.
    public var generation: UInt64
    /// When the publisher wrote it (microsecond precision).
    public var publishedAt: Date
    public var payload: Payload
}

extension PublishedFeed: Equatable where Payload: Equatable {}
extension PublishedFeed: Hashable where Payload: Hashable {}
