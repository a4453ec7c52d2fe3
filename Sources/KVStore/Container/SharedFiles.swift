#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Files shared by the processes of one App Group, stored below one directory (the container's
/// `Files/`) at relative paths such as `TrainerImages/<uuid>.png`.
///
/// ```swift
/// let files = try SharedFiles(directory: container + "/Files")
/// try files.write(pngData, to: "TrainerImages/\(id).png")
/// let back = try files.read("TrainerImages/\(id).png")
/// for path in try files.list("TrainerImages") { print(path) }  // "TrainerImages/….png"
/// ```
///
/// **Safety.** Every relative path is checked lexically first (see ``validate(_:)``), so nothing
/// outside ``directory`` can be named. Every operation then walks from a descriptor of ``directory``
/// with `openat(… O_NOFOLLOW)`, one component at a time, so a symbolic link planted anywhere inside
/// the directory (or the directory itself replaced by one) is never followed: the operation fails with
/// ``KVStoreError/invalidPath(_:reason:)`` whose reason says which component is a symbolic link.
///
/// **Atomicity.** ``write(_:to:)-(Data,_)`` writes a temporary file next to the target, `fsync`s it
/// and renames it over the target, then `fsync`s the directory. Readers in any process see either the
/// old or the new contents, never a mixture; after a crash, at worst a `.kvtmp-*` file is left
/// behind, which ``list(_:recursive:)`` hides and ``removeOrphanedTemporaryFiles(olderThan:)`` deletes.
///
/// **Modes.** Files are created with ``SharingMode/fileMode`` and directories with
/// ``SharingMode/directoryMode``, set with `fchmod` so that the umask does not matter.
///
/// **Thread safety.** The struct is immutable and `Sendable`; share it between threads and tasks
/// freely. Each call opens (and closes) its own file descriptors, so concurrent calls — also from
/// other processes — do not interfere beyond the usual last-writer-wins of whole files.
public struct SharedFiles: Sendable {
    /// The absolute, lexically normalised path of the shared directory.
    public let directory: String

    /// The modes given to new files and directories.
    public let sharing: SharingMode

    /// The container whose `Files/` this is (its store and `Blobs/`), for the writes that record the
    /// manifest (issue 49; ``write(_:to:in:modified:)-(Data,_,_,_)``); `nil` for a directory of its own.
    let container: ContainerFiles?

    /// Wraps an existing directory.
    ///
    /// ```swift
    /// let files = try SharedFiles(directory: "/var/lib/kvstore/group.com.example.app/Files",
    ///                             sharing: .groupShared)
    /// ```
    ///
    /// - Parameters:
    ///   - directory: The shared directory. A relative path is resolved against the current
    ///     directory now, and the result is lexically normalised (as ``ContainerRoot`` does). The
    ///     directory must exist and must not itself be a symbolic link (links in its parent path
    ///     are followed as usual). It is not created, and its mode is not changed.
    ///   - sharing: The modes for new files and directories; ``SharingMode/privateToUser`` by default.
    /// - Throws: ``KVStoreError/invalidPath(_:reason:)`` when `directory` is empty, contains a NUL
    ///   or is a symbolic link; ``KVStoreError/io(operation:path:errno:)`` when it cannot be opened
    ///   as a directory (for example `ENOENT` or `ENOTDIR`).
    public init(directory: String, sharing: SharingMode = .privateToUser) throws {
        if directory.isEmpty {
            throw KVStoreError.invalidPath(directory, reason: "the shared directory path is empty")
        }
        if directory.utf8.contains(0) {
            throw KVStoreError.invalidPath(directory, reason: "the shared directory path contains a NUL character")
        }
        let absolute = try ContainerRoot.resolve(explicit: directory, environment: [:])
        let fd = try SafePath.openRoot(absolute)
        close(fd)
        self.directory = absolute
        self.sharing = sharing
        self.container = nil
    }

