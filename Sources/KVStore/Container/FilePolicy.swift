#if canImport(Glibc)
import Glibc
#endif

/// What a container's own files and directories must look like, checked on the descriptor that was
/// opened (`fstat`), never on a path: every process sharing a container may be buggy or hostile, and
/// anything that can write a container directory can plant a link, a hard link or a file with a
/// hostile owner or mode in it.
///
/// The rules, for the sharing mode the files were opened with (see ``SharingMode`` and the DocC
/// article "Sharing a store between processes"):
///
/// | what | private to the user | group-shared |
/// |---|---|---|
/// | a symbolic link | refused | refused |
/// | anything but a regular file (a FIFO, a device, a directory) where a file belongs | refused | refused |
/// | a file with a second hard link | refused | refused |
/// | owner | this user, else refused | any member; the group must be the directory's, else refused |
/// | wider than the mode (`0666`, a directory writable by others) | repaired by the owner (`fchmod`), refused by anyone else | the same |
/// | narrower than the mode (a lock file that is not writable) | repaired by the owner, refused by anyone else | the same |
///
/// A repair is an `fchmod` on the descriptor, which only the owner (or root) may make. Nothing is ever
/// `chmod`ed by path.
struct FilePolicy: Sendable {
    /// The exact permission bits of a file: `0600` or `0660`.
    let fileMode: mode_t
    /// The exact permission bits (with setgid) of a directory: `0700` or `02770`.
    let directoryMode: mode_t
    /// In group-shared mode, the group every file and directory must have (that of the directory the
    /// container or store lives in); `nil` in private mode.
    let group: gid_t?

    /// The policy for files created with `fileMode` in a directory whose status is `directory`: group
    /// bits in `fileMode` mean group-shared.
    /// Whether a mode this process may change is repaired (`fchmod`). A read-only open repairs
    /// nothing: it accepts a mode narrower than the policy's as it is, and refuses a wider one, naming
    /// the repair, so that a command documented as writing nothing (`kvtool info`) changes no
    /// permission either.
    var repairs = true

    init(fileMode: mode_t, directory: stat, repairs: Bool = true) {
        self.repairs = repairs
        self.fileMode = fileMode & 0o777
        let shared = fileMode & 0o070 != 0
        directoryMode = shared ? 0o2770 : 0o700
        group = shared ? directory.st_gid : nil
    }

    init(sharing: SharingMode, directory: stat, repairs: Bool = true) {
        self.init(fileMode: sharing.fileMode, directory: directory, repairs: repairs)
    }

    var isGroupShared: Bool { group != nil }

    /// Checks the regular file open at `fd` (status `st`, path `path` for errors), and repairs its mode
    /// when this process owns it. Throws ``KVStoreError/unsafeFile(path:reason:)``.
    ///
    /// - Parameter writing: Whether the file is opened to be written or locked. A file opened only to be
    ///   read is checked for its type and owner (or group) alone: reading a second hard link, or a file
    ///   whose mode is wider, reaches nothing outside the container and writes nothing.
    func checkFile(_ fd: Int32, _ st: stat, path: String, writing: Bool = true) throws(KVStoreError) {
        guard st.st_mode & S_IFMT == S_IFREG else {
            throw .unsafeFile(path: path, reason: "it is \(Self.kind(st)), not a regular file")
        }
        try checkOwner(st, path: path)
        guard writing else { return }
        guard st.st_nlink == 1 else {
            throw .unsafeFile(path: path, reason: "it has \(st.st_nlink) hard links; a container's files have exactly one")
        }
        try repairMode(fd, st, wanted: fileMode, mask: 0o777, path: path)
    }

    /// Checks the directory open at `fd`, and repairs its mode when this process owns it.
    func checkDirectory(_ fd: Int32, _ st: stat, path: String) throws(KVStoreError) {
        guard st.st_mode & S_IFMT == S_IFDIR else {
            throw .unsafeFile(path: path, reason: "it is \(Self.kind(st)), not a directory")
        }
        try checkOwner(st, path: path)
        // The setgid bit is kept if present in private mode (harmless), required in group-shared mode.
        try repairMode(fd, st, wanted: directoryMode, mask: isGroupShared ? 0o2777 : 0o777, path: path)
    }

