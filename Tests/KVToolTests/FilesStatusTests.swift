import Foundation
import Testing
import TestSupport
@testable import KVStore
import Workloads

/// `kvtool files status` (issue 49): one row per file of the manifest, with where this device's copy
/// of its bytes stands.
@Suite struct FilesStatusTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.files.status"

    func tool(_ arguments: String...) throws -> ProcessResult {
        try run(productsDirectory() + "/kvtool", arguments + ["--root", dir.path, "--group", group])
    }

    @Test(.blockingWork) func statusListsEachReplicatedFileWithItsStateHere() throws {
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        // Nothing declared: nothing to list.
        var r = try tool("files", "status", "--json")
        #expect(r.status == 0 && r.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "[]", "\(r.stderr)")

        try FileManifest.declare(prefix: "img/", fetch: .eager, in: container.store)
        let png = Array(TrainerNotificationFlow.samplePNG)
        let hex = SHA256Hasher.hex(SHA256Hasher.hash(png))
        try container.store.write { tx in
            _ = try container.files.write(png, to: "img/a.png", in: tx)
            _ = try container.files.write(Array("not replicated".utf8), to: "notes.txt", in: tx)
        }
        r = try tool("files", "status", "--json")
        #expect(r.status == 0, "\(r.stderr)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])
        #expect(rows.count == 1)
        #expect(rows.first?["path"] as? String == "img/a.png" && rows.first?["state"] as? String == "waiting_to_upload")
        #expect(rows.first?["sha256"] as? String == hex && rows.first?["size"] as? Int == png.count)
        #expect(rows.first?["type"] as? String == "image/png")

        r = try tool("files", "status")
        #expect(r.status == 0 && r.stdout.contains("waiting_to_upload") && r.stdout.contains(String(hex.prefix(12))), "\(r.stdout)")

        // The kept copy gone: missing, with the reason.
        #expect(unlink(container.layout.blobs + "/" + hex) == 0)
        r = try tool("files", "status")
        #expect(r.status == 0 && r.stdout.contains("missing") && r.stdout.contains("img/a.png") && r.stdout.contains("is gone"), "\(r.stdout)")
    }
}
