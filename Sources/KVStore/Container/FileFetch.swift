/// How the files under a replicated prefix of `Files/` reach a device (issue 49): declared per prefix
/// with `Replication.files(prefix:fetch:in:)` and stored in the container, so every process sees it.
public enum FileFetch: Hashable, Sendable {
    /// Fetched as soon as the manifest row arrives, before anyone asks: what a notification
    /// extension needs for `TrainerImages/`, which must have the picture before it shows.
    case eager
    /// Fetched when a process asks for it; the prefix's copies are evicted least recently used first
    /// once they take more than `budget` bytes (files waiting to upload are never evicted).
    case lazy(budget: Int64)

    /// The budget of a lazy prefix unless one is given: 256 MiB.
    public static let defaultLazyBudget: Int64 = 256 << 20
}

/// A replicated prefix of `Files/`, as the container's `_files.prefixes` collection records it (key:
/// the prefix). A file replicates when its path starts with the prefix, which names a directory and
/// ends with `/` (`TrainerImages/`).
public struct ReplicatedFilePrefix: Codable, Hashable, Sendable {
    /// The directory, relative to `Files/`, with its trailing `/`.
    public var prefix: String
    public var fetch: FileFetch

    public init(prefix: String, fetch: FileFetch) {
        (self.prefix, self.fetch) = (prefix, fetch)
    }

    /// Whether the file at `path` (relative to `Files/`) is under this prefix.
    public func covers(_ path: String) -> Bool {
        path.utf8.count > prefix.utf8.count && path.utf8.starts(with: prefix.utf8)
    }

    // A CBOR map of text keys, readable by `kvtool` without the Swift types: `prefix`, `fetch`
    // ("eager" or "lazy") and, for a lazy prefix, `budget`.
    private enum CodingKeys: String, CodingKey { case prefix, fetch, budget }

    public init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        prefix = try values.decode(String.self, forKey: .prefix)
        switch try values.decode(String.self, forKey: .fetch) {
        case "eager": fetch = .eager
        // A fetch mode a newer version wrote is taken as lazy: never an eager download nobody asked for.
        default: fetch = .lazy(budget: try values.decodeIfPresent(Int64.self, forKey: .budget) ?? FileFetch.defaultLazyBudget)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var values = encoder.container(keyedBy: CodingKeys.self)
        try values.encode(prefix, forKey: .prefix)
        switch fetch {
        case .eager:
            try values.encode("eager", forKey: .fetch)
        case .lazy(let budget):
            try values.encode("lazy", forKey: .fetch)
            try values.encode(budget, forKey: .budget)
        }
    }
}
