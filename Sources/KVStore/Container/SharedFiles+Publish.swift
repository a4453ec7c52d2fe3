#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

extension SharedFiles {
    /// Atomically publishes the file at `path` with contents that `fill` writes into a new temporary
    /// file of your naming, next to the target.
    ///
    /// This is the machinery of ``write(_:to:)-(Data,_)``, opened up for publishers that need to
    /// choose the temporary name (to carry their process ID, so that a sweeper can tell orphans from
    /// files still being written) or that let another library fill the file by path (an LMDB copy):
    ///
    /// 1. the directories up to `path` are walked without following symbolic links (missing ones are
    ///    created with ``SharingMode/directoryMode``);
    /// 2. `temporaryName` is created in the target's directory with `O_CREAT|O_EXCL|O_NOFOLLOW`, open
    ///    for reading and writing, and given ``SharingMode/fileMode``;
    /// 3. `fill` runs with the descriptor and the temporary file's absolute path;
    /// 4. the file is `fsync`ed and closed, then renamed onto `path` (or, with `replacing: false`,
    ///    hard-linked to `path`, which fails if `path` exists, and unlinked); then the directory is
    ///    `fsync`ed.
    ///
    /// Readers in any process see the old file or the new one, never a part of one. If anything fails
    /// (including `fill` throwing), the temporary file is removed and `path` is left as it was.
    ///
    /// ```swift
    /// let temporary = TemporaryFileName.make(for: "feed.json")
    /// try files.publish(to: "feeds/feed.json", temporaryName: temporary) { fd, _ in
    ///     _ = json.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    /// }
    /// ```
    ///
    /// Thread safety: each call opens its own descriptors; calls with distinct temporary names may run
    /// concurrently in any number of threads and processes. `fill` runs on the calling thread, and the
    /// descriptor is valid only while it runs: do not close it.
    ///
    /// - Parameters:
    ///   - path: The relative path to publish, as for ``write(_:to:)-(Data,_)``.
    ///   - temporaryName: One path component, the temporary file's name in the target's directory, from
    ///     ``TemporaryFileName/make(for:pid:)`` (so that listings skip it and sweepers recognise it). It
    ///     must not exist.
    ///   - replacing: When `false`, publishing fails with `EEXIST` instead of replacing an existing file.
    /// - Returns: What `fill` returned.
    /// - Throws: ``KVStoreError/invalidPath(_:reason:)`` for a rejected path or temporary name or a
    ///   symbolic link on the way or at `path`; ``KVStoreError/io(operation:path:errno:)`` when a system
    ///   call fails (`EEXIST` when the temporary name is taken, or `path` exists and `replacing` is
    ///   `false`; `EISDIR` when `path` is a directory); whatever `fill` throws.
    package func publish<R>(
        to path: String, temporaryName: String, replacing: Bool = true,
        _ fill: (_ descriptor: Int32, _ temporaryPath: String) throws -> R
    ) throws -> R {
        if temporaryName.utf8.contains(SafePath.slash) || temporaryName.utf8.contains(0)
            || temporaryName.utf8.count > SafePath.maxComponentBytes || TemporaryFileName.parse(temporaryName) == nil {
            throw KVStoreError.invalidPath(temporaryName, reason: "a temporary name is one path component starting with '\(TemporaryFileName.prefix)' (see TemporaryFileName)")
        }
        return try publish(to: path, temporaryName: { temporaryName }, attempts: 1, replacing: replacing, fill)
    }

    /// Atomically replaces (or creates) the file at `path` with `bytes`, going through a temporary file
    /// named `temporaryName`. See ``publish(to:temporaryName:replacing:_:)``.
    ///
    /// ```swift
    /// try files.write(payload, to: "feeds/today.feed", temporaryName: TemporaryFileName.make(for: "today.feed"))
    /// ```
    ///
    /// - Throws: As ``publish(to:temporaryName:replacing:_:)``.
    package func write(_ bytes: [UInt8], to path: String, temporaryName: String) throws {
        try publish(to: path, temporaryName: temporaryName) { fd, temporaryPath in
            try bytes.withUnsafeBytes { try SystemCall.writeAll(fd, $0, path: temporaryPath) }
        }
    }

