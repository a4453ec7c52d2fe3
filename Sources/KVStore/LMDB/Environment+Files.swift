internal import CLMDB
#if canImport(Glibc)
import Glibc
#endif

/// How an environment's files are opened so that nothing planted in its directory is followed.
///
/// LMDB opens `data.mdb` (twice: once more for meta-page writes) and `lock.mdb` by path, with
/// `O_CREAT` and without `O_NOFOLLOW`: a symbolic link planted at `Store/lock.mdb` by any process that
/// can write the directory would make LMDB truncate and overwrite the link's target with its lock
/// table, and a check of the path beforehand would only narrow that window. So KVStore opens the files
/// itself, with `openat(… O_NOFOLLOW)` under a descriptor of the directory, checks what it opened
/// (``FilePolicy``), and hands LMDB a private directory whose entries are links to
/// `/proc/self/fd/N`: each open LMDB makes reaches exactly the file KVStore checked, whatever happens
/// to the container's directory meanwhile. After the open, LMDB's data descriptor (`mdb_env_get_fd`)
/// and the directory's entries are compared with the checked files once more.
///
/// The descriptor of `lock.mdb` stays open for the environment's life: LMDB holds `fcntl` locks on
/// that file, and POSIX drops every lock a process holds on a file when *any* descriptor of it closes.
struct EnvironmentFiles {
    /// The status of the directory (or, for an immutable file, of the file): the registry's key.
    let identity: stat
    /// The data file, for ``MetaPages`` and the size check; closed by ``closeData()``.
    private(set) var dataFD: Int32
    /// `lock.mdb`, kept open until the environment closes; -1 for an immutable file.
    let lockFD: Int32
    let dataPath: String
    let lockPath: String

    /// A key naming the file or directory itself, whatever path reached it.
    static func key(_ st: stat) -> String { "\(st.st_dev):\(st.st_ino)" }

    /// Opens and checks `directory/data.mdb` and `directory/lock.mdb`, creating them unless read-only.
    /// `identity` is the directory's status, already taken by the caller.
    static func openDirectory(_ dirFD: Int32, identity: stat, path directory: String, configuration: Environment.Configuration) throws -> EnvironmentFiles {
        let policy = FilePolicy(fileMode: configuration.fileMode, directory: identity, repairs: !configuration.readOnly)
        let dataPath = directory + "/data.mdb", lockPath = directory + "/lock.mdb"
        let data: Int32
        do {
            data = try SafePath.openChecked(dirFD, "data.mdb", writable: !configuration.readOnly,
                                            create: !configuration.readOnly, policy: policy, path: dataPath).fd
        } catch KVStoreError.io(_, _, ENOENT) where configuration.readOnly {
            // As LMDB reports a read-only open of a directory without a store.
            throw LMDBError(rawValue: ENOENT)
        }
        let lock: Int32
        do {
            // Readers register in the lock file, so even a read-only process opens it for writing.
            lock = try SafePath.openChecked(dirFD, "lock.mdb", writable: true, create: true, policy: policy, path: lockPath).fd
        } catch {
            close(data)
            throw error
        }
        return EnvironmentFiles(identity: identity, dataFD: data, lockFD: lock, dataPath: dataPath, lockPath: lockPath)
    }

    /// Checks the immutable file (a single-file copy) open at `fd`, whose status the caller took, and which
    /// this value then owns.
    static func immutableFile(_ fd: Int32, status st: stat, path: String) throws -> EnvironmentFiles {
        guard st.st_mode & S_IFMT == S_IFREG else {
            throw KVStoreError.invalidPath(path, reason: "a store copy is a regular file")
        }
        return EnvironmentFiles(identity: st, dataFD: fd, lockFD: -1, dataPath: path, lockPath: "")
    }

