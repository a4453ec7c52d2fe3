import Foundation

/// Replays a corpus folder through a property, for the replay tests of `make test`.
public enum FuzzCorpus {
    /// What a replay saw.
    public struct Report: CustomStringConvertible, Sendable {
        /// How many files the folder holds.
        public var inputs = 0
        /// How many were accepted with every check holding.
        public var accepted = 0
        /// How many were rejected (with every check holding), by kind of rejection.
        public var rejected: [String: Int] = [:]
        /// One line for each file whose property failed: `name: reason`.
        public var failures: [String] = []

        public var description: String {
            "\(inputs) inputs, \(accepted) accepted, rejected "
                + rejected.sorted { $0.key < $1.key }.map { "\($0.key) ×\($0.value)" }.joined(separator: ", ")
        }
    }

    /// The repository's fuzz/corpus/`target`, from the path of a file two levels below the package
    /// (a test file in Tests/<Target>/).
    public static func folder(_ target: String, testFile: String) -> URL {
        URL(fileURLWithPath: testFile)
            .deletingLastPathComponent()  // Tests/<Target>
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // the package
            .appendingPathComponent("fuzz/corpus/\(target)")
    }

    /// Runs `check` on every file of `folder` (hidden files aside), in name order.
    ///
    /// - Throws: `CocoaError(.fileNoSuchFile)` when the folder is missing, and
    ///   `CocoaError(.fileReadCorruptFile)` when it holds no input: a corpus that vanished must fail
    ///   the replay, not pass it.
    public static func replay(_ folder: URL, _ check: ([UInt8]) throws(PropertyViolation) -> FuzzOutcome) throws -> Report {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: folder.path])
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { !$0.hasPrefix(".") }.sorted()
        guard !names.isEmpty else {
            throw CocoaError(.fileReadCorruptFile, userInfo: [NSFilePathErrorKey: folder.path, NSDebugDescriptionErrorKey: "the corpus is empty"])
        }
        var report = Report()
        for name in names {
            report.inputs += 1
            let input = [UInt8](try Data(contentsOf: folder.appendingPathComponent(name)))
            do {
                switch try check(input) {
                case .accepted: report.accepted += 1
                case .rejected(let kind): report.rejected[kind, default: 0] += 1
                }
            } catch {
                report.failures.append("\(name): \(error)")
            }
        }
        return report
    }
}
