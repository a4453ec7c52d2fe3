import Foundation
import KVStore
import Testing
import TestSupport

/// The README's example is `Examples/ReadmeExample` word for word, a target the package builds (with no
/// warning: in its async `main`, `read` and `write` are the async ones). Run, it prints the widget's
/// view and then follows the app; then the README's shell lines read what it wrote.
@Suite struct ReadmeExampleTests {
    let dir = TemporaryDirectory()

    @Test(.blockingWork) func theReadmeExampleIsTheExampleTargetAndRuns() throws {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        let readme = try String(contentsOfFile: repository + "/README.md", encoding: .utf8)
        let example = try String(contentsOfFile: repository + "/Examples/ReadmeExample/Example.swift", encoding: .utf8)
        let block = try #require(readme.components(separatedBy: "## Example\n\n```swift\n").dropFirst().first?.components(separatedBy: "```").first)
        #expect(block == example, "README.md's example differs from Examples/ReadmeExample/Example.swift")
        // stdbuf: lines reach the test as printed (the example never ends; it is killed once they have).
        let process = try BackgroundProcess("/usr/bin/stdbuf", ["-oL", productsDirectory() + "/ReadmeExample"],
                                            environment: ["KVSTORE_ROOT": dir.path])
        defer { process.kill() }
        let followed = process.waitForLine(timeout: BuildScale.seconds(20)) { $0.hasSuffix("days this week") }
        #expect(followed == "1 days this week", "\(process.output)")
        #expect(process.output.first == "2026-11-21 1", "\(process.output)")

        // The README's shell lines, against the same container.
        let environment = ["KVSTORE_GROUP": "group.com.example.checklist", "KVSTORE_ROOT": dir.path]
        func kvtool(_ arguments: String...) throws -> ProcessResult {
            try run(productsDirectory() + "/kvtool", arguments, environment: environment)
        }
        let collections = try kvtool("collections")
        #expect(collections.status == 0, "\(collections.stderr)")
        #expect(collections.stdout.contains("dailyRecords"))
        let scan = try kvtool("scan", "dailyRecords", "--from", "2026-11-15", "--json")
        #expect(scan.stdout == #"[{"key":"2026-11-21","value":{"day":"2026-11-21","scores":{"think.1":4}}}]"# + "\n", "\(scan.stderr)")
        let lastSaved = try kvtool("defaults", "read", "lastSaved")
        #expect(lastSaved.stdout == "2026-11-21\n", "\(lastSaved.stderr)")
    }

    /// The README's example as an app builds it: in a package of its own that depends on this one by
    /// version. This repository's commit is cloned and tagged with ``KVStoreVersion/current`` (1.0.0),
    /// the example package names it `from:` that, and `swift build` must build it with no warning about
    /// the example. (The clone
    /// has what is committed: run it on a clean tree.) Not under a sanitizer: it builds nothing of this
    /// process.
    @Test(.blockingWork, .enabled(if: BuildScale.sanitizer == nil), .timeLimit(.minutes(20)))
    func theReadmeExampleBuildsInAPackageOfItsOwnThatDependsOnThisOneByVersion() throws {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        let clone = dir.path + "/kvstore", app = dir.path + "/readme-app"
        let cloned = try run("/usr/bin/git", ["clone", "--quiet", "--no-hardlinks", repository, clone], timeout: 120)
        try #require(cloned.status == 0, "\(cloned.stderr)")
        let tagged = try run("/usr/bin/git", ["-C", clone, "-c", "user.name=test", "-c", "user.email=test@example.com",
                                              "tag", "--no-sign", KVStoreVersion.current], timeout: 30)
        try #require(tagged.status == 0, "\(tagged.stderr)")
        try FileManager.default.createDirectory(atPath: app + "/Sources/ReadmeApp", withIntermediateDirectories: true)
        try """
            // swift-tools-version: 6.1
            import PackageDescription

            let package = Package(
                name: "ReadmeApp",
                dependencies: [.package(url: "file://\(clone)", from: "\(KVStoreVersion.current)")],
                targets: [
                    .executableTarget(name: "ReadmeApp", dependencies: [
                        .product(name: "KVStore", package: "kvstore"), .product(name: "SyncKit", package: "kvstore"),
                    ]),
                ]
            )

            """.write(toFile: app + "/Package.swift", atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(atPath: repository + "/Examples/ReadmeExample/Example.swift",
                                         toPath: app + "/Sources/ReadmeApp/Example.swift")
        let started = Date()
        let built = try run("/usr/bin/env", ["swift", "build", "--package-path", app, "--product", "ReadmeApp"], timeout: 1_080)
        print("[readme app] resolved and built in its own package in \(Int(Date().timeIntervalSince(started))) s")
        #expect(built.status == 0, "\(built.stdout.suffix(4_000))\(built.stderr.suffix(4_000))")
        let warnings = (built.stdout + built.stderr).split(separator: "\n").filter { $0.contains("Example.swift") && $0.contains("warning:") }
        #expect(warnings.isEmpty, "\(warnings.joined(separator: "\n"))")
        #expect(FileManager.default.isExecutableFile(atPath: app + "/.build/debug/ReadmeApp"))
    }
}
