import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport

private let instant = Date(timeIntervalSince1970: 1_770_348_896)  // 2026-02-06T12:34:56+09:00
private let tokyo = ExportTimeFormat(timeZone: TimeZone(identifier: "Asia/Tokyo")!)

@Suite struct ExportFileTests {
    let dir = TemporaryDirectory()

    private func entries(_ path: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: path).sorted()
    }

    @Test func namesFollowThePattern() throws {
        let pattern = ExportFileName(prefix: "subscriptions_export_", pathExtension: "json")
        let name = try pattern.name(at: instant, format: tokyo)
        #expect(name == "subscriptions_export_20260206_123456.json")
        #expect(pattern.matches(name))
        for other in ["subscriptions_export_20260206_123456.csv", "subscriptions_export_2026020_1234567.json",
                      "subscriptions_export_20260206-123456.json", "subscriptions_export_2026020a_123456.json",
                      "subscriptions_events_20260206_123456.json", "subscriptions_export_20260206_123456.json.tmp"] {
            #expect(!pattern.matches(other), "\(other)")
        }
    }

    @Test func aPatternThatWouldNotGiveOnePlainFileNameIsRejected() {
        let tokyo = tokyo
        #expect(throws: ExportError.self) {
            try ExportFileName(prefix: "../escape_", pathExtension: "json").name(at: instant, format: tokyo)
        }
        #expect(throws: ExportError.self) {
            try ExportFileName(prefix: ".hidden_", pathExtension: "json").name(at: instant, format: tokyo)
        }
        #expect(throws: ExportError.invalidFileName("a/b", reason: "a file name cannot contain '/'")) {
            try ExportFileName.check("a/b")
        }
        #expect(ExportError.invalidFileName("a/b", reason: "a file name cannot contain '/'").description
                == "invalid export file name \"a/b\": a file name cannot contain '/'")
    }

    /// A slash or a leading dot followed by a combining mark is one Swift Character, which
    /// `contains("/")` and `hasPrefix(".")` did not see; the file system sees the slash and the dot.
    @Test func aSlashOrALeadingDotWithACombiningMarkIsStillRejected() {
        #expect(throws: ExportError.invalidFileName("sub/\u{301}x.json", reason: "a file name cannot contain '/'")) {
            try ExportFileName.check("sub/\u{301}x.json")
        }
        #expect(throws: ExportError.invalidFileName(".\u{301}x.json", reason: "a file name cannot start with '.'")) {
            try ExportFileName.check(".\u{301}x.json")
        }
    }

    @Test func writingLeavesExactlyTheFileWithItsContentsAndNoTemporaryFile() throws {
        let file = ExportFile(name: "subscriptions_events_20260206_123456.csv", contents: Data("a,b\r\n1,2\r\n".utf8))
        let path = try file.write(toDirectory: dir.path)
        #expect(path == dir.path + "/subscriptions_events_20260206_123456.csv")
        #expect(try entries(dir.path) == ["subscriptions_events_20260206_123456.csv"])
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == file.contents)
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test func writingAgainReplacesTheWholeFile() throws {
        let name = "subscriptions_export_20260206_123456.json"
        try ExportFile(name: name, contents: Data(String(repeating: "old ", count: 1000).utf8)).write(toDirectory: dir.path)
        try ExportFile(name: name, contents: Data("new".utf8)).write(toDirectory: dir.path)
        #expect(try String(contentsOfFile: dir.path + "/" + name, encoding: .utf8) == "new")
        #expect(try entries(dir.path) == [name])
    }

    @Test func aFailedWriteLeavesNoTemporaryFileAndNoTarget() throws {
        // A directory already has the name: the rename fails, and the temporary file is removed.
        let name = "subscriptions_export_20260206_123456.json"
        try FileManager.default.createDirectory(atPath: dir.path + "/" + name, withIntermediateDirectories: false)
        #expect(throws: KVStoreError.self) {
            try ExportFile(name: name, contents: Data("x".utf8)).write(toDirectory: dir.path)
        }
        #expect(try entries(dir.path) == [name])
        #expect(try entries(dir.path + "/" + name) == [])
    }

    @Test func aMissingDirectoryOrABadNameIsAClearError() throws {
        let missing = dir.path + "/nope"
        do {
            try ExportFile(name: "x.csv", contents: Data()).write(toDirectory: missing)
            Issue.record("wrote into a missing directory")
        } catch let error as KVStoreError {
            #expect(error.description.contains(missing))
            #expect(!error.description.contains("\n"))
        }
        #expect(throws: ExportError.self) {
            try ExportFile(name: "sub/x.csv", contents: Data()).write(toDirectory: dir.path)
        }
        #expect(try entries(dir.path) == [])
    }
}