    /// A container's `Files/`: writes under a replicated prefix record the manifest in `store`, and
    /// stage their bytes in `blobs` (``ContainerLayout/blobs``).
    init(directory: String, sharing: SharingMode, store: Store, blobs: String) throws {
        let plain = try SharedFiles(directory: directory, sharing: sharing)
        self.directory = plain.directory
        self.sharing = sharing
        self.container = ContainerFiles(store: store, blobs: blobs)
    }

    // MARK: - Paths

    /// Checks a relative path and returns its components.
    ///
    /// A path is rejected when it is empty or absolute; has a `.` or `..` component or an empty one
    /// (`a//b`, a trailing `/`); contains a NUL, a backslash or a control character (U+0000–U+001F,
    /// U+007F); has a component whose NFKC normalisation is `.` or `..` or contains `/` or `\`
    /// (fullwidth `．／＼` and the like) or that contains a slash look-alike such as U+2215 or
    /// U+2044; has a component over 255 bytes; is over 1024 bytes; or has a component starting
    /// with `.kvtmp-` (reserved for temporary files). No file system access happens.
    ///
    /// ```swift
    /// try SharedFiles.validate("TrainerImages/a.png")  // ["TrainerImages", "a.png"]
    /// try SharedFiles.validate("../etc/passwd")        // throws invalidPath
    /// ```
    ///
    /// - Throws: ``KVStoreError/invalidPath(_:reason:)`` with a one-line reason naming the rule.
    @discardableResult
    public static func validate(_ path: String) throws -> [String] {
        try SafePath.components(of: path)
    }

    /// The file URL of a validated relative path inside ``directory``. The file need not exist.
    ///
    /// Hand the URL only to code that cannot use ``SharedFiles`` itself: unlike this type, most
    /// APIs follow symbolic links.
    ///
    /// ```swift
    /// let url = try files.url(for: "TrainerImages/a.png")  // file:///…/Files/TrainerImages/a.png
    /// ```
    ///
    /// - Throws: ``KVStoreError/invalidPath(_:reason:)`` as ``validate(_:)`` does.
    public func url(for path: String) throws -> URL {
        try Self.validate(path)
        return URL(fileURLWithPath: SafePath.join(directory, path), isDirectory: false)
    }

    // MARK: - Writing

    /// Atomically replaces (or creates) the file at `path` with `data`, creating missing
    /// intermediate directories.
    ///
    /// The bytes go to a new `.kvtmp-<name>-<pid>-<random>` file (``TemporaryFileName``) in the target's directory, which is given
    /// ``SharingMode/fileMode``, written in full, `fsync`ed and renamed over `path`; then the
    /// directory is `fsync`ed. On failure the temporary file is removed and the old contents (if
    /// any) stay in place.
    ///
    /// Under a replicated prefix of a container's `Files/` (issue 49), the write is a store
    /// transaction of its own that records the manifest entry, as ``write(_:to:in:modified:)-(Data,_,_,_)``
    /// does; write in the transaction of the record that names the file to publish both together.
    /// Called inside a transaction of the container's store, it records nothing (it cannot: write in
    /// that transaction instead).
    ///
    /// ```swift
    /// try files.write(Data("hello".utf8), to: "notes/today.txt")
    /// ```
    ///
    /// - Throws: ``KVStoreError/invalidPath(_:reason:)`` for a rejected path, a symbolic link at any
    ///   component or at `path` itself; ``KVStoreError/io(operation:path:errno:)`` when a system call
    ///   fails, including `EISDIR` when `path` is an existing directory and `ENOTDIR` when an
    ///   intermediate component is a file.
    public func write(_ data: Data, to path: String) throws {
        try data.withUnsafeBytes { bytes in
            if try recordingManifest(bytes, to: path) { return }
            try writeBytes(bytes, to: path)
        }
    }

