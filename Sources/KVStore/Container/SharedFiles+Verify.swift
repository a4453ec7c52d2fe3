#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

extension SharedFiles {
    /// A container's file whose bytes are not what their name or their manifest row says.
    package struct VerifyProblem: Hashable, Sendable, CustomStringConvertible {
        /// `Blobs/<hash>` or `Files/<path>`.
        package var file: String
        package var reason: String

        package var description: String { "\(file): \(reason)" }
    }

    /// What ``verifyLocalCopies()`` checked and found.
    package struct VerifyReport: Hashable, Sendable {
        /// The copies of `Blobs/` and the files at their paths that were hashed.
        package var copies = 0, files = 0
        package var problems: [VerifyProblem] = []
    }

    /// Re-hashes every copy in `Blobs/` (its name is its SHA-256) and every file of the manifest that
    /// is at its path (its row names its SHA-256 and size), and returns what does not match, sorted; a
    /// path recorded present or waiting to upload whose bytes are neither at the path nor in `Blobs/`
    /// is a problem too. Reads only: nothing is repaired,
    /// recorded or touched (`kvtool sync blobs verify`). Memory is one chunk for a copy, one file (at
    /// most its row's size, which a write bounded) for a path.
    package func verifyLocalCopies() throws -> VerifyReport {
        let container = try requireContainer()
        var report = VerifyReport()
        let blobs = try container.blobFiles(sharing: sharing)
        let copies: [DirectoryEntry]
        do {
            copies = try blobs.entries()
        } catch KVStoreError.fileNotFound, KVStoreError.io(_, _, ENOENT) {
            copies = []   // no `Blobs/` (a read-only open of a container from before issue 49): no copies
        }
        for copy in copies where copy.name.utf8.count == 64 && copy.name.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) {
            let file = "Blobs/\(copy.name)"
            guard copy.kind == .file else {
                report.problems.append(VerifyProblem(file: file, reason: "is not a regular file"))
                continue
            }
            do {
                let (digest, size) = try hashBlob(copy.name)
                report.copies += 1
                let hex = ContainerFiles.name(digest)
                if hex != copy.name { report.problems.append(VerifyProblem(file: file, reason: "its \(size) bytes hash to \(hex)")) }
            } catch KVStoreError.fileNotFound {
                continue   // removed meanwhile (a sweep): nothing to check
            } catch {
                report.problems.append(VerifyProblem(file: file, reason: "cannot be read (\(error))"))
            }
        }
        let rows = try container.store.read { tx in
            (try FileManifest.entries(in: tx), try FileManifest.localStates(in: tx))
        }
        for row in rows.0 {
            let file = "Files/\(row.path)"
            guard exists(row.path) else {
                // Bytes this device says it has (present, or waiting to upload) must be at the path or
                // in `Blobs/` (a read takes them from there); a row not downloaded yet is no problem.
                if let local = rows.1[row.path], local.sha256 == Array(row.entry.sha256), local.state == .present || local.state == .waitingToUpload,
                   !blobs.exists(ContainerFiles.name(row.entry.sha256)) {
                    report.problems.append(VerifyProblem(file: file, reason: "is recorded \(local.state.rawValue) but its bytes are neither at its path nor in Blobs/"))
                }
                continue
            }
            do {
                let data = try read(row.path, maxSize: Int(clamping: max(0, row.entry.size)))
                report.files += 1
                let digest = ContainerFiles.name(data.withUnsafeBytes { SHA256Hasher.hash($0) })
                let expected = ContainerFiles.name(row.entry.sha256)
                if data.count != row.entry.size || digest != expected {
                    report.problems.append(VerifyProblem(file: file, reason: "its \(data.count) bytes hash to \(digest), its manifest row names \(expected) (\(row.entry.size) bytes)"))
                }
            } catch KVStoreError.valueTooLarge {
                report.problems.append(VerifyProblem(file: file, reason: "is larger than the \(row.entry.size) bytes its manifest row names"))
            } catch {
                report.problems.append(VerifyProblem(file: file, reason: "cannot be read (\(error))"))
            }
        }
        report.problems.sort { $0.file < $1.file }
        return report
    }
}
