#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// Name-only notifications between processes, like Darwin's `notify_post`: a writer posts a name, and
/// every process observing that name wakes up.
///
/// ```swift
/// let notifier = ChangeNotifier(container: container)
/// // A widget process:
/// for await _ in try notifier.notifications() {
///     reload()                         // read History for what changed
/// }
/// // The app, after a commit (History does this for you):
/// try notifier.post()
/// ```
///
/// A post opens the file `<directory>/<name>` for writing and closes it, writing nothing; observers
/// watch the directory with inotify and wake on the file's `IN_CLOSE_WRITE`. Nothing connects a
/// writer to its observers, so a dead, stopped or slow observer never blocks a writer, and a post
/// with no observer costs an open and a close. Notifications carry no data and may coalesce: an observer learns *that* something changed
/// and reads ``History`` for what.
public struct ChangeNotifier: Sendable {
    /// The directory holding the notification files (a container's `Notify/`).
    public let directory: String
    /// Permissions of notification files this process creates.
    public let fileMode: mode_t
    /// The name ``History`` posts after every commit.
    public static let changes = "changes"

    /// The directory's descriptor, opened (no-follow) at the first post and kept for the next ones.
    private let heldDirectory = HeldDirectory()

    public init(directory: String, fileMode: mode_t = 0o600) {
        self.directory = directory
        self.fileMode = fileMode
    }

    /// The notifier of a container: its `Notify/` directory, with files created in the container's
    /// ``KVStore/SharingMode`` (0600, or 0660 for group-shared containers).
    public init(container: SharedContainer) {
        self.init(directory: container.notifyDirectory, fileMode: container.options.sharing.fileMode)
    }

    /// Wakes every process observing `name`.
    ///
    /// The notifier keeps a descriptor of its directory from its first post on (opened without
    /// following a link), and opens the path again only when that directory is gone: so a `Notify/`
    /// renamed away while the process runs keeps receiving its posts, and observers watching a new
    /// `Notify/` put in its place do not wake for them until the old one is removed.
    ///
    /// - Throws: ``SyncError/invalidNotificationName(_:)``; ``KVStore/KVStoreError/unsafeFile(path:reason:)``
    ///   when something else than a regular file of the sharing mode is in its place (a symbolic link,
    ///   a FIFO, a socket, a device: refused at once, never followed or waited for);
    ///   ``KVStore/KVStoreError/io(operation:path:errno:)`` if the file cannot be opened.
    public func post(_ name: String = Self.changes) throws {
        try Self.validate(name)
        // Built only for an error: every commit that changed something posts.
        var path: String { directory + "/" + name }
        // Under a no-follow descriptor of the directory: neither `Notify/` nor the file may be a link
        // a co-tenant planted. The process that creates the file gives it its mode whatever the
        // umask; later posts (from any process of the group) only open it. The descriptor is kept for
        // the next posts (opening and closing it cost a post half its time); if its directory is gone
        // (removed, so another process may have made a new one), the post opens the path again.
        var opened = try heldDirectory.withDescriptor(of: directory, fresh: false) { openFile(name, in: $0, path: path) }
        if case .failure(.io(_, _, ENOENT)) = opened {
            opened = try heldDirectory.withDescriptor(of: directory, fresh: true) { openFile(name, in: $0, path: path) }
        }
        let fd = try opened.get()
        // Closing a descriptor opened for writing is what wakes observers (`IN_CLOSE_WRITE` is raised
        // for the open mode, written or not). Nothing is written, so the file's times and blocks stay
        // as they are: a post makes no inode update for the disk.
        close(fd)
    }

    /// Opens `name` in the directory `directoryFD` for writing, creating it if it is missing, as every
    /// file of a container is opened (``KVStore/ContainerFile``): a link, a FIFO, a socket or a device in
    /// its place is refused at once, never followed or waited for.
    private func openFile(_ name: String, in directoryFD: Int32, path: String) -> Result<Int32, KVStoreError> {
        Result { () throws(KVStoreError) -> Int32 in
            // Nothing is written: O_NONBLOCK stays (the descriptor is only closed).
            try ContainerFile.open(name, in: directoryFD, access: .write, create: true, fileMode: fileMode,
                                   blocking: false, path: path).fd
        }
    }

    /// An endless sequence that yields once per post of `name` by any process (posts that arrive while
    /// the previous one has not been consumed coalesce into one). Observation starts when this returns,
    /// so a post made after it is never missed. Stop by ending the iteration or cancelling its task.
    ///
    /// - Throws: ``KVStore/KVStoreError/io(operation:path:errno:)`` if the directory cannot be watched.
    public func notifications(_ name: String = Self.changes) throws -> AsyncStream<Void> {
        _ = try path(for: name)
        let watch = try InotifyWatch(directory: directory)
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let follower = NotificationFollower(watch: watch, name: Array(name.utf8), continuation: continuation)
        continuation.onTermination = { _ in follower.stop() }
        try follower.arm()
        return stream
    }

