#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

extension SharedFiles {
    /// One entry of a directory, as ``entries(in:)`` reports it (`lstat`, never following links).
    public struct DirectoryEntry: Hashable, Sendable {
        public enum Kind: Hashable, Sendable {
            case file, directory, symbolicLink, other
        }

        /// The entry's name.
        public var name: String
        /// Its path relative to ``SharedFiles/directory``, for ``SharedFiles/read(_:maxSize:)`` and
        /// ``SharedFiles/remove(_:)``.
        public var path: String
        public var kind: Kind
        /// The size in bytes (`st_size`).
        public var size: Int
        /// The last modification time (`st_mtim`).
        public var modificationDate: Date
    }

    /// Every entry of one directory, sorted by name, including hidden and temporary files, symbolic
    /// links (reported, never followed) and special files: what a sweeper of orphaned files needs.
    /// Entries whose names this API could not address (see ``validate(_:)``), such as the `.kvtmp-*`
    /// files of ``write(_:to:)-(Data,_)``, are left out.
    ///
    /// ```swift
    /// for entry in try files.entries(in: "feeds") where entry.kind == .file {
    ///     print(entry.path, entry.size, entry.modificationDate)
    /// }
    /// ```
    ///
    /// Thread safety: as every ``SharedFiles`` call. Entries that vanish while listing are skipped.
    ///
    /// - Parameter directory: A relative directory path; `""` (the default) for ``directory`` itself.
    /// - Throws: As ``list(_:recursive:)``.
    public func entries(in directory: String = "") throws -> [DirectoryEntry] {
        let components = directory.isEmpty ? [] : try Self.validate(directory)
        let fd = try SafePath.walk(
            from: SafePath.openRoot(self.directory), through: components[...],
            createMode: nil, path: directory, directory: self.directory)
        defer { close(fd) }
        var result: [DirectoryEntry] = []
        for entry in try SafePath.entries(of: fd, displayPath: SafePath.join(self.directory, directory)) {
            guard SafePath.isAddressable(entry.name) else { continue }
            let kind: DirectoryEntry.Kind = entry.isRegularFile ? .file
                : entry.isDirectory ? .directory
                : SafePath.isType(entry.status, S_IFLNK) ? .symbolicLink : .other
            let mtime = entry.status.st_mtim
            result.append(DirectoryEntry(
                name: entry.name, path: directory.isEmpty ? entry.name : directory + "/" + entry.name,
                kind: kind, size: Int(entry.status.st_size),
                modificationDate: Date(timeIntervalSince1970: Double(mtime.tv_sec) + Double(mtime.tv_nsec) / 1e9)))
        }
        return result.sorted { $0.name < $1.name }
    }
}

extension SharedFiles {
    /// Runs `body` with a descriptor of the directory at `path` (`""` for ``directory`` itself),
    /// reached without following a symbolic link at any level, and creating missing levels with
    /// ``SharingMode/directoryMode`` when `create` is set. For code that must create or open files
    /// next to this API's own (lock files, say) with `openat`, so that a directory swapped for a link
    /// cannot send them elsewhere. The descriptor is closed when `body` returns: do not keep it.
    ///
    /// ```swift
    /// let fd = try files.withDirectory("feeds", create: true) { dir in openat(dir, ".today.lock", O_RDWR | O_CREAT | O_NOFOLLOW, 0o600) }
    /// ```
    ///
    /// - Throws: As ``list(_:recursive:)``, and whatever `body` throws.
    public func withDirectory<R>(_ path: String, create: Bool, _ body: (Int32) throws -> R) throws -> R {
        let components = path.isEmpty ? [] : try Self.validate(path)
        let fd = try SafePath.walk(
            from: SafePath.openRoot(directory), through: components[...],
            createMode: create ? sharing.directoryMode : nil, path: path, directory: directory)
        defer { close(fd) }
        return try body(fd)
    }
}
