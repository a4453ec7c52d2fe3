import Foundation
import Testing
import TestSupport
@testable import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// A temporary tree for one test:
/// ```
/// <tmp>/kvstore-sf-XXXXXX/
///   Files/            the SharedFiles directory (0700)
///   outside/secret    a file that must never change ("original")
/// ```
struct SharedFilesFixture {
    let directory: TemporaryDirectory
    let root: String
    let filesPath: String
    let outside: String
    let secret: String
    static let secretContents = Data("original".utf8)

    init() throws {
        directory = TemporaryDirectory()
        root = directory.path
        filesPath = root + "/Files"
        outside = root + "/outside"
        secret = outside + "/secret"
        try Self.check(mkdir(filesPath, 0o700), "mkdir Files")
        try Self.check(mkdir(outside, 0o700), "mkdir outside")
        try Self.secretContents.write(to: URL(fileURLWithPath: secret))
    }

    func files(_ sharing: SharingMode = .privateToUser) throws -> SharedFiles {
        try SharedFiles(directory: filesPath, sharing: sharing)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: root)
    }

    static func check(_ rc: Int32, _ what: String) throws {
        if rc != 0 { throw KVStoreError.io(operation: what, path: "", errno: errno) }
    }

    /// Every entry below `root` (symbolic links not followed) with its type, mode and contents.
    func snapshot() -> [String: String] {
        var result: [String: String] = [:]
        func visit(_ path: String, _ relative: String) {
            var st = stat()
            guard lstat(path, &st) == 0 else { return }
            let mode = String(st.st_mode, radix: 8)
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                result[relative + "/"] = "dir \(mode)"
                for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
                    visit(path + "/" + name, relative.isEmpty ? name : relative + "/" + name)
                }
            case S_IFLNK:
                result[relative] = "link -> " + ((try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? "?")
            case S_IFREG:
                let data = FileManager.default.contents(atPath: path) ?? Data()
                result[relative] = "file \(mode) \(data.count) \(data.hashValue)"
            default:
                result[relative] = "other \(mode)"
            }
        }
        visit(root, "")
        return result
    }

    func secretIsUntouched() -> Bool {
        var st = stat()
        return lstat(secret, &st) == 0 && st.st_mode & S_IFMT == S_IFREG
            && FileManager.default.contents(atPath: secret) == Self.secretContents
    }

    static func mode(_ path: String) -> mode_t? {
        var st = stat()
        return lstat(path, &st) == 0 ? st.st_mode & 0o7777 : nil
    }

    static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    /// The process umask as /proc reports it (reading it with umask(2) would change it).
    static func processUmask() -> String? {
        guard let status = FileManager.default.contents(atPath: "/proc/self/status") else { return nil }
        return String(decoding: status, as: UTF8.self).split(separator: "\n")
            .first { $0.hasPrefix("Umask:") }.map(String.init)
    }

    /// Runs `body` on a new thread and waits for it.
    static func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(with: Result { try body() })
            }
            thread.start()
        }
    }

    /// Runs `body` on a new thread that has its own umask (via `unshare(CLONE_FS)`), so that the
    /// umask of the rest of the test process, where other tests run in parallel, never changes.
    static func withPrivateUmask<T: Sendable>(_ mask: mode_t, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await onThread {
            typealias Unshare = @convention(c) (Int32) -> Int32
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "unshare") else {
                throw KVStoreError.io(operation: "dlsym unshare", path: "", errno: ENOSYS)
            }
            let unshare = unsafeBitCast(symbol, to: Unshare.self)
            let cloneFS: Int32 = 0x0000_0200  // CLONE_FS
            if unshare(cloneFS) != 0 {
                throw KVStoreError.io(operation: "unshare(CLONE_FS)", path: "", errno: errno)
            }
            umask(mask)  // affects this thread only; it ends right after `body`
            return try body()
        }
    }
}