    func path(for name: String) throws -> String {
        try Self.validate(name)
        return directory + "/" + name
    }

    static func validate(_ name: String) throws {
        // ASCII letters, digits, `.`, `_` and `-`, checked byte by byte (every commit that changed
        // something posts, and Unicode properties cost thousands of instructions a name).
        let valid = !name.isEmpty && name.utf8.count <= 100 && name.utf8.allSatisfy { byte in
            (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x30 && byte <= 0x39)
                || byte == 0x2E || byte == 0x5F || byte == 0x2D
        } && name != "." && name != ".."
        guard valid else { throw SyncError.invalidNotificationName(name) }
    }
}

/// An inotify watch on a directory (non-blocking), closed when the last holder lets go (Sendable: a
/// constant descriptor).
final class InotifyWatch: Sendable {
    let inotify: Int32

    init(directory: String) throws {
        inotify = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard inotify >= 0 else { throw KVStoreError.io(operation: "inotify_init1 for", path: directory, errno: errno) }
        guard inotify_add_watch(inotify, directory, UInt32(IN_CLOSE_WRITE | IN_MOVED_TO) | UInt32(IN_DONT_FOLLOW) | UInt32(IN_ONLYDIR)) >= 0 else {
            let code = errno
            close(inotify)
            throw KVStoreError.io(operation: "watch", path: directory, errno: code)
        }
    }

    deinit {
        close(inotify)
    }

    /// Reads the events there are, without waiting: whether one names `name` (`nil`: the watch failed).
    func drain(naming name: [UInt8]) -> Bool? {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var named = false
        while true {
            let count = buffer.withUnsafeMutableBytes { read(inotify, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return errno == EAGAIN ? named : nil
            }
            if count == 0 { return named }
            named = named || Self.names(in: buffer[0..<count], contain: name)
        }
    }

    /// What ``nextBatch(naming:timeout:buffer:)`` saw.
    enum Batch { case named, timedOut, stopped }

    /// Blocks until a batch of events names `name` (`.named`), `timeout` passes (`.timedOut`; `nil`
    /// waits for ever), or the watch fails (`.stopped`). Batches that do not
    /// name `name` are read and skipped. The one loop behind the blocking waits.
    func nextBatch(naming name: [UInt8], timeout: Duration?, buffer: inout [UInt8]) -> Batch {
        let deadline = timeout.map { ContinuousClock.now + $0 }
        while true {
            var milliseconds: Int32 = -1
            if let deadline {
                let remaining = ContinuousClock.now.duration(to: deadline)
                if remaining <= .zero { return .timedOut }
                let (seconds, attoseconds) = remaining.components
                milliseconds = Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
            }
            var fds = pollfd(fd: inotify, events: Int16(POLLIN), revents: 0)
            let ready = poll(&fds, 1, milliseconds)
            if ready < 0 {
                if errno == EINTR { continue }
                return .stopped
            }
            if ready == 0 { continue }
            guard fds.revents & Int16(POLLIN) != 0 else { return .stopped }
            let count = buffer.withUnsafeMutableBytes { read(inotify, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EAGAIN || errno == EINTR { continue }
                return .stopped
            }
            if Self.names(in: buffer[0..<count], contain: name) { return .named }
        }
    }

    /// Whether a buffer of `inotify_event`s mentions `name` (or reports lost events, which may have).
    static func names(in events: ArraySlice<UInt8>, contain name: [UInt8]) -> Bool {
        let header = MemoryLayout<inotify_event>.size
        var offset = events.startIndex
        while offset + header <= events.endIndex {
            let mask = events.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset - events.startIndex + 4, as: UInt32.self) }
            let length = Int(events.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset - events.startIndex + 12, as: UInt32.self) })
            if mask & UInt32(IN_Q_OVERFLOW) != 0 { return true }
            let nameStart = offset + header
            let nameEnd = min(nameStart + length, events.endIndex)
            let stored = events[nameStart..<nameEnd].prefix { $0 != 0 }
            if stored.elementsEqual(name) { return true }
            offset = nameEnd
        }
        return false
    }
}

/// A directory descriptor a ``ChangeNotifier`` (and its copies) keep between posts, closed when the
/// last copy goes (Sendable: the descriptor is behind a lock).
final class HeldDirectory: Sendable {
    private let descriptor = Locked<Int32>(-1)

    /// Runs `body` with the directory's descriptor, opening `path` (`O_NOFOLLOW`) first if none is
    /// held or `fresh` asks for a new one.
    func withDescriptor<R>(of path: String, fresh: Bool, _ body: (Int32) -> R) throws -> R {
        try descriptor.withLock { fd in
            if fresh || fd < 0 {
                if fd >= 0 { close(fd) }
                fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                guard fd >= 0 else {
                    let code = errno
                    throw KVStoreError.io(operation: code == ELOOP ? "refuse the symbolic link" : "open the notification directory", path: path, errno: code)
                }
            }
            return body(fd)
        }
    }

    deinit {
        descriptor.withLock { if $0 >= 0 { close($0) } }
    }
}
