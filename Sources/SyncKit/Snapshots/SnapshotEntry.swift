#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One published snapshot, as the manifest lists it.
///
/// ```swift
/// for entry in try snapshots.list() {
///     print(entry.generation, entry.file, entry.sourceTransactionID, entry.size, entry.sha256)
/// }
/// ```
public struct SnapshotEntry: Codable, Hashable, Sendable {
    /// Increases by one per export, across every process, and is never reused (not even after
    /// pruning).
    public var generation: Int
    /// The file name in `Snapshots/`: `snapshot-<generation, zero-padded to 6 digits>.mdb`.
    public var file: String
    /// The `mdb_txn_id` of the read transaction the snapshot was copied in: the last transaction
    /// committed to the store before it. Later generations never have a smaller one.
    public var sourceTransactionID: Int
    /// When the export finished (whole seconds; ISO 8601 in the manifest).
    public var createdAt: Date
    /// The file size in bytes.
    public var size: Int
    /// SHA-256 of the file, lower-case hex, as `sha256sum` prints it.
    public var sha256: String

    public init(generation: Int, file: String, sourceTransactionID: Int, createdAt: Date, size: Int, sha256: String) {
        self.generation = generation
        self.file = file
        self.sourceTransactionID = sourceTransactionID
        self.createdAt = createdAt
        self.size = size
        self.sha256 = sha256
    }

    /// The file name of a generation: `snapshot-000007.mdb`.
    public static func fileName(forGeneration generation: Int) -> String {
        let digits = String(generation)
        return "snapshot-" + String(repeating: "0", count: max(0, 6 - digits.count)) + digits + ".mdb"
    }

    /// The generation a snapshot file name stands for, or `nil` if `name` is not exactly the name
    /// ``fileName(forGeneration:)`` gives some generation.
    public static func generation(ofFileName name: String) -> Int? {
        guard name.hasPrefix("snapshot-"), name.hasSuffix(".mdb") else { return nil }
        let digits = name.dropFirst("snapshot-".count).dropLast(".mdb".count)
        guard digits.count >= 6, digits.count <= 12, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber),
              let generation = Int(digits), generation >= 1,
              fileName(forGeneration: generation) == name else { return nil }
        return generation
    }
}
