import Foundation
import KVStore
import Testing
import TestSupport

/// A value another process stored with raw LMDB calls, far past every limit KVStore's writers
/// enforce (issue 12, section 2): a 200 MiB value, and values one byte over the 16 MiB decoder limit
/// and over the 1 MiB defaults limit. Reading them (`get`, `scan`, the defaults API, `kvtool get`,
/// `scan`, `defaults read`, `dump`) fails with a typed error naming the collection or suite and the key,
/// and `kvtool check` reports each entry; none of them copies or decodes the value, which the peak
/// RSS of each kvtool process shows (LMDB maps the value, so only copying or reading it all would
/// cost memory).
@Suite(.serialized) struct HugeRawValueTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.huge"
    static let hugeSize = 200 << 20
    /// What a kvtool process may take over the baseline run (`get` of a small value): far below the
    /// 200 MiB value, far above what an allocator's noise can add.
    static let allowedGrowthKiB = 64 << 10

    /// Stores the values through `kvtest-helper huge-values` (another process, raw LMDB calls).
    func storeHugeValues() throws {
        let stored = try helper(["huge-values", dir.path, group, String(Self.hugeSize)])
        try #require(stored.status == 0, "\(stored.stderr)")
        #expect(stored.stdout.hasSuffix("ok\n"), "\(stored.stdout)")
    }

    /// `kvtool ARGS --root DIR --group G` under `/usr/bin/time`, with its peak resident set in KiB.
    func measuredKVTool(_ arguments: [String]) throws -> (result: ProcessResult, peakKiB: Int) {
        var result = try run("/usr/bin/time", ["-f", "maxrss=%M", productsDirectory() + "/kvtool"] + arguments + ["--root", dir.path, "--group", group])
        var lines = result.stderr.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if lines.last == "" { lines.removeLast() }
        let peak = lines.last.flatMap { $0.hasPrefix("maxrss=") ? Int($0.dropFirst(7)) : nil }
        try #require(peak != nil, "no maxrss line from /usr/bin/time: \(result.stderr)")
        // What kvtool printed, without time's lines ("Command exited with non-zero status 1", maxrss).
        lines.removeLast()
        if lines.last?.hasPrefix("Command exited with non-zero status") == true { lines.removeLast() }
        result.stderr = lines.isEmpty ? "" : lines.joined(separator: "\n") + "\n"
        return (result, peak!)
    }

    @Test(.blockingWork) func theAPIRefusesHugeValuesWithTypedErrorsNamingCollectionAndKey() throws {
        try storeHugeValues()
        let container = try dir.container(group)
        let blobs = try container.store.collection("blobs", key: String.self, value: String.self)
        #expect(try blobs.get("small") == "hello")
        for key in ["huge", "over"] {
            let size = key == "huge" ? Self.hugeSize : CBORLimits.default.maxInputSize + 1
            #expect {
                _ = try blobs.get(key)
            } throws: { error in
                guard case KVStoreError.corruptValue(let collection, let named, let reason, _)? = error as? KVStoreError else { return false }
                return collection == "blobs" && named == key && reason.contains("\(size) bytes")
            }
        }
        // A scan stops at the first huge value, with the same error.
        #expect {
            _ = try blobs.entries()
        } throws: { error in
            guard case KVStoreError.corruptValue("blobs", "huge", _, _)? = error as? KVStoreError else { return false }
            return true
        }
        // The untyped (bytes) view kvtool reads through refuses before copying, too.
        let (_, raw) = try container.store.untypedCollection(named: "blobs")
        #expect(throws: KVStoreError.self) { _ = try raw.get(ByteKey("huge".encodedKey)) }

        let prefs = try container.defaults(suite: "prefs")
        #expect(try prefs.string(forKey: "small") == "hi")
        for key in ["huge", "over"] {
            let size = key == "huge" ? Self.hugeSize : SharedDefaults.maxValueSize + 1
            #expect {
                _ = try prefs.object(forKey: key)
            } throws: { error in
                guard case KVStoreError.corruptValue(let suite, let named, let reason, _)? = error as? KVStoreError else { return false }
                return suite == "defaults prefs" && named == "'\(key)'" && reason.contains("\(size) bytes")
            }
            #expect(throws: KVStoreError.self) { _ = try prefs.value(String.self, forKey: key) }
        }
        #expect(throws: KVStoreError.self) { _ = try prefs.dictionaryRepresentation() }
    }

    @Test(.blockingWork) func kvtoolFailsOrReportsEachHugeValueInBoundedMemory() throws {
        try storeHugeValues()
        let baseline = try measuredKVTool(["get", "blobs", "small"])
        #expect(baseline.result.status == 0 && baseline.result.stdout == "\"hello\"\n", "\(baseline.result.stderr)")

        var figures: [String] = []
        /// Runs kvtool, checks its one-line error names `fragments`, and its memory.
        func expectRefusal(_ arguments: [String], status: Int32 = 74, naming fragments: [String]) throws {
            let (result, peak) = try measuredKVTool(arguments)
            #expect(result.status == status, "\(arguments): \(result.stderr)")
            #expect(result.stderr.hasPrefix("kvtool: error: ") && result.stderr.filter { $0 == "\n" }.count == 1,
                    "\(arguments): \(result.stderr)")
            for fragment in fragments { #expect(result.stderr.contains(fragment), "\(arguments): \(result.stderr)") }
            #expect(peak - baseline.peakKiB < Self.allowedGrowthKiB,
                    "kvtool \(arguments.joined(separator: " ")) peaked at \(peak) KiB, \(peak - baseline.peakKiB) KiB over the baseline")
            figures.append("\(arguments.joined(separator: " ")): \(peak / 1024) MiB")
        }
        try expectRefusal(["get", "blobs", "huge"], naming: ["'blobs'", "key huge", "\(Self.hugeSize) bytes"])
        try expectRefusal(["get", "blobs", "over"], naming: ["'blobs'", "key over", "\(CBORLimits.default.maxInputSize + 1) bytes"])
        try expectRefusal(["scan", "blobs"], naming: ["'blobs'", "key huge", "\(Self.hugeSize) bytes"])
        try expectRefusal(["scan", "blobs", "--from", "over"], naming: ["'blobs'", "key over"])
        try expectRefusal(["defaults", "read", "--suite", "prefs", "huge"], naming: ["prefs", "'huge'", "\(Self.hugeSize) bytes"])
        try expectRefusal(["defaults", "read", "--suite", "prefs", "over"], naming: ["prefs", "'over'", "\(SharedDefaults.maxValueSize + 1) bytes"])
        for format in ["jsonl", "json", "mdb"] {
            try expectRefusal(["dump", "--format", format], naming: ["collection 'blobs'", "key huge", "\(Self.hugeSize) bytes"])
            try expectRefusal(["dump", "--format", format, "--suite", "prefs"], naming: ["defaults suite 'prefs'", "key huge"])
        }
        // A dump to a file leaves nothing behind.
        try expectRefusal(["dump", "-o", dir.path + "/dump.jsonl"], naming: ["key huge"])
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/dump.jsonl"))

        // `check` reads every value: it reports each one, by collection or suite and key.
        let (check, checkPeak) = try measuredKVTool(["check"])
        #expect(check.status == 74, "\(check.stdout)\(check.stderr)")
        let reported = check.stdout.split(separator: "\n").filter { $0.contains("over the") }
        #expect(reported.count == 4, "\(check.stdout)")
        #expect(reported.contains { $0.contains("blobs") && $0.contains("huge") && $0.contains("\(Self.hugeSize) bytes") }, "\(check.stdout)")
        #expect(reported.contains { $0.contains("blobs") && $0.contains("over") && $0.contains("\(CBORLimits.default.maxInputSize + 1) bytes") }, "\(check.stdout)")
        #expect(reported.contains { $0.contains("prefs") && $0.contains("huge") }, "\(check.stdout)")
        #expect(reported.contains { $0.contains("prefs") && $0.contains("over") && $0.contains("\(SharedDefaults.maxValueSize + 1) bytes") }, "\(check.stdout)")
        #expect(checkPeak - baseline.peakKiB < Self.allowedGrowthKiB, "kvtool check peaked at \(checkPeak) KiB")
        figures.append("check: \(checkPeak / 1024) MiB")

        print("[huge-values] 200 MiB value stored raw by another process; peak RSS of kvtool: baseline (get of a small value) "
              + "\(baseline.peakKiB / 1024) MiB; " + figures.joined(separator: "; "))
    }
}
