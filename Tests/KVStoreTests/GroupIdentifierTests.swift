import Foundation
import Testing
import TestSupport
@testable import KVStore
#if canImport(Glibc)
import Glibc
#endif

@Suite("GroupIdentifier")
struct GroupIdentifierTests {
    static let label63 = String(repeating: "a", count: 63)

    static let valid: [String] = [
        "group.com.example.app",
        "group.com.yourcompany.VirtualTrainer",
        "group.a.b",
        "group.x-1.y2",
        "group.123.456",
        "group.Com.Example-Shared.App2",
        "group.\(label63).\(label63)",
        // Exactly 255 bytes: 6 + 63 + 1 + 63 + 1 + 63 + 1 + 57.
        "group.\(label63).\(label63).\(label63).\(String(repeating: "b", count: 57))",
    ]

    @Test("accepts valid identifiers", arguments: valid)
    func acceptsValid(_ raw: String) throws {
        let id = try GroupIdentifier(raw)
        #expect(id.rawValue == raw)
        #expect(id.description == raw)
        #expect("\(id)" == raw)
        #expect(try GroupIdentifier(raw) == id)
        #expect(Set([id, try GroupIdentifier(raw)]).count == 1)
    }

    @Test("the 255-byte case really is 255 bytes")
    func boundaryLength() throws {
        #expect(Self.valid.last?.utf8.count == 255)
        _ = try GroupIdentifier(Self.valid.last ?? "")
    }

    struct Invalid: Sendable, CustomTestStringConvertible {
        var raw: String
        var reason: String  // a fragment the reason must contain
        var testDescription: String { "\(KVStoreError.quote(raw)) → \(reason)" }
    }

    static let invalid: [Invalid] = [
        Invalid(raw: "", reason: "empty"),
        Invalid(raw: "com.example.app", reason: "does not start with 'group.'"),
        Invalid(raw: "Group.com.example", reason: "does not start with 'group.'"),
        Invalid(raw: "groupcom.example.app", reason: "does not start with 'group.'"),
        Invalid(raw: "group.com..example", reason: "'..'"),
        Invalid(raw: "group...", reason: "'..'"),
        Invalid(raw: "group.com.example.", reason: "empty label"),
        Invalid(raw: "group..com.example", reason: "'..'"),
        Invalid(raw: "group.com/example", reason: "'/'"),
        Invalid(raw: "group.com.example/../../../tmp/x", reason: "'/'"),
        Invalid(raw: "group.com\\example", reason: "'\\'"),
        Invalid(raw: "group.com.exa\u{0}mple", reason: "NUL"),
        Invalid(raw: "group.com.exa mple", reason: "whitespace"),
        Invalid(raw: "group.com.example\t", reason: "whitespace"),
        Invalid(raw: "group.com.example\n", reason: "whitespace"),
        Invalid(raw: " group.com.example", reason: "whitespace"),
        Invalid(raw: "group.com.exa\u{A0}mple", reason: "whitespace"),
        Invalid(raw: "group.com.ex\u{7F}ample", reason: "control character U+007F"),
        Invalid(raw: "group.com.ex\u{1B}ample", reason: "control character U+001B"),
        Invalid(raw: "group.com.exämple", reason: "non-ASCII character U+00E4"),
        Invalid(raw: "group.com\u{FF0E}example", reason: "U+FF0E (a look-alike of '.')"),
        Invalid(raw: "group.com.example\u{2215}x", reason: "U+2215 (a look-alike of '/')"),
        Invalid(raw: "group.com.example\u{2044}x", reason: "U+2044 (a look-alike of '/')"),
        Invalid(raw: "group.com.\u{0435}xample", reason: "non-ASCII character U+0435"),  // Cyrillic е
        Invalid(raw: "group." + String(repeating: "a.", count: 124) + "ab", reason: "256 bytes, over the 255-byte limit"),
        Invalid(raw: "group.com.\(label63)a", reason: "64 bytes, over the 63-byte limit"),
        Invalid(raw: "group.-com.example", reason: "label '-com' starts with '-'"),
        Invalid(raw: "group.com.example-", reason: "label 'example-' ends with '-'"),
        Invalid(raw: "group.com.-", reason: "starts with '-'"),
        Invalid(raw: "group.com", reason: "at least two labels"),
        Invalid(raw: "group.example-app", reason: "at least two labels"),
        Invalid(raw: "group.", reason: "no labels"),
        Invalid(raw: "group.com.exa_mple", reason: "contains '_'"),
        Invalid(raw: "group.com.example:1", reason: "contains ':'"),
    ]