    /// Atomically replaces (or creates) the file at `path` with `bytes`; see
    /// ``write(_:to:)-(Data,_)``.
    ///
    /// ```swift
    /// try files.write([0x89, 0x50, 0x4E, 0x47], to: "TrainerImages/header.bin")
    /// ```
    ///
    /// - Throws: As ``write(_:to:)-(Data,_)``.
    public func write(_ bytes: [UInt8], to path: String) throws {
        try bytes.withUnsafeBytes { bytes in
            if try recordingManifest(bytes, to: path) { return }
            try writeBytes(bytes, to: path)
        }
    }

    private func writeBytes(_ bytes: UnsafeRawBufferPointer, to path: String) throws {
        try publish(to: path, temporaryName: { TemporaryFileName.make(for: SafePath.split(path).last ?? "") },
                    attempts: 16, replacing: true) { fd, _ in
            try SystemCall.writeAll(fd, bytes, path: SafePath.join(directory, path))
        }
    }

    // MARK: - Reading

    /// Returns the contents of the regular file at `path`.
    ///
    /// The file is opened with `O_NOFOLLOW` (and `O_NONBLOCK`, so that a FIFO planted at `path`
    /// cannot block the call) and must be a regular file.
    ///
    /// ```swift
    /// let data = try files.read("TrainerImages/a.png", maxSize: 8 << 20)
    /// ```
    ///
    /// - Parameter maxSize: The largest file accepted, in bytes (64 MiB by default).
    /// - Throws: ``KVStoreError/fileNotFound(path:)`` when the file or a directory on the way is
    ///   missing; ``KVStoreError/valueTooLarge(what:size:limit:hint:)`` when the file is bigger than
    ///   `maxSize`; ``KVStoreError/invalidPath(_:reason:)`` for a rejected path, a symbolic link on
    ///   the way or at `path`, or a special file; ``KVStoreError/io(operation:path:errno:)`` for
    ///   system-call failures (`EISDIR` for a directory).
    public func read(_ path: String, maxSize: Int = 64 << 20) throws -> Data {
        let components = try Self.validate(path)
        guard let name = components.last else { throw KVStoreError.invalidPath(path, reason: "the path is empty") }
        let limit = max(0, maxSize)
        let parent = try SafePath.walk(
            from: SafePath.openRoot(directory), through: components.dropLast(),
            createMode: nil, path: path, directory: directory)
        defer { close(parent) }
        let full = SafePath.join(directory, path)

        let fd = SystemCall.retry { openat(parent, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) }
        if fd < 0 {
            let code = errno
            if code == ENOENT { throw KVStoreError.fileNotFound(path: path) }
            if code == ELOOP, let st = SafePath.lstat(at: parent, name), SafePath.isType(st, S_IFLNK) {
                throw KVStoreError.invalidPath(path, reason: "'\(path)' is a symbolic link")
            }
            // A socket (ENXIO) or a device whose driver is absent: say what it is.
            if code == ENXIO || code == ENODEV, let st = SafePath.lstat(at: parent, name), !SafePath.isType(st, S_IFREG) {
                throw KVStoreError.invalidPath(path, reason: "'\(path)' is \(FilePolicy.kind(st)), not a regular file")
            }
            throw KVStoreError.io(operation: "open", path: full, errno: code)
        }
        defer { close(fd) }

        var st = stat()
        if fstat(fd, &st) != 0 {
            throw KVStoreError.io(operation: "fstat", path: full, errno: errno)
        }
        if SafePath.isType(st, S_IFDIR) {
            throw KVStoreError.io(operation: "read", path: full, errno: EISDIR)
        }
        guard SafePath.isType(st, S_IFREG) else {
            throw KVStoreError.invalidPath(path, reason: "'\(path)' is \(FilePolicy.kind(st)), not a regular file")
        }
        // Of an owner (or, group-shared, a group) the sharing mode accepts, as every file of a container.
        let directoryStatus = sharing == .groupShared ? try FilePolicy.status(parent, path: full) : stat()
        try FilePolicy(sharing: sharing, directory: directoryStatus).checkFile(fd, st, path: full, writing: false)
        let expected = Int(st.st_size)
        if expected > limit {
            throw Self.tooLarge(path, size: expected, limit: limit)
        }

        var data = Data(count: expected)
        var filled = 0
        while filled < expected {
            let n = data.withUnsafeMutableBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return 0 }
                return Glibc.read(fd, base + filled, expected - filled)
            }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw KVStoreError.io(operation: "read", path: full, errno: errno)
            }
            if n == 0 { break }  // the file shrank since fstat
            filled += n
        }
        if filled < expected { data.count = filled }

        // The file may have grown since fstat (someone appending in place); keep reading to EOF.
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw KVStoreError.io(operation: "read", path: full, errno: errno)
            }
            if n == 0 { break }
            if data.count + n > limit {
                throw Self.tooLarge(path, size: data.count + n, limit: limit)
            }
            data.append(contentsOf: chunk[0..<n])
        }
        return data
    }

    private static func tooLarge(_ path: String, size: Int, limit: Int) -> KVStoreError {
        .valueTooLarge(what: "file '\(path)'", size: size, limit: limit, hint: "pass a larger maxSize to read it")
    }

    /// Whether a regular file or a directory exists at `path`.
    ///
    /// Returns `false` for an invalid path, for a symbolic link (at `path` or on the way), for other
    /// special files, and when the check itself fails. Never throws.
    ///
    /// ```swift
    /// if !files.exists("TrainerImages/a.png") { try files.write(png, to: "TrainerImages/a.png") }
    /// ```
    public func exists(_ path: String) -> Bool {
        guard let components = try? Self.validate(path), let name = components.last,
              let root = try? SafePath.openRoot(directory),
              let parent = try? SafePath.walk(
                  from: root, through: components.dropLast(), createMode: nil, path: path, directory: directory)
        else { return false }
        defer { close(parent) }
        guard let st = SafePath.lstat(at: parent, name) else { return false }
        return SafePath.isType(st, S_IFREG) || SafePath.isType(st, S_IFDIR)
    }

    // MARK: - Listing

    /// Lists the regular files below a directory, sorted.
    ///
    /// Every returned path is relative to ``directory`` (not to the `directory` argument), so it can
    /// be passed straight to ``read(_:maxSize:)`` or ``remove(_:)``. Non-recursive listings also
    /// include the immediate subdirectories, with a trailing `/`. Symbolic links and other special
    /// files are left out and never followed, as are temporary `.kvtmp-*` files and entries whose
    /// names this API could not address (for example names containing a backslash).
    ///
    /// ```swift
    /// try files.list()                                // ["TrainerImages/", "readme.txt"]
    /// try files.list("TrainerImages")                 // ["TrainerImages/a.png", "TrainerImages/old/"]
    /// try files.list(recursive: true)                 // ["TrainerImages/a.png", "TrainerImages/old/b.png", "readme.txt"]
    /// ```
    ///
    /// - Parameters:
    ///   - directory: A relative directory path; `""` (the default) for the shared directory itself.
    ///   - recursive: Whether to descend into subdirectories (then only files are returned).
    /// - Throws: ``KVStoreError/fileNotFound(path:)`` when `directory` does not exist;
    ///   ``KVStoreError/invalidPath(_:reason:)`` for a rejected path or a symbolic link on the way;
    ///   ``KVStoreError/io(operation:path:errno:)`` for system-call failures (`ENOTDIR` when
    ///   `directory` is a file).
    public func list(_ directory: String = "", recursive: Bool = false) throws -> [String] {
        let components = directory.isEmpty ? [] : try Self.validate(directory)
        let fd = try SafePath.walk(
            from: SafePath.openRoot(self.directory), through: components[...],
            createMode: nil, path: directory, directory: self.directory)
        defer { close(fd) }
        var result: [String] = []
        try collect(fd, prefix: directory, recursive: recursive, into: &result)
        return result.sorted()
    }

    private func collect(_ fd: Int32, prefix: String, recursive: Bool, into result: inout [String]) throws {
        for entry in try SafePath.entries(of: fd, displayPath: SafePath.join(directory, prefix)) {
            guard SafePath.isAddressable(entry.name) else { continue }
            let relative = prefix.isEmpty ? entry.name : prefix + "/" + entry.name
            guard relative.utf8.count <= SafePath.maxPathBytes else { continue }
            if entry.isRegularFile {
                result.append(relative)
            } else if entry.isDirectory {
                if !recursive {
                    result.append(relative + "/")
                    continue
                }
                let child = SystemCall.retry { openat(fd, entry.name, SafePath.directoryFlags) }
                if child < 0 {
                    let code = errno
                    if code == ENOENT || code == ELOOP || code == ENOTDIR { continue }  // changed meanwhile
                    throw KVStoreError.io(operation: "open directory", path: SafePath.join(directory, relative), errno: code)
                }
                defer { close(child) }
                try collect(child, prefix: relative, recursive: true, into: &result)
            }
        }
    }

    // MARK: - Removing

    /// Removes the file, symbolic link or empty directory at `path`.
    ///
    /// A symbolic link at `path` itself is removed (the link, never its target); symbolic links
    /// on the way to `path` are refused. The containing directory is `fsync`ed afterwards.
    ///
    /// ```swift
    /// try files.remove("TrainerImages/a.png")
    /// try files.remove("TrainerImages")  // once it is empty
    /// ```
    ///
    /// - Throws: ``KVStoreError/fileNotFound(path:)`` when nothing is at `path`;
    ///   ``KVStoreError/invalidPath(_:reason:)`` for a rejected path or a symbolic link on the way;
    ///   ``KVStoreError/io(operation:path:errno:)`` for system-call failures (`ENOTEMPTY` for a
    ///   directory that is not empty).
    public func remove(_ path: String) throws {
        let components = try Self.validate(path)
        guard let name = components.last else { throw KVStoreError.invalidPath(path, reason: "the path is empty") }
        let parent = try SafePath.walk(
            from: SafePath.openRoot(directory), through: components.dropLast(),
            createMode: nil, path: path, directory: directory)
        defer { close(parent) }
        let full = SafePath.join(directory, path)
        guard let st = SafePath.lstat(at: parent, name) else {
            let code = errno
            if code == ENOENT { throw KVStoreError.fileNotFound(path: path) }
            throw KVStoreError.io(operation: "stat", path: full, errno: code)
        }
        let flags: Int32 = SafePath.isType(st, S_IFDIR) ? AT_REMOVEDIR : 0
        if SystemCall.retry({ unlinkat(parent, name, flags) }) != 0 {
            let code = errno
            if code == ENOENT { throw KVStoreError.fileNotFound(path: path) }
            throw KVStoreError.io(operation: "remove", path: full, errno: code)
        }
        let code = SafePath.syncDirectory(parent)
        if code != 0 {
            throw KVStoreError.io(operation: "fsync directory", path: SafePath.join(directory, components.dropLast().joined(separator: "/")), errno: code)
        }
    }

    /// Deletes temporary `.kvtmp-*` files left behind by writers that crashed, anywhere below
    /// ``directory``, and returns how many were deleted.
    ///
    /// Only regular files whose modification time is at least `olderThan` seconds in the past are
    /// deleted, so that the temporary files of writes still in progress (in this or another process)
    /// survive; keep `olderThan` well above the time one write can take. Symbolic links are not
    /// followed. Files that vanish meanwhile are skipped.
    ///
    /// ```swift
    /// let removed = try files.removeOrphanedTemporaryFiles()  // older than a minute
    /// ```
    ///
    /// - Throws: ``KVStoreError/invalidPath(_:reason:)`` when ``directory`` has been replaced by a
    ///   symbolic link; ``KVStoreError/io(operation:path:errno:)`` when a directory cannot be read or
    ///   a file cannot be removed.
    @discardableResult
    public func removeOrphanedTemporaryFiles(olderThan age: TimeInterval = 60) throws -> Int {
        try removeTemporaryFiles(olderThan: age, recursive: true).count
    }

    /// Which temporary files ``removeTemporaryFiles(in:olderThan:recursive:whenOwnerIsGone:everyOwner:matching:)``
    /// removes.
    ///
    /// The one orphan sweeper of the package: a temporary file (see ``TemporaryFileName``) whose target
    /// satisfies `matching` is removed when it is older than `age` seconds, or when `whenOwnerIsGone`
    /// and the process named in it no longer exists, or when `everyOwner` (the caller holds the lock
    /// every writer of such files holds, so none can be in progress). Returns the relative paths
    /// removed, sorted. Links are never followed; files that vanish meanwhile are skipped.
    package func removeTemporaryFiles(
        in directory: String = "", olderThan age: TimeInterval, recursive: Bool,
        whenOwnerIsGone: Bool = false, everyOwner: Bool = false, matching: (String) -> Bool = { _ in true }
    ) throws -> [String] {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let cutoff = Double(now.tv_sec) + Double(now.tv_nsec) / 1e9 - (age.isFinite ? max(0, age) : 0)
        let components = directory.isEmpty ? [] : try Self.validate(directory)
        let fd = try SafePath.walk(
            from: SafePath.openRoot(self.directory), through: components[...],
            createMode: nil, path: directory, directory: self.directory)
        defer { close(fd) }
        var removed: [String] = []
        let rule = SweepRule(cutoff: cutoff, recursive: recursive, whenOwnerIsGone: whenOwnerIsGone, everyOwner: everyOwner)
        try sweep(fd, prefix: directory, rule: rule, matching: matching, into: &removed)
        return removed.sorted()
    }

    private struct SweepRule {
        var cutoff: Double
        var recursive: Bool
        var whenOwnerIsGone: Bool
        var everyOwner: Bool

        func isOrphan(_ entry: SafePath.Entry, matching: (String) -> Bool) -> Bool {
            guard let (target, pid) = TemporaryFileName.parse(entry.name), matching(target) else { return false }
            if everyOwner { return true }
            let mtime = Double(entry.status.st_mtim.tv_sec) + Double(entry.status.st_mtim.tv_nsec) / 1e9
            if mtime <= cutoff { return true }
            return whenOwnerIsGone && pid.map { !SystemCall.isProcessAlive($0) } == true
        }
    }

    private func sweep(_ fd: Int32, prefix: String, rule: SweepRule, matching: (String) -> Bool, into removed: inout [String]) throws {
        for entry in try SafePath.entries(of: fd, displayPath: SafePath.join(directory, prefix)) {
            let relative = prefix.isEmpty ? entry.name : prefix + "/" + entry.name
            if entry.isRegularFile {
                guard rule.isOrphan(entry, matching: matching) else { continue }
                if SystemCall.retry({ unlinkat(fd, entry.name, 0) }) == 0 {
                    removed.append(relative)
                } else if errno != ENOENT {
                    throw KVStoreError.io(operation: "remove temporary file", path: SafePath.join(directory, relative), errno: errno)
                }
            } else if entry.isDirectory && rule.recursive {
                let child = SystemCall.retry { openat(fd, entry.name, SafePath.directoryFlags) }
                if child < 0 {
                    let code = errno
                    if code == ENOENT || code == ELOOP || code == ENOTDIR { continue }
                    throw KVStoreError.io(operation: "open directory", path: SafePath.join(directory, relative), errno: code)
                }
                defer { close(child) }
                try sweep(child, prefix: relative, rule: rule, matching: matching, into: &removed)
            }
        }
    }
}
