#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

/// `Snapshots/manifest.json`: every published snapshot, oldest first, and the last generation ever
/// used. It is replaced atomically (temporary file, `fsync`, rename, directory `fsync`), so a reader
/// always sees one complete version.
///
/// ```json
/// {
///   "formatVersion" : 1,
///   "lastGeneration" : 7,
///   "snapshots" : [
///     { "createdAt" : "2026-11-21T08:00:00Z", "file" : "snapshot-000007.mdb", "generation" : 7,
///       "sha256" : "9f86d0…", "size" : 1138688, "sourceTransactionID" : 412 }
///   ]
/// }
/// ```
public struct SnapshotManifest: Codable, Hashable, Sendable {
    /// The format this code writes and the newest it reads.
    public static let currentFormatVersion = 1
    /// Manifests larger than this are refused as corrupt.
    public static let maxSize = 16 << 20
    /// The largest generation accepted (twelve digits), so that counting on never overflows.
    public static let maxGeneration = 999_999_999_999

    public var formatVersion: Int
    /// The highest generation ever published, kept when its snapshot is pruned, so that generations
    /// are never reused.
    public var lastGeneration: Int
    /// The published snapshots in increasing generation order.
    public var snapshots: [SnapshotEntry]

    public init(formatVersion: Int = Self.currentFormatVersion, lastGeneration: Int = 0, snapshots: [SnapshotEntry] = []) {
        self.formatVersion = formatVersion
        self.lastGeneration = lastGeneration
        self.snapshots = snapshots
    }

    /// The manifest's JSON: sorted keys, ISO 8601 dates, one entry per snapshot.
    public func encoded() throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return Array(try encoder.encode(self)) + [0x0A]
    }

    /// Parses and checks a manifest: every entry must name the file of its generation (so a
    /// manifest can never point outside `Snapshots/`), generations must increase, and the fields must
    /// be in range.
    ///
    /// - Throws: ``SnapshotError/corruptManifest(path:reason:)`` with the first problem found, or
    ///   ``SnapshotError/unsupportedManifestVersion(path:version:supported:)``.
    public static func decode(_ data: Data, path: String) throws -> SnapshotManifest {
        struct Version: Decodable { var formatVersion: Int }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        let version: Int
        do {
            version = try decoder.decode(Version.self, from: data).formatVersion
        } catch {
            throw SnapshotError.corruptManifest(path: path, reason: Self.oneLine(error))
        }
        guard version >= 1 else {
            throw SnapshotError.corruptManifest(path: path, reason: "formatVersion \(version) is not a version")
        }
        guard version <= currentFormatVersion else {
            throw SnapshotError.unsupportedManifestVersion(path: path, version: version, supported: currentFormatVersion)
        }
        let manifest: SnapshotManifest
        do {
            manifest = try decoder.decode(SnapshotManifest.self, from: data)
        } catch {
            throw SnapshotError.corruptManifest(path: path, reason: Self.oneLine(error))
        }
        if let problem = manifest.problem() { throw SnapshotError.corruptManifest(path: path, reason: problem) }
        return manifest
    }

    /// The first inconsistency, or `nil`.
    func problem() -> String? {
        var previous = 0
        for entry in snapshots {
            let expected = SnapshotEntry.fileName(forGeneration: entry.generation)
            if entry.generation < 1 { return "generation \(entry.generation) is not positive" }
            if entry.generation > Self.maxGeneration { return "generation \(entry.generation) is over the limit \(Self.maxGeneration)" }
            if entry.generation <= previous {
                return "generation \(entry.generation) follows generation \(previous); generations must increase"
            }
            if entry.file != expected {
                return "generation \(entry.generation) names file \(KVStoreError.quote(entry.file)); expected \(expected)"
            }
            if entry.size < 0 { return "\(entry.file) has a negative size" }
            if entry.sourceTransactionID < 0 { return "\(entry.file) has a negative source transaction ID" }
            if entry.sha256.utf8.count != 64 || !entry.sha256.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) {
                return "\(entry.file) has a malformed sha256 (expected 64 lower-case hex digits)"
            }
            previous = entry.generation
        }
        if lastGeneration > Self.maxGeneration {
            return "lastGeneration \(lastGeneration) is over the limit \(Self.maxGeneration)"
        }
        if lastGeneration < previous {
            return "lastGeneration \(lastGeneration) is below the listed generation \(previous)"
        }
        return nil
    }

    /// A decoding error as one line, naming the field.
    static func oneLine(_ error: any Error) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return keys.isEmpty ? "" : " at \(keys.hasPrefix(".") ? String(keys.dropFirst()) : keys)"
        }
        let text: String
        switch error {
        case DecodingError.dataCorrupted(let context):
            if let underlying = context.underlyingError {
                text = "not valid JSON (\(String(describing: underlying).singleLine))"
            } else {
                text = context.debugDescription + path(context)
            }
        case DecodingError.keyNotFound(let key, let context):
            text = "missing field '\(key.stringValue)'" + path(context)
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            text = context.debugDescription + path(context)
        default:
            text = "\(error)"
        }
        return text.singleLine
    }
}
