import Foundation
import FuzzProperties
import Testing

/// Replays every input kept in fuzz/corpus/<target>/ through the property its libFuzzer harness
/// checks (the same code: fuzz/Properties/, the FuzzProperties target), so that `make test` keeps
/// every input the fuzzer found interesting, and every crash it ever found, passing.
///
/// Each input must either be accepted with every round trip holding, or be rejected with the typed
/// error the API documents (CBORError, KeyDecodingError, KVStoreError.invalidGroupIdentifier or
/// invalidPath), one line long; a trap fails the whole run.
@Suite("Fuzz corpus replay")
struct FuzzCorpusReplayTests {
    /// The repository's fuzz/corpus, found from this file's path.
    static let corpus = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // KVStoreTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()  // the package
        .appendingPathComponent("fuzz/corpus")

    @Test("every kept input satisfies its target's property", arguments: FuzzTarget.allCases)
    func replay(_ target: FuzzTarget) throws {
        let folder = Self.corpus.appendingPathComponent(target.rawValue)
        var isDirectory: ObjCBool = false
        try #require(FileManager.default.fileExists(atPath: folder.path, isDirectory: &isDirectory) && isDirectory.boolValue,
                     "\(folder.path) is missing")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { !$0.hasPrefix(".") }.sorted()
        try #require(!names.isEmpty, "\(folder.path) is empty")

        var accepted = 0
        var rejected: [String: Int] = [:]
        for name in names {
            let input = [UInt8](try Data(contentsOf: folder.appendingPathComponent(name)))
            do {
                switch try target.check(input) {
                case .accepted: accepted += 1
                case .rejected(let kind): rejected[kind, default: 0] += 1
                }
            } catch {
                Issue.record("fuzz/corpus/\(target.rawValue)/\(name): \(error)")
            }
        }
        // A corpus that only reaches one side of the property has lost most of its point.
        #expect(accepted > 0, "no input of fuzz/corpus/\(target.rawValue) is accepted")
        #expect(!rejected.isEmpty, "no input of fuzz/corpus/\(target.rawValue) is rejected")
        print("fuzz/corpus/\(target.rawValue): \(names.count) inputs, \(accepted) accepted, rejected \(rejected.sorted { $0.key < $1.key })")
    }
}
