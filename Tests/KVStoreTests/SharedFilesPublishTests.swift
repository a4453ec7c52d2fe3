import Foundation
import Testing
import TestSupport
import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// `SharedFiles.publish(to:temporaryName:replacing:_:)` and `SharedFiles.entries(in:)`.
@Suite struct SharedFilesPublishTests {
    let dir = TemporaryDirectory()

    func files() throws -> SharedFiles {
        try FileManager.default.createDirectory(atPath: dir.path + "/Files", withIntermediateDirectories: true)
        return try SharedFiles(directory: dir.path + "/Files")
    }

    func contents(_ relative: String) throws -> String {
        String(decoding: try Data(contentsOf: URL(fileURLWithPath: dir.path + "/Files/" + relative)), as: UTF8.self)
    }

    @Test func publishesWhatFillWroteUnderTheFinalNameOnly() throws {
        let files = try files()
        let seen = try files.publish(to: "feeds/a.feed", temporaryName: ".kvtmp-a.feed-1-x") { fd, temporaryPath -> String in
            #expect(write(fd, "hello", 5) == 5)
            // While fill runs, only the temporary file exists, with the final mode already.
            var info = stat()
            #expect(stat(temporaryPath, &info) == 0 && info.st_mode & 0o777 == 0o600)
            #expect(!files.exists("feeds/a.feed"))
            return temporaryPath
        }
        #expect(seen == files.directory + "/feeds/.kvtmp-a.feed-1-x")
        #expect(try contents("feeds/a.feed") == "hello")
        #expect(try files.entries(in: "feeds").map(\.name) == ["a.feed"])
        // Replacing by default; the bytes convenience.
        try files.write(Array("world".utf8), to: "feeds/a.feed", temporaryName: ".kvtmp-a.feed-1-y")
        #expect(try contents("feeds/a.feed") == "world")
    }

    @Test func aFailedFillOrAnExistingTargetChangesNothing() throws {
        let files = try files()
        try files.write(Data("old".utf8), to: "x.bin")
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try files.publish(to: "x.bin", temporaryName: ".kvtmp-x.bin-1-z") { fd, _ in
                _ = write(fd, "new", 3)
                throw Boom()
            }
        }
        #expect(throws: KVStoreError.io(operation: "publish", path: files.directory + "/x.bin", errno: EEXIST)) {
            try files.publish(to: "x.bin", temporaryName: ".kvtmp-x.bin-1-z", replacing: false) { fd, _ in _ = write(fd, "new", 3) }
        }
        #expect(try contents("x.bin") == "old")
        #expect(try files.entries().map(\.name) == ["x.bin"])
        // Without replacing, a new name is published.
        try files.publish(to: "y.bin", temporaryName: ".kvtmp-y.bin-1-z", replacing: false) { fd, _ in _ = write(fd, "new", 3) }
        #expect(try contents("y.bin") == "new")
        #expect(try files.entries().map(\.name) == ["x.bin", "y.bin"])
    }

    @Test func badTemporaryNamesAndLinkedTargetsAreRefused() throws {
        let files = try files()
        for name in ["", "a/b", "..", ".kvtmp-a/b", "t.bin.tmp", ".kvtmp-a\u{0}b"] {
            #expect(throws: KVStoreError.self) { try files.publish(to: "t.bin", temporaryName: name) { _, _ in } }
        }
        #expect(symlink("/etc/hostname", dir.path + "/Files/link.bin") == 0)
        #expect(throws: KVStoreError.invalidPath("link.bin", reason: "'link.bin' is a symbolic link")) {
            try files.publish(to: "link.bin", temporaryName: ".kvtmp-link-1-a") { _, _ in }
        }
        // A taken temporary name is EEXIST, and the file holding it is left alone.
        #expect(FileManager.default.createFile(atPath: files.directory + "/.kvtmp-taken", contents: Data("mine".utf8)))
        #expect(throws: KVStoreError.io(operation: "create temporary file", path: files.directory + "/.kvtmp-taken", errno: EEXIST)) {
            try files.publish(to: "t.bin", temporaryName: ".kvtmp-taken") { _, _ in }
        }
        #expect(try contents(".kvtmp-taken") == "mine")
        #expect(!files.exists("t.bin"))
    }

    @Test func entriesReportKindsSizesAndHiddenFiles() throws {
        let files = try files()
        try files.write(Data("12345".utf8), to: "sub/.hidden")
        try files.write(Data("1".utf8), to: "sub/file")
        #expect(mkdir(dir.path + "/Files/sub/dir", 0o700) == 0)
        #expect(symlink("/etc", dir.path + "/Files/sub/link") == 0)
        let entries = try files.entries(in: "sub")
        #expect(entries.map(\.name) == [".hidden", "dir", "file", "link"])
        #expect(entries.map(\.kind) == [.file, .directory, .file, .symbolicLink])
        #expect(entries[0].size == 5 && entries[0].path == "sub/.hidden")
        #expect(abs(entries[0].modificationDate.timeIntervalSinceNow) < 60)
        #expect(throws: KVStoreError.fileNotFound(path: "nothing")) { try files.entries(in: "nothing") }
    }
}
