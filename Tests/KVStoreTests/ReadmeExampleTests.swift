import Foundation
import KVStore
import Testing
import TestSupport

/// The README's example is `Examples/ReadmeExample` word for word, a target the package builds (with no
/// warning: in its async `main`, `read` and `write` are the async ones). Run, it prints the widget's
/// view and then follows the app; then the README's shell lines read what it wrote.
@Suite struct ReadmeExampleTests {
    let dir = TemporaryDirectory()

    @Test func theReadmeExampleIsTheExampleTargetAndRuns() throws {
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
}
