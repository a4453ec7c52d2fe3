#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Who may use the files and directories KVStore creates inside a container.
///
/// Modes are applied with `fchmod` after each file or directory is created, so the process umask
/// neither narrows nor widens them.
///
/// ```swift
/// let files = try SharedFiles(directory: "/srv/groups/group.com.example.app/Files",
///                             sharing: .groupShared)
/// // files written through `files` are 0660, directories 2770
/// ```
///
/// Thread safety: a plain value; `Sendable`.
public enum SharingMode: Sendable, Hashable, CaseIterable {
    /// Only the owning user: files `0600`, directories `0700`. The default.
    case privateToUser
    /// The owning user and the members of the directory's Unix group: files `0660`, directories
    /// `2770`. The setgid bit on directories makes new entries inherit the directory's group, so
    /// processes that run as different users of one group can all read and write the container.
    ///
    /// The kernel silently drops the setgid bit when the calling process is not a member of the
    /// directory's group (and is not privileged).
    case groupShared

    /// The permission bits for regular files: `0600` or `0660`.
    public var fileMode: mode_t {
        switch self {
        case .privateToUser: 0o600
        case .groupShared: 0o660
        }
    }

    /// The permission bits for directories: `0700` or `02770` (setgid).
    public var directoryMode: mode_t {
        switch self {
        case .privateToUser: 0o700
        case .groupShared: 0o2770
        }
    }
}
