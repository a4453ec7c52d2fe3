#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
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
/// Its directories are the ``layout``'s (see ``ContainerLayout``), under `<root>/<group identifier>/`:
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

    /// Where the container's directories are.
    public let layout: ContainerLayout
    /// The validated App Group identifier.
    public var groupIdentifier: GroupIdentifier { layout.groupIdentifier }
    /// `<root>/<group identifier>`.
    public var path: String { layout.path }
    /// The typed store in `Store/`.
    public let store: Store
    /// The shared files area, `Files/`.
    public let files: SharedFiles
    /// The options the container was opened with.
    public let options: Options
    private let suites = Locked<[String: SharedDefaults]>([:])

    /// Closes the container's store (``Store/close()``): every transaction begun on it from now on
    /// throws, and once your references to the container and its handles are gone, its environment,
    /// memory map and file descriptors are released. Optional; an app's container lives as long as
    /// the process.
    public func close() {
        store.close()
    }

    /// Opens the container of `groupIdentifier`, creating its layout if needed.
    ///
    /// - Throws: ``KVStoreError/invalidGroupIdentifier(_:reason:)`` before touching the file system;
    ///   ``KVStoreError/unsafeFile(path:reason:)`` if a directory or store file is not what the sharing
    ///   mode requires (a planted link or hard link, a foreign owner, a mode it may not repair; see
    ///   the DocC article "Sharing a store between processes");
    ///   ``KVStoreError/invalidPath(_:reason:)`` if a part of the layout is not a directory (a symbolic
    ///   link, say); ``KVStoreError/io(operation:path:errno:)`` or ``LMDBError`` if it cannot be opened.
    public init(groupIdentifier: String, root: String? = nil, options: Options = Options()) throws {
        let layout = try ContainerLayout(groupIdentifier: groupIdentifier, root: root, sharing: options.sharing)
        self.layout = layout
        self.options = options
        let sharing = options.sharing

        let containerFD = try Self.openLayout(layout, options: options)
        var storeOptions = options.store
        storeOptions.fileMode = sharing.fileMode
        // Through the checked container descriptor: `Store` is looked up under it, never by a path a
        // co-tenant could redirect meanwhile (the store reports its real path).
        do {
            store = try Store(directory: "/proc/self/fd/\(containerFD)/" + ContainerLayout.storeName, options: storeOptions)
        } catch {
            Glibc.close(containerFD)
            throw error
        }
        Glibc.close(containerFD)
        files = try SharedFiles(directory: layout.files, sharing: sharing, store: store, blobs: layout.blobs)
        // Open the container's own suite now, so that `defaults()` also works inside a transaction.
        _ = try defaults()
    }

    /// `Store/`, the LMDB environment's directory (``ContainerLayout/store``).
    public var storeDirectory: String { layout.store }
    /// `Snapshots/`, for published snapshots and widget feeds (``ContainerLayout/snapshots``).
    public var snapshotsDirectory: String { layout.snapshots }
    /// `Notify/`, for cross-process notifications (``ContainerLayout/notify``).
    public var notifyDirectory: String { layout.notify }

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
    private static func openLayout(_ layout: ContainerLayout, options: Options) throws -> Int32 {
        if !options.readOnly { try SystemCall.makeDirectories(layout.root, mode: 0o700) }
        let rootFD = try SafePath.openRoot(layout.root, what: "container root")
        defer { Glibc.close(rootFD) }
        let path = layout.path
        let containerFD = try openContainer(rootFD, name: layout.groupIdentifier.rawValue, path: path, options: options)
        do {
            let policy = FilePolicy(sharing: options.sharing, directory: try FilePolicy.status(containerFD, path: path), repairs: !options.readOnly)
            for sub in ContainerLayout.directoryNames {
                let required = sub == ContainerLayout.storeName || sub == ContainerLayout.filesName
                let existing = SafePath.lstat(at: containerFD, sub)
                guard !options.readOnly || required || existing != nil else { continue }
                let subPath = layout.path(of: sub)
                if let st = existing, st.st_mode & S_IFMT != S_IFDIR {
                    throw KVStoreError.invalidPath(subPath, reason: "is not a directory (\(FilePolicy.kind(st)))")
                }
                Glibc.close(try SafePath.openDirectoryChecked(containerFD, sub, create: !options.readOnly, policy: policy, path: subPath))
            }
        } catch {
            Glibc.close(containerFD)
            throw error
        }
        return containerFD
    }

    /// Opens (creating unless read-only) `<root>/<group>` without following a link, and checks it:
    /// a directory of this user in private mode (its mode repaired if wider), of any member in
    /// group-shared mode, whose group every other file of the container must then have.
    private static func openContainer(_ rootFD: Int32, name: String, path: String, options: Options) throws -> Int32 {
        if !options.readOnly {
            if SystemCall.retry({ mkdirat(rootFD, name, 0o700) }) == 0 {
                let fd = SystemCall.retry { openat(rootFD, name, SafePath.directoryFlags) }
                guard fd >= 0 else { throw KVStoreError.io(operation: "open container directory", path: path, errno: errno) }
                guard SystemCall.retry({ fchmod(fd, options.sharing.directoryMode) }) == 0 else {
                    let code = errno
                    Glibc.close(fd)
                    throw KVStoreError.io(operation: "set permissions of", path: path, errno: code)
                }
                SafePath.syncDirectory(rootFD)
                return fd
            } else if errno != EEXIST {
                throw KVStoreError.io(operation: "create directory", path: path, errno: errno)
            }
        }
        let fd = SystemCall.retry { openat(rootFD, name, SafePath.directoryFlags) }
        if fd < 0 {
            let code = errno
            if let st = SafePath.lstat(at: rootFD, name), st.st_mode & S_IFMT != S_IFDIR {
                throw KVStoreError.invalidPath(path, reason: "is not a directory (\(FilePolicy.kind(st)))")
            }
            throw KVStoreError.io(operation: "open container directory", path: path, errno: code)
        }
        do {
            let st = try FilePolicy.status(fd, path: path)
            try FilePolicy(sharing: options.sharing, directory: st, repairs: !options.readOnly).checkDirectory(fd, st, path: path)
        } catch {
            Glibc.close(fd)
            throw error
        }
        return fd
    }
}
