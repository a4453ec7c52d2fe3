import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport
import Workloads

/// What the README says of kvtool is what kvtool does (issue 46, finding 9): the version it tells an
/// app to depend on is `kvtool --version`'s, and the collections it says `put` checks against an app's
/// type are the ones `put --help` lists (read from the registered apps) and `put` writes.
@Suite struct ReadmeClaimsTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.readme"

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    static func readme() throws -> String { try String(contentsOfFile: root + "/README.md", encoding: .utf8) }

    /// The backquoted words of `text` after `marker`, up to the first `)`.
    static func quotedNames(in text: String, after marker: String) -> [String]? {
        guard let start = text.range(of: marker) else { return nil }
        let rest = text[start.upperBound...]
        let list = rest[..<(rest.firstIndex(of: ")") ?? rest.endIndex)]
        return list.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }

    func kvtool(_ arguments: [String], stdin: String? = nil) throws -> ProcessResult {
        try run(productsDirectory() + "/kvtool", arguments + ["--root", dir.path, "--group", group], stdin: stdin, timeout: 120)
    }

    @Test(.blockingWork) func kvtoolVersionIsTheVersionTheReadmeTellsAnAppToDependOn() throws {
        let readme = try Self.readme()
        let named = Set(readme.matches(of: /from: "([0-9]+\.[0-9]+\.[0-9]+)"/).map { String($0.output.1) })
        #expect(named.count == 1, "the README names \(named.sorted()) in `from:`")
        let version = try run(productsDirectory() + "/kvtool", ["--version"], timeout: 60)
        #expect(version.status == 0 && version.stdout == (named.first ?? "?") + "\n", "\(version.stdout)\(version.stderr)")
    }

    /// The README's list of typed `put` targets is `put --help`'s (read from the registered apps); `put`
    /// writes each, checked as its app's type, into a container the apps' own code made; and the
    /// collections the README says only their app writes are refused.
    @Test(.blockingWork) func theReadmesTypedPutTargetsAreTheOnesPutChecksAndWrites() throws {
        let readme = try Self.readme()
        let listed = try #require(Self.quotedNames(in: readme, after: "`put` decodes a value as the type an app registered with kvtool (the demo's "))
        let appsOnly = try #require(Self.quotedNames(in: readme, after: "A collection with indexes or derived collections (the demo's "))
        #expect(!listed.isEmpty && !appsOnly.isEmpty && Set(listed).isDisjoint(with: appsOnly), "\(listed) \(appsOnly)")
        let help = try run(productsDirectory() + "/kvtool", ["put", "--help"], timeout: 60)
        let flat = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        let helpList = try #require(flat.range(of: #"type with kvtool \(([^)]*)\)"#, options: .regularExpression).map { String(flat[$0]) })
        #expect(helpList == "type with kvtool (\(listed.joined(separator: ", ")))", "\(helpList)")

        // The apps' own code makes their collections (one value each).
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        let checklist = try ChecklistStore(store: container.store)
        try container.store.write(author: "app") { tx in
            for record in ChecklistDataset.records(days: 2) { try checklist.records.put(record, forKey: record.day, in: tx) }
        }
        try SubscriptionSampleData.populate(SubscriptionStore(store: container.store))
        let push = try PushSDKStore(container: container)
        try push.record(ReceivedNotification(id: UUID(), receivedAt: Date(timeIntervalSince1970: 1_795_831_112), status: .rejected,
                                             payload: nil, error: "an example", rawJSON: "{}"))
        for name in listed + appsOnly {
            // The first entry, put back as it is: as `get` prints it, and as `put` takes it.
            let scan = try kvtool(["scan", name, "--limit", "1", "--json"])
            let entries = try JSONSerialization.jsonObject(with: Data(scan.stdout.utf8)) as? [[String: Any]]
            let entry = try #require(entries?.first, "\(name): \(scan.stdout)\(scan.stderr)")
            let printed = try #require(entry["key"], "\(name)")
            // A tuple key is printed as a JSON array, and taken as one.
            let key = try printed as? String
                ?? String(decoding: JSONSerialization.data(withJSONObject: printed, options: [.fragmentsAllowed, .withoutEscapingSlashes]), as: UTF8.self)
            let value = try kvtool(["get", name, key])
            #expect(value.status == 0, "\(name) \(key): \(value.stderr)")
            let put = try kvtool(["put", name, key, "-", "--json"], stdin: value.stdout)
            if listed.contains(name) {
                #expect(put.status == 0 && put.stdout.contains(#""checkedAs":""#), "\(name): \(put.stdout)\(put.stderr)")
            } else {
                #expect(put.status == 65 && put.stderr == "kvtool: error: collection '\(name)' has indexes or derived collections that only the app can maintain; kvtool does not write it\n",
                        "\(name): \(put.stderr)")
            }
        }
    }
}
