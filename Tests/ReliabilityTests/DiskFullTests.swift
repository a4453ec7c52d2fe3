import Foundation
import KVStore
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

extension ReliabilityTests {
    /// A container on a 6 MiB tmpfs, mounted in a private mount namespace (`unshare`), filled up.
    @Suite struct DiskFull {
        let dir = TemporaryDirectory()
        let group = "group.com.example.diskfull"
        /// `unshare`; `KVSTORE_UNSHARE` names another (a missing one shows what CI=1 does without it).
        let unshare = ProcessInfo.processInfo.environment["KVSTORE_UNSHARE"] ?? "/usr/bin/unshare"

        /// The `unshare` options that let this machine mount a tmpfs in a new mount namespace: a user
        /// namespace too (`-rm`, works without privileges where allowed) or just the mount namespace
        /// (`-m`, as root); or, if neither works (a container without the capability, say), why not.
        func mountNamespace(_ mountPoint: String) throws -> Result<[String], NamespaceUnavailable> {
            guard FileManager.default.isExecutableFile(atPath: unshare) else {
                return .failure(NamespaceUnavailable(reason: "\(unshare) is missing (util-linux)"))
            }
            var reasons: [String] = []
            for options in [["-rm"], ["-m"]] {
                let probe = try run(unshare, options + ["sh", "-c", "mount -t tmpfs -o size=1m tmpfs \"$1\"", "sh", mountPoint])
                if probe.status == 0 { return .success(options) }
                reasons.append("`unshare \(options.joined(separator: " "))` exit \(probe.status): \(probe.stderr.trimmingCharacters(in: .whitespacesAndNewlines))")
            }
            return .failure(NamespaceUnavailable(reason: reasons.joined(separator: "; ")))
        }

        struct NamespaceUnavailable: Error { var reason: String }

        @Test(.blockingWork) func aFullDiskFailsCommitsWithATypedErrorKeepsEveryCommitAndRecoversWhenSpaceIsFreed() throws {
            let mountPoint = dir.path + "/small"
            try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
            let namespace: [String]
            switch try mountNamespace(mountPoint) {
            case .success(let options):
                namespace = options
            case .failure(let unavailable):
                // The test mounts nothing outside a private namespace. Outside CI it may skip, saying
                // so; in CI (CI=1) a disk-full test that filled no disk must not pass.
                let why = "cannot mount a 6 MiB tmpfs in a private mount namespace, so no disk was filled: \(unavailable.reason). "
                    + "Run the tests as root, or where unprivileged user namespaces are allowed (sysctl kernel.unprivileged_userns_clone=1), "
                    + "or in a container with CAP_SYS_ADMIN"
                if isCI {
                    Issue.record(Comment(rawValue: "CI=\(ProcessInfo.processInfo.environment["CI"] ?? ""): \(why)"))
                } else {
                    report("disk-full", "SKIPPED (outside CI): \(why)")
                }
                return
            }
            // The helper runs inside the namespace, on the tmpfs; the mount vanishes with it.
            let script = "mount -t tmpfs -o size=6m tmpfs \"$1\" && exec \"$2\" disk-full \"$1\" \"$3\" \"$1/filler\" \"$4\""
            let started = monotonicNow()
            let process = try BackgroundProcess(unshare, namespace + ["sh", "-c", script, "sh", mountPoint,
                                                                               productsDirectory() + "/kvtest-helper", group, kvtool])
            let (status, lines, stderr) = process.wait()
            let seconds = Double(monotonicNow() - started) / 1e9
            #expect(process.process.terminationReason == .exit && status == 0, "\(describeTermination(process)): \(stderr)")
            func line(_ prefix: String) -> [String: String] {
                guard let found = lines.first(where: { $0.hasPrefix(prefix + " ") }) else { return [:] }
                var fields = summaryFields(found)
                // The error's text, which has spaces, comes last.
                if let range = found.range(of: " text=") { fields["text"] = String(found[range.upperBound...]) }
                return fields
            }

            let filled = line("filled")
            let error = line("error")
            let commits = Int(filled["commits"] ?? "") ?? 0
            #expect(commits > 100, "\(lines)")
            // The failed commit's error is LMDB's, typed: ENOSPC, or EIO where a write came up short.
            #expect(error["type"] == "LMDBError", "\(lines)")
            #expect([String(ENOSPC), String(EIO)].contains(error["code"] ?? ""), "\(lines)")
            let later = (lines.first { $0.hasPrefix("later ") }?.dropFirst(6) ?? "").split(separator: ",")
            #expect(later.count == 5)
            #expect(later.allSatisfy { ["LMDBError:\(ENOSPC)", "LMDBError:\(EIO)", "committed"].contains(String($0)) }, "\(later)")
            // Publications on the full disk either fit or fail with a typed error; nothing half-written stays.
            let feed = line("feed"), snapshot = line("snapshot")
            #expect(feed["published"] != nil || feed["type"] == "KVStoreError", "\(feed)")
            #expect(snapshot["exported"] != nil || ["KVStoreError", "LMDBError"].contains(snapshot["type"] ?? ""), "\(snapshot)")
            #expect(line("temporary")["files"] == "0", "\(lines)")
            #expect(line("feed-read")["consistent"] == "true")
            // Every commit made before the disk filled up is there and intact; the store checks clean.
            let readable = line("readable")
            #expect(readable["ok"] == String(commits) && readable["bad"] == "0", "\(readable)")
            #expect(readable["history"] == "0" && readable["check"] == "0", "\(readable)")
            // Once space is freed, writes resume.
            #expect(line("resumed")["commits"] == "8")
            let after = line("after")
            #expect(after["bad"] == "0" && after["history"] == "0" && after["check"] == "0", "\(after)")
            #expect((Int(after["ok"] ?? "") ?? 0) >= commits + 8)

            report("disk-full", "6 MiB tmpfs in `unshare \(namespace.joined(separator: " "))`: \(commits) durable commits of 4 KiB records "
                   + "(\(filled["pages"] ?? "?") pages), then the commit failed with \(error["type"] ?? "?") \(error["code"] ?? "?") (\(error["text"] ?? "?")); "
                   + "5 more attempts: \(later.joined(separator: ", "))")
            report("disk-full", "on the full disk: feed \(feed["published"].map { "published generation \($0)" } ?? "failed: \(feed["text"] ?? "?")"), "
                   + "snapshot \(snapshot["exported"].map { "exported generation \($0)" } ?? "failed: \(snapshot["text"] ?? "?")"), 0 temporary files left; "
                   + "\(readable["ok"] ?? "?") earlier commits readable, kvtool check exit \(readable["check"] ?? "?"); "
                   + "after deleting 64 KiB: 8 more commits, \(after["ok"] ?? "?") readable, kvtool check exit \(after["check"] ?? "?") (\(fixed(seconds)) s)")
        }
    }
}
