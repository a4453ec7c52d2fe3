#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import KVStore

/// A small typed payload that the app publishes for widgets and extensions, so that they never open
/// the main store: `Snapshots/feeds/<name>.feed`, replaced atomically with a generation number.
///
/// ```swift
/// // The app, after each save:
/// let feed = try WidgetFeed<TodayPayload>(name: "today", container: container)
/// let generation = try feed.publish(TodayPayload(total: 3.8, streak: 12))
///
/// // The widget, in another process, with no access to Store/:
/// let reader = try WidgetFeed<TodayPayload>(name: "today", groupIdentifier: "group.com.example.app")
/// let latest = try reader.read()          // latest.generation, latest.payload
/// ```
///
/// **Never torn.** A publication writes header and payload into a new temporary file
/// (`.kvtmp-<name>.feed-<pid>-<random>`, `O_EXCL`), `fsync`s it, renames it over the feed and `fsync`s
/// the directory, so a reader opens either the previous file or the new one, complete. The header
/// carries the format version, the generation, the payload length and a SHA-256 of header and payload,
/// and ``read()`` checks all of them: a damaged file is a clear ``WidgetFeedError/corrupt(path:reason:)``,
/// never a garbled payload. See `WidgetFeedFile` for the layout.
///
/// **Generations** increase by one per publication, across processes: publishers of one feed take
/// turns on an `flock` of `feeds/.<name>.lock`, which also records the last generation, so numbering
/// continues even if the feed file is deleted.
///
/// **Crashes.** A publisher that dies mid-publication leaves only its temporary file; the feed keeps
/// its previous contents. Every publication first removes temporary files whose process is gone (or
/// that are older than an hour); ``removeOrphanedTemporaryFiles(olderThan:)`` does it on demand.
///
/// The payload is encoded as CBOR (RFC 8949), the store's own value encoding. A small immutable value:
/// share it between threads freely.
public struct WidgetFeed<Payload: Codable & Sendable>: Sendable {
    /// The feed's name: its file is `feeds/<name>.feed`.
    public let name: String
    /// The `Snapshots/` directory the `feeds/` directory lives in.
    public let snapshotsDirectory: String
    /// The modes of files and directories the publisher creates.
    public let sharing: SharingMode
    /// The largest payload accepted, in bytes, when publishing and when reading. Default 1 MiB.
    public var maxPayloadSize: Int = 1 << 20
    /// A reader of the payload's CBOR written by hand for `Payload`, tried before `CBORDecoder`; `nil`
    /// (the default) for `CBORDecoder` alone. It returns `nil` for any bytes it does not take, and
    /// `CBORDecoder` then decodes them (or says why not) exactly as without it; for bytes it takes it
    /// must give what `CBORDecoder` gives. The checklist widget's
    /// (`ChecklistWidgetFeed.decodeEncodedCBOR`) saves the Swift runtime's look-ups of the payload's
    /// coding keys at a lean process's start (issue 39).
    public var payloadDecoder: (@Sendable ([UInt8]) -> Payload?)?

    /// Feed files live here, relative to ``snapshotsDirectory``.
    public static var feedsDirectoryName: String { ContainerLayout.feedsName }

    /// The feed `name` of a container (in its ``KVStore/SharedContainer/snapshotsDirectory``).
    ///
    /// - Throws: ``WidgetFeedError/invalidName(_:reason:)``.
    public init(name: String, container: SharedContainer) throws {
        try self.init(name: name, snapshotsDirectory: container.snapshotsDirectory, sharing: container.options.sharing)
    }

    /// The feed `name` of the container of `groupIdentifier` under `root` (resolved as
    /// ``KVStore/SharedContainer`` resolves it), without opening the container or its store: what a
    /// widget uses. Nothing is touched on disk until you read or publish.
    ///
    /// - Throws: ``WidgetFeedError/invalidName(_:reason:)``,
    ///   ``KVStore/KVStoreError/invalidGroupIdentifier(_:reason:)``.
    public init(name: String, groupIdentifier: String, root: String? = nil, sharing: SharingMode = .privateToUser) throws {
        let layout = try ContainerLayout(groupIdentifier: groupIdentifier, root: root, sharing: sharing)
        try self.init(name: name, snapshotsDirectory: layout.snapshots, sharing: sharing)
    }

    /// The feed `name` in the `feeds/` directory below `snapshotsDirectory`, read with
    /// `payloadDecoder` first if one is given (see ``payloadDecoder``).
    ///
    /// - Throws: ``WidgetFeedError/invalidName(_:reason:)``.
    public init(name: String, snapshotsDirectory: String, sharing: SharingMode = .privateToUser,
                payloadDecoder: (@Sendable ([UInt8]) -> Payload?)? = nil) throws {
        if let reason = Self.nameProblem(name) { throw WidgetFeedError.invalidName(name, reason: reason) }
        self.name = name
        self.snapshotsDirectory = try ContainerRoot.resolve(explicit: snapshotsDirectory, environment: [:])
        self.sharing = sharing
        self.payloadDecoder = payloadDecoder
    }

    /// The feed file's name, `<name>.feed`.
    public var fileName: String { name + ".feed" }
    /// The feed file's path relative to ``snapshotsDirectory``.
    var relativePath: String { Self.feedsDirectoryName + "/" + fileName }
    /// The feed file's absolute path.
    public var path: String { snapshotsDirectory + "/" + relativePath }