    /// Why the policy refuses the regular file whose status is `st` without opening it (its owner,
    /// group or a mode this process may not repair), or `nil` if it would accept it.
    func refusal(_ st: stat, path: String) -> KVStoreError? {
        do throws(KVStoreError) {
            try checkOwner(st, path: path)
            if st.st_mode & 0o777 != fileMode && st.st_uid != geteuid() && geteuid() != 0 {
                try repairMode(-1, st, wanted: fileMode, mask: 0o777, path: path)
            }
            return nil
        } catch {
            return error
        }
    }

    private func checkOwner(_ st: stat, path: String) throws(KVStoreError) {
        let me = geteuid()
        if let group {
            guard st.st_gid == group else {
                throw .unsafeFile(path: path, reason: "its group is \(st.st_gid), not the container's group \(group)")
            }
        } else if st.st_uid != me {
            throw .unsafeFile(path: path, reason: "it is owned by uid \(st.st_uid), not by this user (uid \(me)); a private container belongs to one user")
        }
    }

    private func repairMode(_ fd: Int32, _ st: stat, wanted: mode_t, mask: mode_t, path: String) throws(KVStoreError) {
        let actual = st.st_mode & mask
        guard actual != wanted else { return }
        let me = geteuid()
        guard st.st_uid == me || me == 0 else {
            let problem = actual & ~wanted & 0o777 != 0 ? "wider" : "narrower"
            throw .unsafeFile(path: path, reason: "its mode is \(Self.octal(actual)), \(problem) than \(Self.octal(wanted)), and only its owner (uid \(st.st_uid)) may change it")
        }
        guard repairs else {
            // Narrower: usable as it is for reading (or the open itself fails). Wider: not repaired here.
            guard actual & ~wanted == 0 else {
                throw .unsafeFile(path: path, reason: "its mode is \(Self.octal(actual)), wider than \(Self.octal(wanted)), and a read-only open changes nothing: open the container for writing once (`kvtool repair`) to narrow it")
            }
            return
        }
        if SystemCall.retry({ fchmod(fd, wanted) }) != 0 {
            throw .io(operation: "set permissions of", path: path, errno: errno)
        }
    }

    static func octal(_ mode: mode_t) -> String { "0" + String(mode, radix: 8) }

    static func kind(_ st: stat) -> String {
        switch st.st_mode & S_IFMT {
        case S_IFLNK: "a symbolic link"
        case S_IFDIR: "a directory"
        case S_IFIFO: "a FIFO"
        case S_IFSOCK: "a socket"
        case S_IFCHR, S_IFBLK: "a device"
        case S_IFREG: "a regular file"
        default: "of an unknown type"
        }
    }

    /// `fstat`, as an `io` error on failure.
    static func status(_ fd: Int32, path: String) throws(KVStoreError) -> stat {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw .io(operation: "stat", path: path, errno: errno) }
        return st
    }

    /// Whether two statuses are of the same file.
    static func sameFile(_ a: stat, _ b: stat) -> Bool { a.st_dev == b.st_dev && a.st_ino == b.st_ino }
}

extension SafePath {
    /// Opens (creating with `O_EXCL` when `create`, then giving it `policy`'s mode with `fchmod`) the
    /// regular file `name` in the directory open at `parent` as ``ContainerFile`` opens every file of a
    /// container (never following a link, never blocking), and checks it with `policy`. Returns the descriptor (the caller closes it) and whether
    /// this call created the file.
    ///
    /// - Throws: ``KVStoreError/unsafeFile(path:reason:)`` for a link or anything `policy` refuses;
    ///   ``KVStoreError/io(operation:path:errno:)`` (`ENOENT` when it is missing and not `create`).
    static func openChecked(
        _ parent: Int32, _ name: String, writable: Bool, create: Bool, policy: FilePolicy, path: String
    ) throws(KVStoreError) -> (fd: Int32, created: Bool) {
        // Read-only, the store's files are still held to the whole policy (links, mode): LMDB maps them.
        try ContainerFile.open(name, in: parent, access: writable ? .readWrite : .read, create: create, policy: policy,
                               checksLinksAndMode: true, blocking: true, path: path)
    }