    @Test("rejects invalid identifiers with a specific reason", arguments: invalid)
    func rejectsInvalid(_ testCase: Invalid) {
        let error = #expect(throws: KVStoreError.self) { try GroupIdentifier(testCase.raw) }
        guard case .invalidGroupIdentifier(let raw, let reason)? = error else {
            Issue.record("expected invalidGroupIdentifier, got \(String(describing: error))")
            return
        }
        #expect(raw == testCase.raw)
        #expect(reason.contains(testCase.reason), "reason was: \(reason)")
        // The description is one line that quotes the identifier and states the reason.
        let description = error?.description ?? ""
        #expect(description.hasPrefix("invalid group identifier "))
        #expect(description.contains(reason))
        #expect(!description.contains("\n"))
    }

    @Test("every rule gives its own reason")
    func reasonsAreSpecific() {
        let reasons = Self.invalid.compactMap { GroupIdentifier.problem(with: $0.raw) }
        #expect(reasons.count == Self.invalid.count)
        #expect(Set(reasons).count >= 25)
        #expect(Self.valid.allSatisfy { GroupIdentifier.problem(with: $0) == nil })
    }

    @Test("validation happens before the file system is touched")
    func validationPrecedesFileSystem() throws {
        let root = TemporaryDirectory()
        let before = root.listing()
        // A caller that builds the container path from the identifier (as the container code does)
        // never reaches mkdir for an invalid identifier, not even for traversal attempts.
        for raw in ["group.com.example/../../../escape", "../escape", "group.a.b/..", "group.a\u{FF0E}\u{FF0E}/x", ""] {
            #expect(throws: KVStoreError.self) {
                let id = try GroupIdentifier(raw)
                mkdir(root.path + "/" + id.rawValue, 0o700)
            }
        }
        #expect(root.listing() == before)
        #expect(access(root.path + "/../escape", F_OK) != 0)
        // The valid case does reach the file system.
        let id = try GroupIdentifier("group.com.example.app")
        #expect(mkdir(root.path + "/" + id.rawValue, 0o700) == 0)
        #expect(root.listing() == before + ["group.com.example.app"])
    }
}

@Suite("ContainerRoot")
struct ContainerRootTests {
    @Test("an explicit root wins over every variable")
    func explicitWins() throws {
        let env = ["KVSTORE_ROOT": "/env/root", "XDG_DATA_HOME": "/xdg", "HOME": "/home/me"]
        #expect(try ContainerRoot.resolve(explicit: "/explicit/root", environment: env) == "/explicit/root")
    }