    static func nameProblem(_ name: String) -> String? {
        if name.isEmpty { return "the name is empty" }
        if name.utf8.count > 100 { return "the name is longer than 100 bytes" }
        if name.hasPrefix(".") { return "the name must not start with '.'" }
        let allowed = name.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)
                || scalar == "." || scalar == "_" || scalar == "-")
        }
        return allowed ? nil : "feed names may contain only ASCII letters, digits, '.', '_' and '-'"
    }

    // MARK: - Reading

    /// The latest publication, checked end to end (magic, version, length, SHA-256) and decoded.
    ///
    /// Reads only `Snapshots/feeds/<name>.feed`; works when the main store is unreadable or absent.
    /// Safe to call while publishers in other processes replace the file: it sees one complete
    /// publication or the next.
    ///
    /// - Throws: ``WidgetFeedError/notPublished(name:path:)``; ``WidgetFeedError/corrupt(path:reason:)``;
    ///   ``WidgetFeedError/unsupportedVersion(path:version:supported:)``;
    ///   ``WidgetFeedError/payloadMismatch(path:type:reason:)``; ``KVStore/KVStoreError`` for a symbolic
    ///   link or an I/O failure.
    public func read() throws -> PublishedFeed<Payload> {
        guard let feed = try readIfPublished() else {
            throw WidgetFeedError.notPublished(name: name, path: path)
        }
        return feed
    }

    /// Like ``read()``, but `nil` when nothing has been published yet.
    public func readIfPublished() throws -> PublishedFeed<Payload>? {
        guard let bytes = try rawBytes() else { return nil }
        let parsed = try WidgetFeedFile.decode(bytes, path: path)
        let payloadBytes = Array(parsed.payload)
        if let payloadDecoder, let payload = payloadDecoder(payloadBytes) {
            return PublishedFeed(generation: parsed.generation, publishedAt: parsed.publishedAt, payload: payload)
        }
        do {
            let payload = try CBORDecoder().decode(Payload.self, from: payloadBytes)
            return PublishedFeed(generation: parsed.generation, publishedAt: parsed.publishedAt, payload: payload)
        } catch {
            throw WidgetFeedError.payloadMismatch(path: path, type: "\(Payload.self)", reason: "\(error)")
        }
    }

    /// The feed file's bytes, or `nil` if there is none (or no `Snapshots/` directory at all).
    func rawBytes() throws -> [UInt8]? {
        let files: SharedFiles
        do {
            files = try SharedFiles(directory: snapshotsDirectory, sharing: sharing)
        } catch KVStoreError.io(_, _, let code) where code == ENOENT {
            return nil
        }
        do {
            return Array(try files.read(relativePath, maxSize: WidgetFeedFile.headerSize + maxPayloadSize))
        } catch KVStoreError.fileNotFound {
            return nil
        } catch KVStoreError.valueTooLarge(_, let size, let limit, _) {
            // SharedFiles.read compares fstat's size of the opened file with the limit before reading.
            throw WidgetFeedError.fileTooLarge(path: path, size: size, limit: limit)
        } catch KVStoreError.invalidPath(_, let reason) {
            // A link, FIFO, socket or device planted there: named by its whole path.
            throw KVStoreError.unsafeFile(path: path, reason: reason)
        }
    }
}

/// The integrity check of every widget feed in a container, without the payload types: what
/// `kvtool check` runs.
public enum WidgetFeedCheck {
    /// One feed file that does not read back intact.
    public struct Problem: Hashable, Sendable, CustomStringConvertible {
        /// The file name in `feeds/` (`today.feed`).
        public var file: String
        public var error: WidgetFeedError
        public var description: String { error.description }
    }

    /// Reads every `feeds/*.feed` below `snapshotsDirectory` as a reader would (size cap first, then
    /// magic, version, length and SHA-256), and checks that each payload is well-formed CBOR.
    ///
    /// - Returns: the names of the feeds checked, and one problem per feed that failed.
    /// - Throws: ``KVStore/KVStoreError`` when the `feeds/` directory itself cannot be listed.
    public static func run(snapshotsDirectory: String, sharing: SharingMode = .privateToUser,
                           maxPayloadSize: Int = 1 << 20) throws -> (checked: [String], problems: [Problem]) {
        let directory = snapshotsDirectory + "/" + WidgetFeed<Int>.feedsDirectoryName
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch let error as CocoaError where error.code == .fileReadNoSuchFile {
            return ([], [])
        }
        var checked: [String] = []
        var problems: [Problem] = []
        for file in names.sorted() where file.hasSuffix(".feed") && !file.hasPrefix(".") {
            let name = String(file.dropLast(".feed".count))
            do {
                var feed = try WidgetFeed<Int>(name: name, snapshotsDirectory: snapshotsDirectory, sharing: sharing)
                feed.maxPayloadSize = maxPayloadSize
                checked.append(name)
                guard let bytes = try feed.rawBytes() else { continue }
                let parsed = try WidgetFeedFile.decode(bytes, path: feed.path)
                do {
                    _ = try CBORValue.decode(Array(parsed.payload))
                } catch {
                    throw WidgetFeedError.payloadMismatch(path: feed.path, type: "CBOR", reason: "\(error)")
                }
            } catch let error as WidgetFeedError {
                problems.append(Problem(file: file, error: error))
            } catch let error as KVStoreError {
                problems.append(Problem(file: file, error: .corrupt(path: directory + "/" + file, reason: "\(error)")))
            }
        }
        return (checked, problems)
    }
}