extension SharedFilesTests {
/// Asserts that `body` throws `KVStoreError.invalidPath` whose reason contains `fragment`.
func expectInvalidPath(
    _ fragment: String, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) {
    do {
        try body()
        Issue.record("expected invalidPath(\(fragment)), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as KVStoreError {
        guard case .invalidPath(_, let reason) = error else {
            Issue.record("expected invalidPath(\(fragment)), got \(error)", sourceLocation: sourceLocation)
            return
        }
        #expect(reason.contains(fragment), "reason was: \(reason)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected KVStoreError, got \(error)", sourceLocation: sourceLocation)
    }
}

/// Asserts that `body` throws `KVStoreError.io` with `code`.
func expectIOError(_ code: Int32, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) {
    let error = #expect(throws: KVStoreError.self, sourceLocation: sourceLocation) { try body() }
    guard case .io(_, _, let errno)? = error else {
        Issue.record("expected io(errno \(code)), got \(String(describing: error))", sourceLocation: sourceLocation)
        return
    }
    #expect(errno == code, sourceLocation: sourceLocation)
}
}

@Suite("SharedFiles")
struct SharedFilesTests {
    // MARK: Round trips

    @Test("write, read, exists, list, url and remove round-trip")
    func roundTrip() throws {
        let fixture = try SharedFilesFixture()
        defer { fixture.remove() }
        let files = try fixture.files()
        #expect(files.directory == fixture.filesPath)

        try files.write(Data("hello".utf8), to: "a.txt")
        #expect(try files.read("a.txt") == Data("hello".utf8))
        #expect(FileManager.default.contents(atPath: fixture.filesPath + "/a.txt") == Data("hello".utf8))
        #expect(files.exists("a.txt"))
        #expect(!files.exists("b.txt"))
        #expect(try files.list() == ["a.txt"])

        let url = try files.url(for: "a.txt")
        #expect(url.isFileURL)
        #expect(url.path == fixture.filesPath + "/a.txt")
        #expect(try Data(contentsOf: url) == Data("hello".utf8))
        #expect(try files.url(for: "x/y.png").path == fixture.filesPath + "/x/y.png")

        try files.remove("a.txt")
        #expect(!files.exists("a.txt"))
        #expect(!SharedFilesFixture.exists(fixture.filesPath + "/a.txt"))
        #expect(try files.list().isEmpty)
        #expect(throws: KVStoreError.fileNotFound(path: "a.txt")) { try files.read("a.txt") }
        #expect(throws: KVStoreError.fileNotFound(path: "a.txt")) { try files.remove("a.txt") }
        #expect(throws: KVStoreError.fileNotFound(path: "missing/a.txt")) { try files.read("missing/a.txt") }
        #expect(throws: KVStoreError.fileNotFound(path: "missing/a.txt")) { try files.remove("missing/a.txt") }
        #expect(throws: KVStoreError.fileNotFound(path: "missing")) { try files.list("missing") }
    }

    @Test("nested directories are created, listed and removed")
    func nestedDirectories() throws {
        let fixture = try SharedFilesFixture()
        defer { fixture.remove() }
        let files = try fixture.files()
        let id = UUID().uuidString
        try files.write(Data([1, 2, 3]), to: "TrainerImages/\(id).png")
        try files.write(Data([4]), to: "TrainerImages/old/deep/er/b.png")
        try files.write(Data([5]), to: "readme.txt")

        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: fixture.filesPath + "/TrainerImages/old/deep/er", isDirectory: &isDirectory))
        #expect(isDirectory.boolValue)

