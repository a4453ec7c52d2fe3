import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An emulated iOS App Group container: one directory that several processes of one app share.
///
/// ```swift
/// let container = try SharedContainer(groupIdentifier: "group.com.example.app")
/// try container.defaults().set(trainerID.uuidString, forKey: "selectedTrainerId")
/// try container.files.write(png, to: "TrainerImages/\(trainerID).png")
/// ```
///
/// Layout, under `<root>/<group identifier>/`:
/// - `Store/`: the LMDB environment (``store``), with every collection and defaults suite
/// - `Files/`: ``files``, the shared directory
/// - `Snapshots/`: published snapshots and widget feeds
/// - `Notify/`: what cross-process notifications need
///
/// `<root>` is the first of: the `root` argument, `$KVSTORE_ROOT`, `$XDG_DATA_HOME/kvstore`,
/// `~/.local/share/kvstore`. The identifier is validated before the file system is touched. Files are
/// created 0600 and directories 0700, or 0660 and 2770 in ``SharingMode/groupShared`` mode.
///
/// Open a container once per process and share it between threads; it is `Sendable`.
public final class SharedContainer: Sendable {
    /// How a container is opened.
    public struct Options: Sendable {
        /// Permissions for everything the container creates. Default ``SharingMode/privateToUser``.
        public var sharing: SharingMode = .privateToUser
        /// How the container's store is opened: durability, map size and its limit, read-only, stale
        /// readers, logger (see ``Store/Options``). Its ``Store/Options/fileMode`` is not used:
        /// ``sharing`` decides the permissions of everything in the container, the store's files too.
        ///
        /// ```swift
        /// var options = SharedContainer.Options()
        /// options.store.durability = .noMetaSync
        /// options.store.logger = Logger(label: "com.example.app.store")
        /// ```
        public var store = Store.Options()

        /// Opens the store read-only and creates nothing: what an extension or widget that only reads
        /// wants. Throws if the container does not exist yet. The same as `store.readOnly`.
        public var readOnly: Bool {
            get { store.readOnly }
            set { store.readOnly = newValue }
        }

        public init() {}
    }

    /// The validated App Group identifier.
    public let groupIdentifier: GroupIdentifier
    /// `<root>/<group identifier>`.
    public let path: String
    /// The typed store in `Store/`.
    public let store: Store
    /// The shared files area, `Files/`.
    public let files: SharedFiles
    /// The options the container was opened with.
    public let options: Options
    private let suites = Locked<[String: SharedDefaults]>([:])

    /// Opens the container of `groupIdentifier`, creating its layout if needed.
    ///
    /// - Throws: ``KVStoreError/invalidGroupIdentifier(_:reason:)`` before touching the file system;
    ///   ``KVStoreError/unsafeFile(path:reason:)`` if a directory or store file is not what the sharing
    ///   mode requires (a planted link or hard link, a foreign owner, a mode it may not repair; see
    ///   the DocC article "Sharing a store between processes");
    ///   ``KVStoreError/invalidPath(_:reason:)`` if a part of the layout is not a directory (a symbolic
    ///   link, say); ``KVStoreError/io(operation:path:errno:)`` or ``LMDBError`` if it cannot be opened.
    public init(groupIdentifier: String, root: String? = nil, options: Options = Options()) throws {
        let identifier = try GroupIdentifier(groupIdentifier)
        let rootPath = try ContainerRoot.resolve(explicit: root)
        self.groupIdentifier = identifier
        self.options = options
        path = rootPath + "/" + identifier.rawValue
        let sharing = options.sharing

        let containerFD = try Self.openLayout(rootPath: rootPath, path: path, name: identifier.rawValue, options: options)
        var storeOptions = options.store
        storeOptions.fileMode = sharing.fileMode
        // Through the checked container descriptor: `Store` is looked up under it, never by a path a
        // co-tenant could redirect meanwhile (the store reports its real path).
        do {
            store = try Store(directory: "/proc/self/fd/\(containerFD)/Store", options: storeOptions)
        } catch {
            close(containerFD)
            throw error
        }
        close(containerFD)
        files = try SharedFiles(directory: path + "/Files", sharing: sharing)
        // Open the container's own suite now, so that `defaults()` also works inside a transaction.
        _ = try defaults()
    }

    /// `Store/`, the LMDB environment's directory.
    public var storeDirectory: String { path + "/Store" }
    /// `Snapshots/`, for published snapshots and widget feeds.
    public var snapshotsDirectory: String { path + "/Snapshots" }
    /// `Notify/`, for cross-process notifications.
    public var notifyDirectory: String { path + "/Notify" }

