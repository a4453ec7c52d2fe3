// The properties of SyncKit's parsers of live metadata (widget feed files, the snapshot manifest,
// history entries, consumer records and history's counters), checked by the fuzz harnesses
// fuzz/Targets/{feed,manifest,history}.swift (built by scripts/fuzz.sh) and replayed from
// fuzz/corpus/ by SyncFuzzCorpusReplayTests (SyncKitTests). SwiftPM builds this folder as the
// `SyncFuzzProperties` target. The parsers are SyncKit's internal ones (`WidgetFeedFile`,
// `ConsumerRecord`), hence `@testable import`: debug builds and scripts/fuzz.sh compile SyncKit with
// testing enabled.
import Foundation
import FuzzProperties
import KVStore
@testable import SyncKit

/// The SyncKit fuzz targets by name, as the harnesses, the corpus folders and the replay tests know them.
public enum SyncFuzzTarget: String, CaseIterable, Sendable {
    case feed, manifest, history

    /// Checks the target's property on one input.
    public func check(_ input: [UInt8]) throws(PropertyViolation) -> FuzzOutcome {
        switch self {
        case .feed: try FeedProperty.check(input)
        case .manifest: try ManifestProperty.check(input)
        case .history: try HistoryProperty.check(input)
        }
    }
}

@inline(__always)
func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) throws(PropertyViolation) {
    if !condition() { throw PropertyViolation(message()) }
}

/// An error must be one line, of bounded length.
func requireOneLine(_ text: String, _ what: String) throws(PropertyViolation) {
    try require(!text.contains("\n"), "\(what) is not one line: \(text)")
    try require(text.utf8.count <= 2_000, "\(what) is \(text.utf8.count) bytes long")
}

/// `WidgetFeedFile.decode`, what every widget's `read()` runs on the file's bytes: it throws a
/// one-line `WidgetFeedError` (`corrupt` or `unsupportedVersion`) naming the path, or returns fields
/// that encode back to a file that decodes to the same generation and payload. Nothing traps.
public enum FeedProperty {
    static let path = "/fuzz/Snapshots/feeds/f.feed"

    public static func check(_ input: [UInt8]) throws(PropertyViolation) -> FuzzOutcome {
        let parsed: WidgetFeedFile.Parsed
        do {
            parsed = try WidgetFeedFile.decode(input, path: path)
        } catch let error as WidgetFeedError {
            try requireOneLine(error.description, "the error")
            try require(error.description.contains(path), "the error does not name the file: \(error)")
            switch error {
            case .corrupt: return .rejected("corrupt")
            case .unsupportedVersion: return .rejected("unsupportedVersion")
            default: throw PropertyViolation("decode threw \(error)")
            }
        } catch {
            throw PropertyViolation("decode threw a \(type(of: error)): \(error)")
        }
        try require(input.count >= WidgetFeedFile.headerSize && parsed.payload.count == input.count - WidgetFeedFile.headerSize,
                    "an accepted file of \(input.count) bytes has a \(parsed.payload.count)-byte payload")
        let again = WidgetFeedFile.encode(generation: parsed.generation, publishedAt: parsed.publishedAt, payload: Array(parsed.payload))
        do {
            let reparsed = try WidgetFeedFile.decode(again, path: path)
            try require(reparsed.generation == parsed.generation && reparsed.payload == parsed.payload,
                        "the fields re-encode to a different feed")
            // Microseconds as a Double: equal to within a microsecond (or a part in 2^52) once rounded.
            let delta = abs(reparsed.publishedAt.timeIntervalSince1970 - parsed.publishedAt.timeIntervalSince1970)
            try require(delta <= max(1e-6, abs(parsed.publishedAt.timeIntervalSince1970) * 1e-15) || !delta.isFinite,
                        "the time re-encodes \(delta) s away")
        } catch let violation as PropertyViolation {
            throw violation
        } catch {
            throw PropertyViolation("the fields re-encode to a file that does not decode: \(error)")
        }
        return .accepted
    }
}

/// `SnapshotManifest.decode`, what every process that lists, opens, verifies or prunes snapshots
/// runs on `manifest.json`: it throws a one-line `SnapshotError` (`corruptManifest` or
/// `unsupportedManifestVersion`), or returns a manifest whose every entry names exactly the file of its
/// generation (so never a path outside `Snapshots/`), with generations increasing within limits, and
/// that re-encodes to JSON that decodes to the same manifest. Nothing traps.
public enum ManifestProperty {
    static let path = "/fuzz/Snapshots/manifest.json"