    /// Opens (creating with `mkdirat`, then giving it `policy`'s mode with `fchmod`) the directory
    /// `name` in the directory open at `parent` without following a link, and checks it with `policy`.
    /// The caller closes the result.
    static func openDirectoryChecked(
        _ parent: Int32, _ name: String, create: Bool, policy: FilePolicy, path: String
    ) throws(KVStoreError) -> Int32 {
        var made = false
        if create {
            made = SystemCall.retry { mkdirat(parent, name, 0o700) } == 0
            if !made && errno != EEXIST { throw .io(operation: "create directory", path: path, errno: errno) }
        }
        let fd = SystemCall.retry { openat(parent, name, directoryFlags) }
        if fd < 0 { throw openError(errno, parent: parent, name: name, path: path, expected: S_IFDIR) }
        do throws(KVStoreError) {
            if made {
                if SystemCall.retry({ fchmod(fd, policy.directoryMode) }) != 0 {
                    throw KVStoreError.io(operation: "set permissions of", path: path, errno: errno)
                }
                syncDirectory(parent)
            }
            try policy.checkDirectory(fd, try FilePolicy.status(fd, path: path), path: path)
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// A failed no-follow `openat`: a link, or anything else than the `expected` type planted there, is
    /// an ``KVStoreError/unsafeFile(path:reason:)``; anything else an `io` error.
    static func openError(_ code: Int32, parent: Int32, name: String, path: String, expected: mode_t) -> KVStoreError {
        // With a one-component name under a directory descriptor, O_NOFOLLOW fails with ELOOP only
        // for a link (which may be gone again by the time it could be looked at).
        if code == ELOOP {
            return .unsafeFile(path: path, reason: "it is a symbolic link, which is never followed or opened")
        }
        if code == ENOTDIR || code == ENXIO || code == EISDIR,
           let st = lstat(at: parent, name), st.st_mode & S_IFMT != expected {
            return .unsafeFile(path: path, reason: "it is \(FilePolicy.kind(st)), which is never followed or opened")
        }
        return .io(operation: "open", path: path, errno: code)
    }
}

extension SharingMode {
    /// Creates the directory `path` (one level, in a parent that must exist) unless it exists, never
    /// following a link planted at `path`: `mkdir`, then an `O_NOFOLLOW` open, `fchmod` to
    /// ``directoryMode`` if this call created it, and the checks of the sharing mode (see the DocC
    /// article "Sharing a store between processes"), with the parent's group as the container's group.
    ///
    /// - Throws: ``KVStoreError/invalidPath(_:reason:)`` when `path` is a symbolic link or not a
    ///   directory; ``KVStoreError/unsafeFile(path:reason:)`` for an owner or mode this process may not
    ///   accept or repair; ``KVStoreError/io(operation:path:errno:)``.
    package func makeDirectory(_ path: String) throws {
        let parts = SafePath.split(path)
        guard let name = parts.last, !name.isEmpty, name != ".", name != ".." else {
            throw KVStoreError.invalidPath(path, reason: "names no directory")
        }
        let parentPath = parts.count > 1 ? parts.dropLast().joined(separator: "/") : "."
        let parent = try SafePath.openRoot(parentPath.isEmpty ? "/" : parentPath, what: "parent directory")
        defer { close(parent) }
        if let st = SafePath.lstat(at: parent, name), st.st_mode & S_IFMT != S_IFDIR {
            throw KVStoreError.invalidPath(path, reason: "is \(FilePolicy.kind(st)), not a directory")
        }
        let policy = FilePolicy(sharing: self, directory: try FilePolicy.status(parent, path: parentPath))
        close(try SafePath.openDirectoryChecked(parent, name, create: true, policy: policy, path: path))
    }
}
