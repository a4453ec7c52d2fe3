import Foundation
import Testing
import TestSupport
import SyncKit

/// The feed header stores the publication time as microseconds in an Int64. Before the fix, a time
/// beyond about ±292,000 years from 1970 (or not finite) trapped the conversion in the publishing
/// process; now it is clamped, and the feed reads back.
@Suite struct WidgetFeedTimeTests {
    let dir = TemporaryDirectory()

    @Test(arguments: [1e15, -1e15, Double.infinity, -Double.infinity, Double.nan])
    func publishingAtAnOutOfRangeTimeDoesNotTrap(_ seconds: Double) throws {
        let container = try dir.container("group.com.example.feed-time")
        let feed = try WidgetFeed<Today>(name: "today", container: container)
        let generation = try feed.publish(Today(total: 1, streak: 1, note: nil), at: Date(timeIntervalSince1970: seconds))
        let read = try feed.read()
        #expect(read.generation == generation && read.payload == Today(total: 1, streak: 1, note: nil))
        let micros = read.publishedAt.timeIntervalSince1970 * 1_000_000
        if seconds.isNaN {
            #expect(micros == 0)
        } else {
            #expect(abs(micros) >= 9.2e18 && (micros > 0) == (seconds > 0), "\(micros)")
        }
    }
}