    /// The defaults suite `suite`, or by default the suite named after the App Group (as
    /// `UserDefaults(suiteName: "group.…")` is on iOS). One instance per suite per container, so
    /// registered defaults are shared by every caller in the process.
    ///
    /// The container's own suite is opened with the container, so you may call `defaults()` inside a
    /// transaction. Open any other suite before `read { }` or `write { }`: a transaction can use only
    /// databases that were open when it began (see ``KVStoreError/databaseOpenedInsideTransaction(_:)``).
    public func defaults(suite: String? = nil) throws -> SharedDefaults {
        let name = suite ?? groupIdentifier.rawValue
        if let existing = suites.withLock({ $0[name] }) { return existing }
        let created = try SharedDefaults(store: store, suiteName: name)
        return suites.withLock { suites in
            if let existing = suites[name] { return existing }
            suites[name] = created
            return created
        }
    }

    // MARK: - Layout

    /// Opens the container's directory and checks (creating them unless read-only) its four
    /// directories; returns the container's descriptor, which the caller closes.
    ///
    /// The container and its four directories are opened with O_NOFOLLOW under a descriptor of the one
    /// above, created with mkdirat and given their mode with fchmod, and checked with the sharing
    /// mode's ``FilePolicy``: a link or a foreign directory planted by a co-tenant is refused.
    private static func openLayout(rootPath: String, path: String, name: String, options: Options) throws -> Int32 {
        if !options.readOnly { try makeDirectories(rootPath, mode: 0o700) }
        let rootFD = try SafePath.openRoot(rootPath, what: "container root")
        defer { close(rootFD) }
        let containerFD = try openContainer(rootFD, name: name, path: path, options: options)
        do {
            let policy = FilePolicy(sharing: options.sharing, directory: try FilePolicy.status(containerFD, path: path))
            for sub in ["Store", "Files", "Snapshots", "Notify"] {
                let required = sub == "Store" || sub == "Files"
                let existing = SafePath.lstat(at: containerFD, sub)
                guard !options.readOnly || required || existing != nil else { continue }
                let subPath = path + "/" + sub
                if let st = existing, st.st_mode & S_IFMT != S_IFDIR {
                    throw KVStoreError.invalidPath(subPath, reason: "is not a directory (\(FilePolicy.kind(st)))")
                }
                close(try SafePath.openDirectoryChecked(containerFD, sub, create: !options.readOnly, policy: policy, path: subPath))
            }
        } catch {
            close(containerFD)
            throw error
        }
        return containerFD
    }

    /// Opens (creating unless read-only) `<root>/<group>` without following a link, and checks it:
    /// a directory of this user in private mode (its mode repaired if wider), of any member in
    /// group-shared mode, whose group every other file of the container must then have.
    private static func openContainer(_ rootFD: Int32, name: String, path: String, options: Options) throws -> Int32 {
        if !options.readOnly {
            if SafePath.retry({ mkdirat(rootFD, name, 0o700) }) == 0 {
                let fd = SafePath.retry { openat(rootFD, name, SafePath.directoryFlags) }
                guard fd >= 0 else { throw KVStoreError.io(operation: "open container directory", path: path, errno: errno) }
                guard SafePath.retry({ fchmod(fd, options.sharing.directoryMode) }) == 0 else {
                    let code = errno
                    close(fd)
                    throw KVStoreError.io(operation: "set permissions of", path: path, errno: code)
                }
                SafePath.syncDirectory(rootFD)
                return fd
            } else if errno != EEXIST {
                throw KVStoreError.io(operation: "create directory", path: path, errno: errno)
            }
        }
        let fd = SafePath.retry { openat(rootFD, name, SafePath.directoryFlags) }
        if fd < 0 {
            let code = errno
            if let st = SafePath.lstat(at: rootFD, name), st.st_mode & S_IFMT != S_IFDIR {
                throw KVStoreError.invalidPath(path, reason: "is not a directory (\(FilePolicy.kind(st)))")
            }
            throw KVStoreError.io(operation: "open container directory", path: path, errno: code)
        }
        do {
            let st = try FilePolicy.status(fd, path: path)
            try FilePolicy(sharing: options.sharing, directory: st).checkDirectory(fd, st, path: path)
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// `mkdir -p`, creating missing levels with `mode`.
    private static func makeDirectories(_ path: String, mode: mode_t) throws {
        var current = ""
        for component in SafePath.split(path, omittingEmptySubsequences: true) {
            current += "/" + component
            var info = stat()
            if stat(current, &info) == 0 {
                guard info.st_mode & S_IFMT == S_IFDIR else {
                    throw KVStoreError.invalidPath(path, reason: "\(current) is not a directory")
                }
                continue
            }
            if mkdir(current, mode) != 0 && errno != EEXIST {
                throw KVStoreError.io(operation: "create directory", path: current, errno: errno)
            }
        }
    }
}