    /// The one implementation behind every atomic write of ``SharedFiles``. `temporaryName` is asked
    /// for a new name up to `attempts` times while creating the file fails with `EEXIST`. With
    /// `linking` (a directory descriptor and a name in it), the temporary file is a hard link to that
    /// file, already written and synced, instead of a new file for `fill` (which is then called with
    /// the descriptor -1, after the rename); where hard links are refused (another file system), its
    /// bytes are copied into a new file before `fill` runs.
    func publish<R>(
        to path: String, temporaryName: () -> String, attempts: Int, replacing: Bool,
        linking source: (directory: Int32, name: String)? = nil,
        _ fill: (Int32, String) throws -> R
    ) throws -> R {
        let components = try Self.validate(path)
        guard let name = components.last else { throw KVStoreError.invalidPath(path, reason: "the path is empty") }
        let parent = try SafePath.walk(
            from: SafePath.openRoot(directory), through: components.dropLast(),
            createMode: sharing.directoryMode, path: path, directory: directory)
        defer { close(parent) }
        let full = SafePath.join(directory, path)
        let parentPath = SafePath.join(directory, components.dropLast().joined(separator: "/"))

        if let existing = SafePath.lstat(at: parent, name) {
            if SafePath.isType(existing, S_IFLNK) {
                throw KVStoreError.invalidPath(path, reason: "'\(path)' is a symbolic link")
            }
            if SafePath.isType(existing, S_IFDIR) {
                throw KVStoreError.io(operation: "write", path: full, errno: EISDIR)
            }
            if !replacing {
                throw KVStoreError.io(operation: "publish", path: full, errno: EEXIST)
            }
        }

        // Create the temporary file; ask for another name on the (unlikely) collision.
        var temporary = ""
        var fd: Int32 = -1
        var linked = false
        for _ in 0..<max(1, attempts) {
            temporary = temporaryName()
            if let source, SystemCall.retry({ linkat(source.directory, source.name, parent, temporary, 0) }) == 0 {
                linked = true
                break
            }
            if let source, errno != EXDEV && errno != EPERM && errno != EMLINK && errno != EEXIST {
                throw KVStoreError.io(operation: "link \(source.name) as", path: SafePath.join(parentPath, temporary), errno: errno)
            }
            fd = SystemCall.retry {
                openat(parent, temporary, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            }
            if fd >= 0 || errno != EEXIST { break }
        }
        if linked {
            // The linked file was written and synced by its own publisher: only the rename is left.
            do {
                if !replacing {
                    try Self.linkWithoutReplacing(parent, temporary, name, full: full)
                } else if SystemCall.retry({ renameat(parent, temporary, parent, name) }) != 0 {
                    throw KVStoreError.io(operation: "rename temporary file onto", path: full, errno: errno)
                }
            } catch {
                _ = unlinkat(parent, temporary, 0)
                throw error
            }
            let code = SafePath.syncDirectory(parent)
            if code != 0 { throw KVStoreError.io(operation: "fsync directory", path: parentPath, errno: code) }
            return try fill(-1, full)
        }
        if fd < 0 {
            throw KVStoreError.io(operation: "create temporary file", path: SafePath.join(parentPath, temporary), errno: errno)
        }

        var open = true
        let result: R
        do {
            if SystemCall.retry({ fchmod(fd, sharing.fileMode) }) != 0 {
                throw KVStoreError.io(operation: "chmod", path: full, errno: errno)
            }
            if let source {
                try Self.copy(from: source, into: fd, path: full)
            }
            result = try fill(fd, SafePath.join(parentPath, temporary))
            if SystemCall.retry({ fsync(fd) }) != 0 {
                throw KVStoreError.io(operation: "fsync", path: full, errno: errno)
            }
            open = false
            if close(fd) != 0 && errno != EINTR {  // the fd is released even when close fails
                throw KVStoreError.io(operation: "close", path: full, errno: errno)
            }
            if replacing {
                if SystemCall.retry({ renameat(parent, temporary, parent, name) }) != 0 {
                    throw KVStoreError.io(operation: "rename temporary file onto", path: full, errno: errno)
                }
            } else {
                try Self.linkWithoutReplacing(parent, temporary, name, full: full)
            }
        } catch {
            if open { close(fd) }
            _ = unlinkat(parent, temporary, 0)
            throw error
        }
        let code = SafePath.syncDirectory(parent)
        if code != 0 {
            throw KVStoreError.io(operation: "fsync directory", path: parentPath, errno: code)
        }
        return result
    }

    /// Copies the regular file `source` (opened without following a link) into `fd`: where a hard link
    /// cannot be made.
    private static func copy(from source: (directory: Int32, name: String), into fd: Int32, path: String) throws {
        let input = SystemCall.retry { openat(source.directory, source.name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) }
        guard input >= 0 else { throw KVStoreError.io(operation: "open \(source.name) to copy it to", path: path, errno: errno) }
        defer { close(input) }
        var st = stat()
        guard fstat(input, &st) == 0, SafePath.isType(st, S_IFREG) else {
            throw KVStoreError.invalidPath(source.name, reason: "'\(source.name)' is not a regular file")
        }
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(input, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw KVStoreError.io(operation: "read \(source.name) to copy it to", path: path, errno: errno)
            }
            if n == 0 { return }
            try chunk.withUnsafeBytes { try SystemCall.writeAll(fd, UnsafeRawBufferPointer(rebasing: $0[0..<n]), path: path) }
        }
    }

    /// Gives the temporary file its final name unless that name exists: `linkat` fails atomically with
    /// `EEXIST` where `renameat` would replace. On file systems without hard links, checks and renames.
    private static func linkWithoutReplacing(_ parent: Int32, _ temporary: String, _ name: String, full: String) throws {
        if SystemCall.retry({ linkat(parent, temporary, parent, name, 0) }) == 0 {
            _ = unlinkat(parent, temporary, 0)  // the published name holds the file now
            return
        }
        let code = errno
        guard code == EPERM || code == ENOTSUP || code == EOPNOTSUPP || code == EMLINK else {
            throw KVStoreError.io(operation: "publish", path: full, errno: code)
        }
        if SafePath.lstat(at: parent, name) != nil {
            throw KVStoreError.io(operation: "publish", path: full, errno: EEXIST)
        }
        if SystemCall.retry({ renameat(parent, temporary, parent, name) }) != 0 {
            throw KVStoreError.io(operation: "rename temporary file onto", path: full, errno: errno)
        }
    }
}
