import Foundation
import Testing
import TestSupport
@testable import KVStore
import Workloads

@Suite struct SharedContainerTests {
    let dir = TemporaryDirectory()

    func mode(_ path: String) -> mode_t {
        var info = stat()
        lstat(path, &info)
        return info.st_mode & 0o7777
    }

    @Test(.blockingWork) func layoutAndPermissions() throws {
        let container = try dir.container("group.com.example.layout")
        #expect(container.path == dir.path + "/group.com.example.layout")
        for sub in ["", "/Store", "/Files", "/Snapshots", "/Notify"] {
            #expect(mode(container.path + sub) == 0o700, "\(sub)")
        }
        #expect(mode(container.storeDirectory + "/data.mdb") == 0o600)
        #expect(mode(container.storeDirectory + "/lock.mdb") == 0o600)

        var shared = SharedContainer.Options()
        shared.sharing = .groupShared
        let group = try dir.container("group.com.example.shared", options: shared)
        #expect(mode(group.path) == 0o2770)
        #expect(mode(group.storeDirectory + "/data.mdb") == 0o660)
    }

    @Test(.blockingWork) func badGroupIdentifiersTouchNothing() throws {
        for bad in ["", "com.example.app", "group.", "group..a", "group.a/../b", "group.com.example/x", "../group.com.x",
                    "group.com.ex ample", "group.com.\u{0}x", "group.com.ｅxample", "group." + String(repeating: "a.", count: 130) + "b"] {
            do {
                _ = try SharedContainer(groupIdentifier: bad, root: dir.path)
                Issue.record("\(bad) must be rejected")
            } catch let error as KVStoreError {
                guard case .invalidGroupIdentifier = error else { Issue.record("\(error)"); continue }
            }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
    }

    @Test(.blockingWork) func readOnlyContainerNeedsAnExistingOne() throws {
        var options = SharedContainer.Options()
        options.readOnly = true
        #expect(throws: (any Error).self) { try dir.container("group.com.example.none", options: options) }
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/group.com.example.none"))
        let writer = try dir.container("group.com.example.ro")
        try writer.defaults().set("v", forKey: "k")
        // Within one process both handles share the environment, so check from another process.
        let r = try helper(["read-defaults", dir.path, "group.com.example.ro", "k"])
        #expect(r.stdout == "v\n", "\(r.stderr)")
    }

    @Test(.blockingWork) func symlinkedContainerPartsAreRefused() throws {
        let outside = TemporaryDirectory()
        let path = dir.path + "/group.com.example.link"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: path + "/Files", withDestinationPath: outside.path)
        #expect(throws: KVStoreError.self) { try dir.container("group.com.example.link") }
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.path).isEmpty)
    }

    @Test(.blockingWork) func aReaderSeesCollectionsAndSuitesCreatedByAnotherProcessAfterItOpenedThem() throws {
        let group = "group.com.example.late"
        // Another process creates the container; this one opens it read-only, like a widget, with
        // handles on a collection and a suite that no process has created yet.
        #expect(try helper(["write-defaults", dir.path, group, "k", "v"]).status == 0)
        var options = SharedContainer.Options()
        options.readOnly = true
        let widget = try SharedContainer(groupIdentifier: group, root: dir.path, options: options)
        let blobs = try widget.store.collection("blobs", key: Int.self, value: [UInt8].self)
        let other = try widget.defaults(suite: "other")
        #expect(try blobs.get(0) == nil)
        #expect(try blobs.count() == 0)
        #expect(try other.string(forKey: "k") == nil)
        let before = try widget.store.read { tx in try blobs.entries(in: tx).count }
        #expect(before == 0)

        // The app process creates both, then this process reads them through the handles it kept:
        // alone, and in one transaction that begins before this process has the databases open.
        let grow = try helper(["grow", dir.path, group, "blobs", "3", "10", "0"])
        #expect(grow.status == 0, "\(grow.stderr)")
        #expect(try helper(["write-suite", dir.path, group, "other", "k", "late"]).status == 0)
        let seen = try widget.store.read { tx in
            (try blobs.entries(in: tx).map(\.key), try other.object(forKey: "k", in: tx) as? String)
        }
        #expect(seen.0 == [0, 1, 2])
        #expect(seen.1 == "late")
        #expect(try blobs.get(2) == [UInt8](repeating: 2, count: 10))
        #expect(try other.string(forKey: "k") == "late")
    }

    @Test(.blockingWork) func trainerFlowAcrossProcesses() throws {
        let group = "group.com.example.trainer"
        let container = try dir.container(group)
        let trainers = TrainerNotificationFlow.sampleTrainers
        try TrainerNotificationFlow.publish(trainers: trainers, selected: trainers[1].id,
                                            images: [trainers[1].id: TrainerNotificationFlow.samplePNG], in: container)
        func sender(_ group: String) throws -> NotificationSender {
            let r = try helper(["sender", dir.path, group])
            #expect(r.status == 0, "\(r.stderr)")
            return try JSONDecoder().decode(NotificationSender.self, from: Data(r.stdout.utf8))
        }
        var s = try sender(group)
        #expect(s.displayName == "月城 レイ")
        #expect(s.handle == trainers[1].id.uuidString)
        #expect(s.imageBytes == TrainerNotificationFlow.samplePNG.count)
        #expect(s.fallbackReason == nil)

        try container.files.write(Data("garbage".utf8), to: OshiTrainerTemplate.imagePath(for: trainers[1].id))
        s = try sender(group)
        #expect(s.displayName == "月城 レイ")
        #expect(s.imageBytes == nil)
        #expect(s.imageProblem?.contains("not a PNG") == true)

        try container.files.remove(OshiTrainerTemplate.imagePath(for: trainers[1].id))
        s = try sender(group)
        #expect(s.imageBytes == nil)

        try container.defaults().set(UUID().uuidString, forKey: TrainerDefaultsKey.selectedTrainerId)
        s = try sender(group)
        #expect(s.displayName == "推乃 愛")
        #expect(s.fallbackReason != nil)

        try container.defaults().removeObject(forKey: TrainerDefaultsKey.selectedTrainerId)
        #expect(try sender(group).fallbackReason == "no trainer is selected")

        try container.defaults().set("not a list", forKey: TrainerDefaultsKey.trainerTemplates)
        try container.defaults().set(trainers[0].id.uuidString, forKey: TrainerDefaultsKey.selectedTrainerId)
        #expect(try sender(group).fallbackReason?.contains("unreadable") == true)

        s = try sender("group.com.example.missing")
        #expect(s.displayName == "推乃 愛")
        #expect(s.fallbackReason?.contains("App Group") == true)
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/group.com.example.missing"))
    }
}
