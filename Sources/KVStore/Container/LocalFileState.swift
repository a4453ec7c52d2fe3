/// Where this device's copy of one replicated file stands (issue 49): the container's local-only
/// collection `_files.local` (key: the path relative to `Files/`), which never replicates. The
/// manifest (`_files`) says what a path should hold on every device; this row says whether this
/// device has those bytes, is fetching them, or still has to upload them.
public struct LocalFileState: Codable, Hashable, Sendable {
    public enum Kind: String, Codable, Hashable, Sendable, CaseIterable {
        /// The bytes the manifest names are here, in `Blobs/` and at the path.
        case present
        /// A download of them is under way.
        case downloading
        /// They are not here: a read answers ``SharedFilesError/notYetDownloaded(path:sha256:)``.
        case missing
        /// Written on this device and not yet complete on the server: the bytes are kept in `Blobs/`
        /// until then, whatever happens to the path.
        case waitingToUpload = "waiting_to_upload"
    }

    public var state: Kind
    /// The SHA-256 of the bytes this row is about (the manifest's when it was written): 32 bytes.
    public var sha256: [UInt8]
    public var size: Int64
    /// When a process last wrote, fetched or read the file, in milliseconds since 1970: the order in
    /// which a lazy prefix's copies are evicted.
    public var lastAccess: Int64
    /// Why the last transfer of it stopped (a refusal with its limit, a hash that did not match), if it did.
    public var problem: String?

    public init(state: Kind, sha256: [UInt8], size: Int64, lastAccess: Int64, problem: String? = nil) {
        (self.state, self.sha256, self.size, self.lastAccess, self.problem) = (state, sha256, size, lastAccess, problem)
    }
}