    /// Runs `mdb_env_open` on `handle` so that every file LMDB opens is one of the checked
    /// descriptors, then checks that LMDB's data descriptor is that file and, for a directory, that
    /// the directory still holds the checked files.
    func openLMDB(_ handle: OpaquePointer, flags: UInt32, mode: mode_t, directoryFD: Int32?) throws {
        if lockFD < 0 {
            // One file, no lock file (MDB_NOSUBDIR|MDB_NOLOCK): the magic link itself is the path.
            try LMDBError.check(mdb_env_open(handle, Self.procPath(dataFD), flags, mode))
        } else {
            try Self.withPrivateDirectory(linking: ["data.mdb": dataFD, "lock.mdb": lockFD]) { shadow in
                try LMDBError.check(mdb_env_open(handle, shadow, flags, mode))
            }
        }
        let data = try FilePolicy.status(dataFD, path: dataPath)
        var lmdbFD: Int32 = -1
        try LMDBError.check(mdb_env_get_fd(handle, &lmdbFD))
        guard FilePolicy.sameFile(try FilePolicy.status(lmdbFD, path: dataPath), data) else {
            throw KVStoreError.unsafeFile(path: dataPath, reason: "LMDB opened another file than the one checked")
        }
        guard let directoryFD else { return }
        let lock = try FilePolicy.status(lockFD, path: lockPath)
        for (name, expected, path) in [("data.mdb", data, dataPath), ("lock.mdb", lock, lockPath)] {
            guard let now = SafePath.lstat(at: directoryFD, name), FilePolicy.sameFile(now, expected) else {
                throw KVStoreError.unsafeFile(path: path, reason: "it was replaced while the store was being opened")
            }
        }
    }

    /// Closes the data descriptor (LMDB holds its own; the locks are on `lock.mdb`).
    mutating func closeData() {
        if dataFD >= 0 { close(dataFD) }
        dataFD = -1
    }

    /// Closes everything; for a failed open. An open environment closes ``lockFD`` in its deinit,
    /// after `mdb_env_close`.
    mutating func closeAll() {
        closeData()
        if lockFD >= 0 { close(lockFD) }
    }

    static func procPath(_ fd: Int32) -> String { "/proc/self/fd/\(fd)" }

    /// The path the kernel has for the directory open at `fd` (`readlink` of its `/proc/self/fd`
    /// entry); `nil` if it cannot tell.
    static func realPath(of fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = buffer.withUnsafeMutableBufferPointer { raw in
            raw.withMemoryRebound(to: CChar.self) { readlink(procPath(fd), $0.baseAddress!, $0.count - 1) }
        }
        guard count > 0, buffer[0] == UInt8(ascii: "/") else { return nil }
        let path = String(decoding: buffer[0..<count], as: UTF8.self)
        return path.hasSuffix(" (deleted)") ? nil : path
    }

    /// Runs `body` with the path of a new directory, private to this process's user, holding one
    /// symbolic link to `/proc/self/fd/N` per entry of `links`; removes it afterwards. Nobody else can
    /// write the directory (`mkdtemp` makes it `0700` under the sticky temporary directory), so
    /// nobody can change where its links lead.
    static func withPrivateDirectory<R>(linking links: [String: Int32], _ body: (String) throws -> R) throws -> R {
        var procStatus = stat()
        guard stat("/proc/self/fd", &procStatus) == 0 else {
            throw KVStoreError.io(operation: "find /proc/self/fd (LMDB's files are opened through it)", path: "/proc/self/fd", errno: errno)
        }
        var candidates: [String] = []
        if let tmp = getenv("TMPDIR").map({ String(cString: $0) }), tmp.hasPrefix("/") { candidates.append(tmp) }
        candidates += ["/tmp", "/dev/shm"]
        var lastError: Int32 = ENOENT
        var made: String?
        for base in candidates {
            var template = Array((base + "/kvstore-open-XXXXXX").utf8CString)
            if let result = mkdtemp(&template) { made = String(cString: result); break }
            lastError = errno
        }
        guard let directory = made else {
            throw KVStoreError.io(operation: "create a private directory to open the store through", path: candidates.joined(separator: ", "), errno: lastError)
        }
        var created: [String] = []
        defer {
            for path in created { unlink(path) }
            rmdir(directory)
        }
        for (name, fd) in links {
            let path = directory + "/" + name
            guard symlink(procPath(fd), path) == 0 else {
                throw KVStoreError.io(operation: "link", path: path, errno: errno)
            }
            created.append(path)
        }
        return try body(directory)
    }
}
