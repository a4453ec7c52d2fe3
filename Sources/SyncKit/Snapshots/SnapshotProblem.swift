/// One thing wrong with the published snapshots, as ``Snapshots/verify()`` reports it.
///
/// ```swift
/// for problem in try snapshots.verify().problems { print(problem) }
/// // snapshot-000002.mdb (generation 2): checksum mismatch: manifest has 3a7bd3e2…, file has 9c1185a5…
/// ```
public struct SnapshotProblem: Hashable, Sendable, CustomStringConvertible {
    public enum Kind: Hashable, Sendable {
        /// The manifest lists the file, but it does not exist.
        case missing
        /// The name is taken by a directory, symbolic link or special file.
        case notARegularFile
        /// The file could not be read; the reason is the system's.
        case unreadable(String)
        /// The file's size differs from the manifest's.
        case sizeMismatch(expected: Int, actual: Int)
        /// The file's SHA-256 differs from the manifest's (hex digests).
        case checksumMismatch(expected: String, actual: String)
        /// A snapshot file that the manifest does not list (left by an export that crashed before
        /// writing the manifest; ``Snapshots/prune(keep:)`` removes it).
        case unlisted
    }

    /// The file name in `Snapshots/`.
    public var file: String
    /// The generation the manifest lists the file under; `nil` for ``Kind/unlisted`` files.
    public var generation: Int?
    public var kind: Kind

    public init(file: String, generation: Int?, kind: Kind) {
        self.file = file
        self.generation = generation
        self.kind = kind
    }

    /// A short machine-readable name of the kind: `missing`, `notARegularFile`, `unreadable`,
    /// `sizeMismatch`, `checksumMismatch`, `unlisted`.
    public var kindName: String {
        switch kind {
        case .missing: "missing"
        case .notARegularFile: "notARegularFile"
        case .unreadable: "unreadable"
        case .sizeMismatch: "sizeMismatch"
        case .checksumMismatch: "checksumMismatch"
        case .unlisted: "unlisted"
        }
    }

    /// What is wrong, without the file name.
    public var detailDescription: String {
        switch kind {
        case .missing: "listed in the manifest but missing"
        case .notARegularFile: "not a regular file"
        case .unreadable(let reason): "unreadable: \(reason)"
        case .sizeMismatch(let expected, let actual): "size mismatch: manifest has \(expected) bytes, file has \(actual)"
        case .checksumMismatch(let expected, let actual): "checksum mismatch: manifest has sha256 \(expected), file has \(actual)"
        case .unlisted: "not listed in the manifest"
        }
    }

    /// One line: the file, its generation, and what is wrong.
    public var description: String {
        let name = generation.map { "\(file) (generation \($0))" } ?? file
        return "\(name): \(detailDescription)"
    }
}