        #expect(try files.list() == ["TrainerImages/", "readme.txt"])
        #expect(try files.list("TrainerImages") == ["TrainerImages/\(id).png", "TrainerImages/old/"])
        #expect(try files.list("TrainerImages/old/deep") == ["TrainerImages/old/deep/er/"])
        #expect(try files.list(recursive: true)
            == ["TrainerImages/\(id).png", "TrainerImages/old/deep/er/b.png", "readme.txt"])
        #expect(try files.list("TrainerImages/old", recursive: true) == ["TrainerImages/old/deep/er/b.png"])
        #expect(try files.read("TrainerImages/old/deep/er/b.png") == Data([4]))
        #expect(files.exists("TrainerImages/old"))

        // Listing a file as a directory, and removing a non-empty directory, fail with errno.
        expectIOError(ENOTDIR) { _ = try files.list("readme.txt") }
        expectIOError(ENOTEMPTY) { try files.remove("TrainerImages/old") }

        // Every listed path can be handed back to read / remove.
        for path in try files.list(recursive: true) { try files.remove(path) }
        try files.remove("TrainerImages/old/deep/er")
        try files.remove("TrainerImages/old/deep")
        try files.remove("TrainerImages/old")
        try files.remove("TrainerImages")
        #expect(try files.list(recursive: true).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: fixture.filesPath).isEmpty)
    }

    @Test("overwriting replaces the whole file and leaves no temporary files")
    func overwrite() throws {
        let fixture = try SharedFilesFixture()
        defer { fixture.remove() }
        let files = try fixture.files()
        try files.write(Data(repeating: 7, count: 10_000), to: "dir/f")
        try files.write(Data("short".utf8), to: "dir/f")
        #expect(try files.read("dir/f") == Data("short".utf8))
        try files.write(Data(repeating: 9, count: 20_000), to: "dir/f")
        #expect(try files.read("dir/f") == Data(repeating: 9, count: 20_000))
        #expect(try FileManager.default.contentsOfDirectory(atPath: fixture.filesPath + "/dir") == ["f"])
    }

    @Test("binary data, the [UInt8] overload, empty files and maxSize")
    func binaryData() throws {
        let fixture = try SharedFilesFixture()
        defer { fixture.remove() }
        let files = try fixture.files()
        let all = Data((0...255).map { UInt8($0) } + [0, 0, 0xFF, 0x0A, 0x0D])
        try files.write(all, to: "bin/all.bytes")
        #expect(try files.read("bin/all.bytes") == all)

        let bytes: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0]
        try files.write(bytes, to: "bin/header.png")
        #expect(try [UInt8](files.read("bin/header.png")) == bytes)

        try files.write(Data(), to: "bin/empty")
        try files.write([UInt8](), to: "bin/empty2")
        #expect(try files.read("bin/empty").isEmpty)
        #expect(try files.read("bin/empty2").isEmpty)
        #expect(files.exists("bin/empty"))

        // Unicode names that are not look-alikes are fine, and stored as given.
        try files.write(Data("ü".utf8), to: "Bilder/Übung 1 (Kopie).png")
        #expect(try files.read("Bilder/Übung 1 (Kopie).png") == Data("ü".utf8))
        #expect(try files.list("Bilder") == ["Bilder/Übung 1 (Kopie).png"])

        #expect(try files.read("bin/all.bytes", maxSize: all.count) == all)
        let error = #expect(throws: KVStoreError.self) { try files.read("bin/all.bytes", maxSize: 100) }
        #expect(error == .valueTooLarge(what: "file 'bin/all.bytes'", size: all.count, limit: 100,
                                        hint: "pass a larger maxSize to read it"))
    }

    @Test("special entries: directories at the final name, files on the way, FIFOs")
    func specialEntries() throws {
        let fixture = try SharedFilesFixture()
        defer { fixture.remove() }
        let files = try fixture.files()
        try SharedFilesFixture.check(mkdir(fixture.filesPath + "/d", 0o700), "mkdir")
        expectIOError(EISDIR) { try files.write(Data("x".utf8), to: "d") }
        expectIOError(EISDIR) { _ = try files.read("d") }
        #expect(try files.list() == ["d/"])

        try files.write(Data("f".utf8), to: "f")
        expectIOError(ENOTDIR) { try files.write(Data("x".utf8), to: "f/x") }
        expectIOError(ENOTDIR) { _ = try files.read("f/x") }

        // A FIFO is neither listed nor read, and reading it does not block.
        try SharedFilesFixture.check(mkfifo(fixture.filesPath + "/fifo", 0o600), "mkfifo")
        expectInvalidPath("not a regular file") { _ = try files.read("fifo") }
        #expect(!files.exists("fifo"))
        #expect(try files.list() == ["d/", "f"])
        try files.remove("fifo")
        #expect(!SharedFilesFixture.exists(fixture.filesPath + "/fifo"))
    }

    @Test("init requires an existing directory that is not a symbolic link")
    func initialisation() throws {
        let fixture = try SharedFilesFixture()
        defer { fixture.remove() }
        expectIOError(ENOENT) { _ = try SharedFiles(directory: fixture.root + "/missing") }
        expectIOError(ENOTDIR) { _ = try SharedFiles(directory: fixture.secret) }
        expectInvalidPath("empty") { _ = try SharedFiles(directory: "") }
        expectInvalidPath("NUL") { _ = try SharedFiles(directory: fixture.filesPath + "\u{0}x") }
        try SharedFilesFixture.check(symlink(fixture.filesPath, fixture.root + "/FilesLink"), "symlink")
        expectInvalidPath("symbolic link") { _ = try SharedFiles(directory: fixture.root + "/FilesLink") }
        expectInvalidPath("symbolic link") { _ = try SharedFiles(directory: fixture.root + "/FilesLink/") }
        // Trailing slashes and dots are normalised away.
        #expect(try SharedFiles(directory: fixture.filesPath + "/./").directory == fixture.filesPath)
    }

    // MARK: Modes

    @Test("files are 0600 and directories 0700 whatever the umask", arguments: [mode_t(0), 0o077, 0o022, 0o777])
    func privateModes(_ mask: mode_t) async throws {
        let fixture = try SharedFilesFixture()
        defer { fixture.remove() }
        let files = try fixture.files()
        let root = fixture.filesPath
        let processUmask = SharedFilesFixture.processUmask()
        let control = try await SharedFilesFixture.withPrivateUmask(mask) { () throws -> mode_t? in
            try files.write(Data("x".utf8), to: "m/n/a.bin")
            try files.write(Data("y".utf8), to: "top.bin")
            // A file created without fchmod shows that the umask really was in effect.
            let fd = open(root + "/control", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
            if fd >= 0 { close(fd) }
            return SharedFilesFixture.mode(root + "/control")
        }
        #expect(control == 0o666 & ~mask)
        // The umask change stayed on the helper thread.
        #expect(processUmask != nil)
        #expect(SharedFilesFixture.processUmask() == processUmask)
        #expect(SharedFilesFixture.mode(root + "/m/n/a.bin") == 0o600)
        #expect(SharedFilesFixture.mode(root + "/top.bin") == 0o600)
        #expect(SharedFilesFixture.mode(root + "/m") == 0o700)
        #expect(SharedFilesFixture.mode(root + "/m/n") == 0o700)
        // An overwrite keeps the mode.
        try files.write(Data("z".utf8), to: "top.bin")
        #expect(SharedFilesFixture.mode(root + "/top.bin") == 0o600)
    }

    @Test("group-shared mode gives files 0660 and directories 2770", arguments: [mode_t(0), 0o077])
    func groupSharedModes(_ mask: mode_t) async throws {
        let fixture = try SharedFilesFixture()
        defer { fixture.remove() }
        let files = try fixture.files(.groupShared)
        #expect(SharingMode.groupShared.fileMode == 0o660)
        #expect(SharingMode.groupShared.directoryMode == 0o2770)
        #expect(SharingMode.privateToUser.fileMode == 0o600)
        #expect(SharingMode.privateToUser.directoryMode == 0o700)
        let root = fixture.filesPath
        try await SharedFilesFixture.withPrivateUmask(mask) {
            try files.write(Data("x".utf8), to: "g/h/a.bin")
        }
        #expect(SharedFilesFixture.mode(root + "/g/h/a.bin") == 0o660)
        #expect(SharedFilesFixture.mode(root + "/g") == 0o2770)
        #expect(SharedFilesFixture.mode(root + "/g/h") == 0o2770)
        // The shared directory itself is left alone.
        #expect(SharedFilesFixture.mode(root) == 0o700)
    }

    // MARK: Path validation

    struct BadPath: Sendable, CustomTestStringConvertible {
        var path: String
        var reason: String
        var testDescription: String { "\(KVStoreError.quote(path)) → \(reason)" }
    }

    static let badPaths: [BadPath] = [
        BadPath(path: "", reason: "empty"),
        BadPath(path: "../x", reason: "'..' component"),
        BadPath(path: "a/../../x", reason: "'..' component"),
        BadPath(path: "..", reason: "'..' component"),
        BadPath(path: "./x", reason: "'.' component"),
        BadPath(path: "a/./b", reason: "'.' component"),
        BadPath(path: "/etc/passwd", reason: "absolute"),
        BadPath(path: "/", reason: "absolute"),
        BadPath(path: "a\\b", reason: "backslash"),
        BadPath(path: "..\\x", reason: "backslash"),
        BadPath(path: "a\u{0}b", reason: "NUL"),
        BadPath(path: "a\u{1}b", reason: "control character U+0001"),
        BadPath(path: "a\nb", reason: "control character U+000A"),
        BadPath(path: "a\u{7F}", reason: "control character U+007F"),
        BadPath(path: "\u{FF0E}\u{FF0E}/x", reason: "normalises (NFKC) to '..'"),
        BadPath(path: "a/\u{FF0E}", reason: "normalises (NFKC) to '.'"),
        BadPath(path: "\u{2025}/x", reason: "normalises (NFKC) to '..'"),  // TWO DOT LEADER
        BadPath(path: "\u{2024}\u{2024}/x", reason: "normalises (NFKC) to '..'"),  // ONE DOT LEADER
        BadPath(path: "\u{FE52}\u{FE52}/x", reason: "normalises (NFKC) to '..'"),  // SMALL FULL STOP
        BadPath(path: "a\u{FF0F}b", reason: "normalises (NFKC) to a path separator"),
        BadPath(path: "a\u{FF3C}b", reason: "normalises (NFKC) to a path separator"),
        BadPath(path: "a\u{FE68}b", reason: "normalises (NFKC) to a path separator"),
        BadPath(path: "a\u{2215}b", reason: "U+2215, a look-alike of '/'"),
        BadPath(path: "a\u{2044}b", reason: "U+2044, a look-alike of '/'"),
        BadPath(path: "\u{2216}x", reason: "U+2216, a look-alike of '\\'"),
        BadPath(path: "a//b", reason: "empty component"),
        BadPath(path: "a/", reason: "ends with '/'"),
        BadPath(path: String(repeating: "a/", count: 512) + "b", reason: "1025 bytes, over the 1024-byte limit"),
        BadPath(path: String(repeating: "x", count: 1025), reason: "1025 bytes, over the 1024-byte limit"),
        BadPath(path: "d/" + String(repeating: "x", count: 256), reason: "256 bytes, over the 255-byte limit"),
        BadPath(path: ".kvtmp-0123456789abcdef", reason: "reserved for temporary files"),
        BadPath(path: "a/.kvtmp-x", reason: "reserved for temporary files"),
    ]

    @Test("the traversal corpus is rejected and nothing is written anywhere", arguments: badPaths)
    func rejectsBadPaths(_ bad: BadPath) throws {
        let fixture = try SharedFilesFixture()
        defer { fixture.remove() }
        let files = try fixture.files()
        try files.write(Data("keep".utf8), to: "a/keep")  // so that "a/…" paths have a real prefix
        let before = fixture.snapshot()

        expectInvalidPath(bad.reason) { _ = try SharedFiles.validate(bad.path) }
        expectInvalidPath(bad.reason) { try files.write(Data("evil".utf8), to: bad.path) }
        expectInvalidPath(bad.reason) { try files.write([0x65], to: bad.path) }
        expectInvalidPath(bad.reason) { _ = try files.read(bad.path) }
        expectInvalidPath(bad.reason) { try files.remove(bad.path) }
        expectInvalidPath(bad.reason) { _ = try files.url(for: bad.path) }
        #expect(!files.exists(bad.path))
        if !bad.path.isEmpty {
            expectInvalidPath(bad.reason) { _ = try files.list(bad.path) }
        }

        #expect(fixture.snapshot() == before)
        #expect(fixture.secretIsUntouched())
        #expect(!SharedFilesFixture.exists(fixture.root + "/x"))
        #expect(!SharedFilesFixture.exists(fixture.outside + "/x"))
    }

    @Test("the error description is one line naming the path and the rule")
    func invalidPathDescription() {
        let error = #expect(throws: KVStoreError.self) { try SharedFiles.validate("a/../../x") }
        #expect(error?.description == "invalid path \"a/../../x\": has a '..' component (parent-directory traversal)")
        let nul = #expect(throws: KVStoreError.self) { try SharedFiles.validate("a\u{0}b") }
        #expect(nul?.description == "invalid path \"a\\u{0}b\": contains a NUL character")
    }

    @Test("validate returns the components of good paths")
    func validateComponents() throws {
        #expect(try SharedFiles.validate("a") == ["a"])
        #expect(try SharedFiles.validate("TrainerImages/x.png") == ["TrainerImages", "x.png"])
        #expect(try SharedFiles.validate("...") == ["..."])
        #expect(try SharedFiles.validate(".hidden/..a/a..") == [".hidden", "..a", "a.."])
        #expect(try SharedFiles.validate(".kvtmp") == [".kvtmp"])
        #expect(try SharedFiles.validate("Bilder/Übung 1.png") == ["Bilder", "Übung 1.png"])
        #expect(try SharedFiles.validate(String(repeating: "x", count: 255)).count == 1)
        let longest = String(repeating: "abc/", count: 255) + "abcd"  // 1024 bytes
        #expect(longest.utf8.count == 1024)
        #expect(try SharedFiles.validate(longest).count == 256)
    }

    // MARK: Symbolic links

    @Test("a symbolic link as an intermediate directory is never followed")
    func intermediateSymlink() throws {
        let fixture = try SharedFilesFixture()
        defer { fixture.remove() }
        let files = try fixture.files()
        try SharedFilesFixture.check(symlink(fixture.outside, fixture.filesPath + "/link"), "symlink")
        try SharedFilesFixture.check(symlink("../outside", fixture.filesPath + "/rel"), "symlink")
        try files.write(Data("in".utf8), to: "sub/ok")
        try SharedFilesFixture.check(symlink(fixture.outside, fixture.filesPath + "/sub/deeplink"), "symlink")
        let before = fixture.snapshot()

        for link in ["link", "rel", "sub/deeplink"] {
            expectInvalidPath("'\(link)' is a symbolic link") { try files.write(Data("evil".utf8), to: "\(link)/secret") }
            expectInvalidPath("'\(link)' is a symbolic link") { try files.write(Data("evil".utf8), to: "\(link)/new/file") }
            expectInvalidPath("'\(link)' is a symbolic link") { _ = try files.read("\(link)/secret") }
            expectInvalidPath("'\(link)' is a symbolic link") { try files.remove("\(link)/secret") }
            expectInvalidPath("'\(link)' is a symbolic link") { _ = try files.list(link) }
            expectInvalidPath("'\(link)' is a symbolic link") { _ = try files.list("\(link)/x", recursive: true) }
            #expect(!files.exists("\(link)/secret"))
        }
        // Listings skip the links and do not descend into them.
        #expect(try files.list() == ["sub/"])
        #expect(try files.list(recursive: true) == ["sub/ok"])

        #expect(fixture.snapshot() == before)
        #expect(fixture.secretIsUntouched())
        #expect(!SharedFilesFixture.exists(fixture.outside + "/new"))
    }

    @Test("a symbolic link at the final name is never followed, but can be removed")
    func finalSymlink() throws {
        let fixture = try SharedFilesFixture()
        defer { fixture.remove() }
        let files = try fixture.files()
        try SharedFilesFixture.check(symlink(fixture.secret, fixture.filesPath + "/final"), "symlink")
        try files.write(Data("in".utf8), to: "d/x")
        try SharedFilesFixture.check(symlink("../../outside/secret", fixture.filesPath + "/d/rel"), "symlink")
        try SharedFilesFixture.check(symlink(fixture.outside + "/dangling", fixture.filesPath + "/dangling"), "symlink")
        let before = fixture.snapshot()

        for name in ["final", "d/rel", "dangling"] {
            expectInvalidPath("'\(name)' is a symbolic link") { _ = try files.read(name) }
            expectInvalidPath("'\(name)' is a symbolic link") { try files.write(Data("evil".utf8), to: name) }
            expectInvalidPath("'\(name)' is a symbolic link") { try files.write([0x65], to: name) }
            #expect(!files.exists(name))
        }
        #expect(try files.list() == ["d/"])
        #expect(fixture.snapshot() == before)
        #expect(fixture.secretIsUntouched())
        #expect(!SharedFilesFixture.exists(fixture.outside + "/dangling"))

        // Removing removes the link itself, never the target.
        try files.remove("final")
        try files.remove("d/rel")
        try files.remove("dangling")
        #expect(!SharedFilesFixture.exists(fixture.filesPath + "/final"))
        #expect(!SharedFilesFixture.exists(fixture.filesPath + "/d/rel"))
        #expect(fixture.secretIsUntouched())
        // Now the name is free and can be written as a regular file.
        try files.write(Data("mine".utf8), to: "final")
        #expect(try files.read("final") == Data("mine".utf8))
        #expect(fixture.secretIsUntouched())
    }

    @Test("a directory swapped for a symbolic link between two writes is refused")
    func directorySwappedForSymlink() throws {
        let fixture = try SharedFilesFixture()
        defer { fixture.remove() }
        let files = try fixture.files()
        try files.write(Data("1".utf8), to: "a/one")
        // Another process moves a/ out of the container and leaves a link to it behind.
        try SharedFilesFixture.check(rename(fixture.filesPath + "/a", fixture.outside + "/a-moved"), "rename")
        try SharedFilesFixture.check(symlink(fixture.outside + "/a-moved", fixture.filesPath + "/a"), "symlink")
        let before = fixture.snapshot()

        expectInvalidPath("'a' is a symbolic link") { try files.write(Data("2".utf8), to: "a/two") }
        expectInvalidPath("'a' is a symbolic link") { try files.write(Data("2".utf8), to: "a/one") }
        expectInvalidPath("'a' is a symbolic link") { _ = try files.read("a/one") }
        expectInvalidPath("'a' is a symbolic link") { try files.remove("a/one") }
        #expect(fixture.snapshot() == before)
        #expect(!SharedFilesFixture.exists(fixture.outside + "/a-moved/two"))
        #expect(FileManager.default.contents(atPath: fixture.outside + "/a-moved/one") == Data("1".utf8))
    }

    @Test("the shared directory itself swapped for a symbolic link is refused")
    func rootSwappedForSymlink() throws {
        let fixture = try SharedFilesFixture()
        defer { fixture.remove() }
        let files = try fixture.files()
        try files.write(Data("1".utf8), to: "one")
        try SharedFilesFixture.check(rename(fixture.filesPath, fixture.outside + "/Files-moved"), "rename")
        try SharedFilesFixture.check(symlink(fixture.outside + "/Files-moved", fixture.filesPath), "symlink")
        let before = fixture.snapshot()

        expectInvalidPath("symbolic link") { try files.write(Data("2".utf8), to: "two") }
        expectInvalidPath("symbolic link") { _ = try files.read("one") }
        expectInvalidPath("symbolic link") { _ = try files.list() }
        expectInvalidPath("symbolic link") { _ = try files.removeOrphanedTemporaryFiles() }
        #expect(!files.exists("one"))
        #expect(fixture.snapshot() == before)
    }

    // MARK: Atomicity

    @Test("a file being rewritten is never visible half-written")
    func atomicVisibility() async throws {
        let fixture = try SharedFilesFixture()
        defer { fixture.remove() }
        let files = try fixture.files()
        let size = 1 << 20
        let versions = 24
        let expected = (0..<versions).map { Data(repeating: UInt8($0), count: size) }
        try files.write(expected[0], to: "big/blob")

        let done = SharedFilesStopFlag()
        async let writer: Void = SharedFilesFixture.onThread {
            defer { done.set() }
            for round in 0..<3 {
                for version in 1..<versions {
                    try files.write(expected[(version + round) % versions], to: "big/blob")
                }
            }
        }
        async let reader: (reads: Int, torn: Int) = SharedFilesFixture.onThread {
            var reads = 0
            var torn = 0
            repeat {
                let data = try files.read("big/blob")
                reads += 1
                if let first = data.first, Int(first) < versions, data == expected[Int(first)] { continue }
                torn += 1
            } while !done.isSet
            return (reads, torn)
        }
        try await writer
        let result = try await reader
        #expect(result.torn == 0)
        #expect(result.reads > 1)
        // No temporary file is left once the writer is done.
        #expect(try FileManager.default.contentsOfDirectory(atPath: fixture.filesPath + "/big") == ["blob"])
    }

    // MARK: Temporary files

    @Test("orphaned temporary files are removed and never listed")
    func orphanedTemporaryFiles() throws {
        let fixture = try SharedFilesFixture()
        defer { fixture.remove() }
        let files = try fixture.files()
        try files.write(Data("k".utf8), to: "keep.txt")
        try files.write(Data("k".utf8), to: "sub/deeper/keep.txt")
        let oldTemporaries = ["/.kvtmp-dead1", "/sub/.kvtmp-dead2", "/sub/deeper/.kvtmp-dead3"]
        for name in oldTemporaries + ["/.kvtmp-fresh"] {
            #expect(FileManager.default.createFile(atPath: fixture.filesPath + name, contents: Data("partial".utf8)))
        }
        let hourAgo = Date(timeIntervalSinceNow: -3600)
        for name in oldTemporaries {
            try FileManager.default.setAttributes([.modificationDate: hourAgo], ofItemAtPath: fixture.filesPath + name)
        }
        // An old temporary-looking symbolic link pointing outside: not a regular file, left alone.
        try SharedFilesFixture.check(symlink(fixture.secret, fixture.filesPath + "/.kvtmp-link"), "symlink")
        // And a link to an outside directory holding an old temporary file: never descended into.
        try SharedFilesFixture.check(symlink(fixture.outside, fixture.filesPath + "/outlink"), "symlink")
        #expect(FileManager.default.createFile(atPath: fixture.outside + "/.kvtmp-outside", contents: Data()))
        try FileManager.default.setAttributes([.modificationDate: hourAgo], ofItemAtPath: fixture.outside + "/.kvtmp-outside")

        #expect(try files.list() == ["keep.txt", "sub/"])
        #expect(try files.list(recursive: true) == ["keep.txt", "sub/deeper/keep.txt"])

        #expect(try files.removeOrphanedTemporaryFiles(olderThan: 60) == 3)
        for name in oldTemporaries { #expect(!SharedFilesFixture.exists(fixture.filesPath + name)) }
        #expect(SharedFilesFixture.exists(fixture.filesPath + "/.kvtmp-fresh"))
        #expect(try files.removeOrphanedTemporaryFiles(olderThan: 60) == 0)
        #expect(try files.removeOrphanedTemporaryFiles(olderThan: 0) == 1)
        #expect(!SharedFilesFixture.exists(fixture.filesPath + "/.kvtmp-fresh"))

        #expect(SharedFilesFixture.exists(fixture.filesPath + "/.kvtmp-link"))
        #expect(SharedFilesFixture.exists(fixture.outside + "/.kvtmp-outside"))
        #expect(fixture.secretIsUntouched())
        #expect(try files.read("keep.txt") == Data("k".utf8))
        #expect(try files.read("sub/deeper/keep.txt") == Data("k".utf8))
    }

    @Test("a refused write onto a directory leaves no temporary file and changes nothing")
    func refusedWriteLeavesNothing() throws {
        let fixture = try SharedFilesFixture()
        defer { fixture.remove() }
        let files = try fixture.files()
        try files.write(Data("old".utf8), to: "d/target")
        try SharedFilesFixture.check(mkdir(fixture.filesPath + "/d/dir", 0o700), "mkdir")
        try SharedFilesFixture.check(mkdir(fixture.filesPath + "/d/dir/inner", 0o700), "mkdir")
        let before = fixture.snapshot()
        expectIOError(EISDIR) { try files.write(Data("new".utf8), to: "d/dir") }
        #expect(fixture.snapshot() == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: fixture.filesPath + "/d").sorted() == ["dir", "target"])
        #expect(try files.read("d/target") == Data("old".utf8))
    }
}

/// A flag set by one thread and polled by another.
final class SharedFilesStopFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.lock(); value = true; lock.unlock() }
    var isSet: Bool { lock.lock(); defer { lock.unlock() }; return value }
}
