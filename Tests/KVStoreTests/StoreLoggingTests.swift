import Foundation
import Logging
import Testing
import TestSupport
@testable import KVStore

/// Keeps every record it is given.
final class CapturingLogHandler: LogHandler, @unchecked Sendable {
    struct Record {
        var level: Logger.Level
        var message: String
        var metadata: Logger.Metadata
    }

    private let lock = NSLock()
    private var stored: [Record] = []
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    var records: [Record] { lock.withLock { stored } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let record = Record(level: event.level, message: "\(event.message)", metadata: event.metadata ?? [:])
        lock.withLock { stored.append(record) }
    }
}

@Suite struct StoreLoggingTests {
    let dir = TemporaryDirectory()

    @Test func mapGrowthIsLoggedAndOrdinaryWorkIsNot() throws {
        let handler = CapturingLogHandler()
        var options = Store.Options()
        options.mapSize = 64 << 10
        options.logger = Logger(label: "test", factory: { _ in handler })
        let store = try dir.store(options: options)
        let values = try store.collection("values", key: Int.self, value: Int.self)
        try values.put(1, forKey: 1)
        _ = try values.get(1)
        #expect(handler.records.isEmpty, "\(handler.records.map(\.message))")

        let blobs = try store.collection("blobs", key: Int.self, value: [UInt8].self)
        try store.write { tx in
            for i in 0..<64 { try blobs.put([UInt8](repeating: 1, count: 4096), forKey: i, in: tx) }
        }
        let growth = handler.records.filter { $0.message == "the map filled up: grew it" }
        #expect(!growth.isEmpty, "\(handler.records.map(\.message))")
        if let first = growth.first {
            #expect(first.level == .notice)
            #expect(first.metadata["path"] == "\(store.directory)")
            #expect(first.metadata["from"] == "\(64 << 10)")
            #expect(first.metadata["to"] == "\(128 << 10)")
        }
        #expect(handler.records.contains { $0.message == "running the write again after the map grew" && $0.level == .info })
    }

    @Test func theDefaultLoggerIsSilent() {
        #expect(Store.Options().logger.handler is SwiftLogNoOpLogHandler)
    }
}
