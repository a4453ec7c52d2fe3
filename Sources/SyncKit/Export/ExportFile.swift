#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

/// An export's file name and contents, ready to be written.
///
/// ```swift
/// let file = ExportFile(name: "subscriptions_events_20260206_123456.csv", contents: csvData)
/// let path = try file.write(toDirectory: NSTemporaryDirectory())
/// ```
public struct ExportFile: Sendable, Hashable {
    /// One plain file name (see ``ExportFileName/check(_:)``).
    public var name: String
    /// The bytes of the file.
    public var contents: Data

    public init(name: String, contents: Data) {
        self.name = name
        self.contents = contents
    }

    /// The contents as UTF-8 text.
    public var text: String { String(decoding: contents, as: UTF8.self) }

    /// Writes the file into `directory` atomically and returns its path.
    ///
    /// The bytes go to a temporary file created with `O_EXCL` in `directory` itself, which is written
    /// in full, `fsync`ed and renamed onto ``name``; then the directory is `fsync`ed (KVStore's
    /// `SharedFiles` does this). Readers see no file or the whole file, never part of one, and a file
    /// of the same name is replaced whole. On failure the temporary file is removed. The file is
    /// created with the mode of `sharing` (`0600` by default).
    ///
    /// ```swift
    /// let path = try file.write(toDirectory: "/tmp")   // "/tmp/subscriptions_events_20260206_123456.csv"
    /// ```
    ///
    /// - Throws: ``ExportError/invalidFileName(_:reason:)`` for a name that is not one plain file name;
    ///   `KVStoreError.io(operation:path:errno:)` when the directory is missing or a system call fails
    ///   (`EISDIR` when a directory has the name); `KVStoreError.invalidPath(_:reason:)` when
    ///   `directory` or the name is a symbolic link.
    @discardableResult
    public func write(toDirectory directory: String, sharing: SharingMode = .privateToUser) throws -> String {
        try ExportFileName.check(name)
        let files = try SharedFiles(directory: directory, sharing: sharing)
        try files.write(contents, to: name)
        return files.directory.hasSuffix("/") ? files.directory + name : files.directory + "/" + name
    }
}
