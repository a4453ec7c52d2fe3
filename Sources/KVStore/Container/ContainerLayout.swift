/// Where everything of one App Group container lives: the one place that turns a root and a group
/// identifier into paths. ``SharedContainer``, SyncKit's snapshots, feeds and notifications, and
/// `kvtool` all ask it, so no path of the layout is ever spelled twice.
///
/// ```swift
/// let layout = try ContainerLayout(groupIdentifier: "group.com.example.app")
/// layout.path        // "/home/me/.local/share/kvstore/group.com.example.app"
/// layout.store       // ".../group.com.example.app/Store"
/// layout.feeds       // ".../group.com.example.app/Snapshots/feeds"
/// ```
///
/// Layout, under `<root>/<group identifier>/`:
/// - `Store/`: the LMDB environment (`data.mdb`, `lock.mdb`);
/// - `Files/`: the shared files area;
/// - `Blobs/`: the content-addressed copies of the files a replicated prefix of `Files/` holds (issue 49),
///   named by their SHA-256, kept until uploaded (see ``SharedFiles/write(_:to:in:modified:)-(Data,_,_,_)``);
/// - `Snapshots/`: published snapshots, with `feeds/` for widget feeds;
/// - `Notify/`: the files cross-process notifications touch.
///
/// Making a layout touches nothing on disk; opening a ``SharedContainer`` creates and checks it.
public struct ContainerLayout: Sendable, Hashable {
    /// The directory holding every container, resolved (see ``ContainerRoot``).
    public let root: String
    /// The validated App Group identifier.
    public let groupIdentifier: GroupIdentifier
    /// The modes of what is created in the container.
    public let sharing: SharingMode

    /// The layout of `groupIdentifier`'s container under `root`, which is resolved as
    /// ``SharedContainer`` resolves it: the argument, `$KVSTORE_ROOT`, `$XDG_DATA_HOME/kvstore`, then
    /// `~/.local/share/kvstore`.
    ///
    /// - Throws: ``KVStoreError/invalidGroupIdentifier(_:reason:)``, or
    ///   ``KVStoreError/invalidPath(_:reason:)`` for a root that is not an absolute path.
    public init(groupIdentifier: String, root: String? = nil, sharing: SharingMode = .privateToUser) throws {
        try self.init(groupIdentifier: try GroupIdentifier(groupIdentifier), root: root, sharing: sharing)
    }

    /// The layout of an already validated identifier's container; see ``init(groupIdentifier:root:sharing:)-(String,_,_)``.
    public init(groupIdentifier: GroupIdentifier, root: String? = nil, sharing: SharingMode = .privateToUser) throws {
        self.root = try ContainerRoot.resolve(explicit: root)
        self.groupIdentifier = groupIdentifier
        self.sharing = sharing
    }

    /// The names of the container's directories, in the order they are created.
    public static let directoryNames = [storeName, filesName, snapshotsName, notifyName, blobsName]
    static let storeName = "Store"
    static let filesName = "Files"
    static let blobsName = "Blobs"
    static let snapshotsName = "Snapshots"
    static let notifyName = "Notify"
    /// The directory of widget feeds, relative to ``snapshots``.
    public static let feedsName = "feeds"
    /// The file of the LMDB environment that exists once a store has been created, in ``store``.
    public static let dataFileName = "data.mdb"

    /// `<root>/<group identifier>`.
    public var path: String { SafePath.join(root, groupIdentifier.rawValue) }
    /// `Store/`, the LMDB environment's directory.
    public var store: String { path + "/" + Self.storeName }
    /// `Store/data.mdb`: present once the container's store has been created.
    public var storeDataFile: String { store + "/" + Self.dataFileName }
    /// `Files/`, the shared files area.
    public var files: String { path + "/" + Self.filesName }
    /// `Blobs/`, the content-addressed copies of replicated files (issue 49).
    public var blobs: String { path + "/" + Self.blobsName }
    /// `Snapshots/`, for published snapshots and widget feeds.
    public var snapshots: String { path + "/" + Self.snapshotsName }
    /// `Snapshots/feeds/`, for widget feeds.
    public var feeds: String { snapshots + "/" + Self.feedsName }
    /// `Notify/`, for cross-process notifications.
    public var notify: String { path + "/" + Self.notifyName }
    /// The path of `directory` (one of ``directoryNames``) in this container.
    func path(of directory: String) -> String { path + "/" + directory }
}
