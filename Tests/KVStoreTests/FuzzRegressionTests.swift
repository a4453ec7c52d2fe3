import Foundation
import Testing
import TestSupport
@testable import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// One test per bug that the fuzz properties (fuzz/Properties/) found in KVStore. The inputs that
/// showed them are also kept in fuzz/corpus/ and replayed by FuzzCorpusReplayTests; these tests say
/// what each bug was in terms of the API.
@Suite("Fuzz regressions")
struct FuzzRegressionTests {
    // MARK: Paths: a slash followed by a combining mark

    // Swift groups "/" and a following combining mark (U+0301) into one Character, so
    // `split(separator: "/")`, `hasPrefix("/")` and `contains("/")` did not see that slash, while the
    // kernel does. SharedFiles.validate accepted "/\u{301}x" (an absolute path: writing it as root
    // created a file at the top of the file system) and returned "link/\u{301}x" as one component,
    // which openat resolved through the symbolic link `link` (so O_NOFOLLOW protected nothing).

    @Test("validate cuts paths at every slash byte, combining marks or not")
    func combiningMarkAfterSlashIsStillASlash() throws {
        #expect(try SharedFiles.validate("a/\u{301}b") == ["a", "\u{301}b"])
        #expect(try SharedFiles.validate("a/\u{301}/b") == ["a", "\u{301}", "b"])
        expectRejectedPath("absolute") { _ = try SharedFiles.validate("/\u{301}etc/passwd") }
        expectRejectedPath("absolute") { _ = try SharedFiles.validate("/\u{301}") }
        expectRejectedPath("empty component") { _ = try SharedFiles.validate("a//\u{301}") }
        expectRejectedPath("ends with '/'") { _ = try SharedFiles.validate("a/\u{301}/") }
        expectRejectedPath("reserved for temporary files") { _ = try SharedFiles.validate(".kvtmp-\u{301}x") }
    }

    @Test("no write escapes through a slash with a combining mark")
    func combiningMarkAfterSlashCannotEscape() throws {
        let fixture = try SharedFilesFixture()
        defer { fixture.remove() }
        let files = try fixture.files()
        try SharedFilesFixture.check(symlink(fixture.outside, fixture.filesPath + "/link"), "symlink")
        let before = fixture.snapshot()

        expectRejectedPath("'link' is a symbolic link") { try files.write(Data("evil".utf8), to: "link/\u{301}x") }
        expectRejectedPath("'link' is a symbolic link") { _ = try files.read("link/\u{301}secret") }
        let name = "\u{301}kvstore-fuzz-regression-\(getpid())"
        expectRejectedPath("absolute") { try files.write(Data("evil".utf8), to: "/" + name) }
        #expect(!SharedFilesFixture.exists("/" + name))
        #expect(!SharedFilesFixture.exists(fixture.outside + "/\u{301}x"))
        #expect(fixture.snapshot() == before)
        #expect(fixture.secretIsUntouched())
    }

    @Test("container roots are normalised as the kernel reads them")
    func containerRootWithCombiningMark() throws {
        #expect(try ContainerRoot.resolve(explicit: "/\u{301}x", environment: [:]) == "/\u{301}x")
        #expect(ContainerRoot.normalize("/a/\u{301}/../b") == "/a/b")
        #expect(ContainerRoot.normalize("/a/\u{301}../b") == "/a/\u{301}../b")
    }
}

/// Asserts that `body` throws `KVStoreError.invalidPath` whose reason contains `fragment`.
private func expectRejectedPath(_ fragment: String, sourceLocation: SourceLocation = #_sourceLocation,
                                _ body: () throws -> Void) {
    do {
        try body()
        Issue.record("expected invalidPath(\(fragment)), nothing was thrown", sourceLocation: sourceLocation)
    } catch KVStoreError.invalidPath(_, let reason) {
        #expect(reason.contains(fragment), "reason was: \(reason)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected invalidPath(\(fragment)), got \(error)", sourceLocation: sourceLocation)
    }
}