    public static func check(_ input: [UInt8]) throws(PropertyViolation) -> FuzzOutcome {
        let manifest: SnapshotManifest
        do {
            manifest = try SnapshotManifest.decode(Data(input), path: path)
        } catch let error as SnapshotError {
            try requireOneLine(error.description, "the error")
            switch error {
            case .corruptManifest: return .rejected("corruptManifest")
            case .unsupportedManifestVersion: return .rejected("unsupportedManifestVersion")
            default: throw PropertyViolation("decode threw \(error)")
            }
        } catch {
            throw PropertyViolation("decode threw a \(type(of: error)): \(error)")
        }
        var previous = 0
        for entry in manifest.snapshots {
            try require(entry.generation > previous && entry.generation <= SnapshotManifest.maxGeneration,
                        "generation \(entry.generation) after \(previous)")
            try require(entry.file == SnapshotEntry.fileName(forGeneration: entry.generation)
                        && SnapshotEntry.generation(ofFileName: entry.file) == entry.generation,
                        "generation \(entry.generation) names \(entry.file)")
            try require(!entry.file.contains("/") && !entry.file.hasPrefix("."), "an accepted entry names \(entry.file)")
            try require(entry.size >= 0 && entry.sourceTransactionID >= 0, "negative size or transaction ID")
            previous = entry.generation
        }
        try require(manifest.lastGeneration >= previous && manifest.lastGeneration <= SnapshotManifest.maxGeneration,
                    "lastGeneration \(manifest.lastGeneration)")
        let encoded: [UInt8]
        do {
            encoded = try manifest.encoded()
        } catch {
            throw PropertyViolation("an accepted manifest does not encode: \(error)")
        }
        let again: SnapshotManifest
        do {
            again = try SnapshotManifest.decode(Data(encoded), path: path)
        } catch {
            throw PropertyViolation("an accepted manifest re-encodes to JSON that does not decode: \(error)")
        }
        try require(again == manifest, "an accepted manifest re-encodes to a different manifest")
        return .accepted
    }
}

/// History's records as its readers decode them (CBOR through `CBORDecoder`): the first byte selects
/// an entry of `_history` (0), a consumer record of `_history.consumers` (1) or a counter of
/// `_history.state` (2); the rest is the stored value. Decoding throws a one-line `CBORError` or
/// returns a value; a `HistoryEntry` with no problem (see `HistoryEntry.problem(storedAt:)`)
/// re-encodes to an equal entry; and `History.checkIntegrity`'s arithmetic never meets a number it
/// cannot handle (it works in UInt128). Nothing traps.
public enum HistoryProperty {
    public static func check(_ input: [UInt8]) throws(PropertyViolation) -> FuzzOutcome {
        guard let selector = input.first else { return .rejected("empty") }
        let value = Array(input.dropFirst())
        switch selector % 3 {
        case 0:
            let entry: HistoryEntry
            do {
                entry = try CBORDecoder().decode(HistoryEntry.self, from: value)
            } catch {
                return try rejection(error)
            }
            if let problem = entry.problem(storedAt: entry.token.rawValue) {
                try requireOneLine(problem, "the problem")
                return .rejected("entryProblem")
            }
            _ = entry.target
            let again: HistoryEntry
            do {
                again = try CBORDecoder().decode(HistoryEntry.self, from: try CBOREncoder().encode(entry))
            } catch {
                throw PropertyViolation("an accepted entry does not round-trip: \(error)")
            }
            try require(again == entry, "an accepted entry re-encodes to a different entry")
            var collector = TransactionCollector(filter: .all, next: .zero)
            _ = collector.add(entry)
            collector.finish()
            try require(collector.transactions.first?.lastToken == entry.token, "the collector lost the entry")
        case 1:
            do {
                let record = try CBORDecoder().decode(ConsumerRecord.self, from: value)
                _ = UInt128(record.token.rawValue) + 1
            } catch {
                return try rejection(error)
            }
        default:
            do {
                let counter = try CBORDecoder().decode(UInt64.self, from: value)
                _ = UInt128(counter) + 1
            } catch {
                return try rejection(error)
            }
        }
        return .accepted
    }

    static func rejection(_ error: any Error) throws(PropertyViolation) -> FuzzOutcome {
        guard let error = error as? CBORError else { throw PropertyViolation("decoding threw a \(type(of: error)): \(error)") }
        try requireOneLine("\(error)", "the error")
        return .rejected("CBORError")
    }
}
