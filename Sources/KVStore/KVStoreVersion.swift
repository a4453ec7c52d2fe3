/// This package's version, the one place it is written: `kvtool --version` prints it, and the README's
/// `.package(url: …, from: "…")` names it (a test compares them, and tags the clone it builds the
/// README's example against with it). Bump it here when a release is tagged.
public enum KVStoreVersion {
    /// Semantic versioning: `MAJOR.MINOR.PATCH`.
    public static let current = "1.0.0"
}