    @Test("KVSTORE_ROOT, then XDG_DATA_HOME/kvstore, then HOME/.local/share/kvstore")
    func order() throws {
        var env = ["KVSTORE_ROOT": "/env/root", "XDG_DATA_HOME": "/xdg", "HOME": "/home/me"]
        #expect(try ContainerRoot.resolve(explicit: nil, environment: env) == "/env/root")
        env["KVSTORE_ROOT"] = nil
        #expect(try ContainerRoot.resolve(explicit: nil, environment: env) == "/xdg/kvstore")
        env["XDG_DATA_HOME"] = nil
        #expect(try ContainerRoot.resolve(explicit: nil, environment: env) == "/home/me/.local/share/kvstore")
        env["HOME"] = nil
        let error = #expect(throws: KVStoreError.self) { try ContainerRoot.resolve(explicit: nil, environment: env) }
        guard case .invalidPath(_, let reason)? = error else {
            Issue.record("expected invalidPath, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("KVSTORE_ROOT"))
    }

    @Test("empty values are skipped")
    func emptySkipped() throws {
        let env = ["KVSTORE_ROOT": "", "XDG_DATA_HOME": "", "HOME": "/home/me"]
        #expect(try ContainerRoot.resolve(explicit: "", environment: env) == "/home/me/.local/share/kvstore")
        #expect(try ContainerRoot.resolve(explicit: nil, environment: ["KVSTORE_ROOT": "", "XDG_DATA_HOME": "/x"]) == "/x/kvstore")
    }

    @Test("a relative XDG_DATA_HOME is ignored, as the XDG spec requires")
    func relativeXDGIgnored() throws {
        let env = ["XDG_DATA_HOME": "relative/data", "HOME": "/home/me"]
        #expect(try ContainerRoot.resolve(explicit: nil, environment: env) == "/home/me/.local/share/kvstore")
        #expect(throws: KVStoreError.self) {
            try ContainerRoot.resolve(explicit: nil, environment: ["XDG_DATA_HOME": "relative", "HOME": "also/relative"])
        }
    }

    @Test("relative explicit and KVSTORE_ROOT paths resolve against the current directory")
    func relativeResolvesAgainstCurrentDirectory() throws {
        #expect(try ContainerRoot.resolve(explicit: "data/../groups", environment: [:], currentDirectory: "/work/dir")
            == "/work/dir/groups")
        #expect(try ContainerRoot.resolve(explicit: nil, environment: ["KVSTORE_ROOT": "./r"], currentDirectory: "/w")
            == "/w/r")
        // With the real current directory.
        let cwd = ContainerRoot.normalize(FileManager.default.currentDirectoryPath)
        let resolved = try ContainerRoot.resolve(explicit: "some-root", environment: [:])
        #expect(resolved == (cwd == "/" ? "/some-root" : cwd + "/some-root"))
    }

    @Test("the result is lexically normalised", arguments: [
        ("/a//b/./c/../d/", "/a/b/d"),
        ("/", "/"),
        ("/..", "/"),
        ("/../../x", "/x"),
        ("//double//slash//", "/double/slash"),
        ("/a/b/..", "/a"),
        ("/a/./././b", "/a/b"),
    ])
    func normalised(_ input: String, _ expected: String) throws {
        #expect(try ContainerRoot.resolve(explicit: input, environment: [:]) == expected)
        #expect(try ContainerRoot.resolve(explicit: nil, environment: ["KVSTORE_ROOT": input]) == expected)
    }

    @Test("a NUL in the root is rejected")
    func nulRejected() {
        for (explicit, env) in [("/a\u{0}b", [String: String]()), (nil, ["KVSTORE_ROOT": "/a\u{0}b"])] as [(String?, [String: String])] {
            let error = #expect(throws: KVStoreError.self) { try ContainerRoot.resolve(explicit: explicit, environment: env) }
            guard case .invalidPath(let path, let reason)? = error else {
                Issue.record("expected invalidPath, got \(String(describing: error))")
                continue
            }
            #expect(path == "/a\u{0}b")
            #expect(reason.contains("NUL"))
        }
    }

    @Test("resolving creates nothing")
    func createsNothing() throws {
        let root = TemporaryDirectory()
        let target = root.path + "/not/yet/there"
        #expect(try ContainerRoot.resolve(explicit: nil, environment: ["KVSTORE_ROOT": target]) == target)
        #expect(try ContainerRoot.resolve(explicit: nil, environment: ["XDG_DATA_HOME": target]) == target + "/kvstore")
        #expect(root.listing().isEmpty)
    }
}

extension TemporaryDirectory {
    /// The names in the directory, sorted.
    func listing() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }
}
