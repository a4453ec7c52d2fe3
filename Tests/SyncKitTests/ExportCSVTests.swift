import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport

/// A row of the generic CSV tests: its fields as they are.
private struct Fields: Sendable {
    var values: [String]
}

private func writer(columns count: Int, lineEnding: CSVLineEnding = .crlf) -> CSVWriter<Fields> {
    CSVWriter(columns: (0..<count).map { i in CSVColumn("c\(i)") { $0.values[i] } }, lineEnding: lineEnding)
}

/// Finds `python3` on PATH, or records why the test cannot run.
func python3() throws -> String {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
    for directory in path.split(separator: ":") where !directory.isEmpty {
        let candidate = String(directory) + "/python3"
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    Issue.record("python3 is not on PATH (\(path)); install python3 to run the CSV interop tests")
    throw CancellationError()
}

/// Parses `file` with Python's `csv` module (newline='' as its documentation requires) and returns
/// the rows.
func pythonCSVRows(_ file: String) throws -> [[String]] {
    let script = """
        import csv, json, sys
        with open(sys.argv[1], newline='', encoding='utf-8') as f:
            rows = list(csv.reader(f, strict=True))
        json.dump(rows, sys.stdout, ensure_ascii=True)
        """
    let result = try run(try python3(), ["-c", script, file])
    try #require(result.status == 0, "python3 failed: \(result.stderr)")
    let parsed = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
    return try #require(parsed as? [[String]], "unexpected python output: \(result.stdout)")
}

@Suite struct ExportCSVTests {
    let dir = TemporaryDirectory()

    @Test(.blockingWork) func fieldsAreQuotedOnlyWhenRFC4180RequiresIt() {
        #expect(CSVText.field("Netflix") == "Netflix")
        #expect(CSVText.field("") == "")
        #expect(CSVText.field(" padded ") == " padded ")
        #expect(CSVText.field("音楽プラス") == "音楽プラス")
        #expect(CSVText.field("a,b") == "\"a,b\"")
        #expect(CSVText.field("say \"hi\"") == "\"say \"\"hi\"\"\"")
        #expect(CSVText.field("\"") == "\"\"\"\"")
        #expect(CSVText.field("line 1\nline 2") == "\"line 1\nline 2\"")
        #expect(CSVText.field("line 1\r\nline 2") == "\"line 1\r\nline 2\"")
        #expect(CSVText.field("cr\ronly") == "\"cr\ronly\"")
        #expect(CSVText.field("tab\tis fine") == "tab\tis fine")
    }

    @Test(.blockingWork) func headerThenOneLineEndingInCRLFPerRowByDefault() throws {
        let text = try writer(columns: 3).render([Fields(values: ["1", "a,b", ""]), Fields(values: ["2", "x", "y\nz"])])
        #expect(text == "c0,c1,c2\r\n1,\"a,b\",\r\n2,x,\"y\nz\"\r\n")
        #expect(try writer(columns: 2).render([Fields]()) == "c0,c1\r\n")
    }

    @Test(.blockingWork) func lineEndingIsConfigurable() throws {
        let w = writer(columns: 2, lineEnding: .lf)
        #expect(try w.render([Fields(values: ["1", "2"])]) == "c0,c1\n1,2\n")
        #expect(CSVLineEnding.crlf.rawValue == "\r\n")
    }

    @Test(.blockingWork) func columnsAreWrittenInTheirGivenOrderNotSorted() throws {
        let w = CSVWriter<Fields>(columns: [
            CSVColumn("zeta") { $0.values[0] }, CSVColumn("alpha") { $0.values[1] }, CSVColumn("mid, dle") { $0.values[2] },
        ])
        #expect(w.headers == ["zeta", "alpha", "mid, dle"])
        #expect(try w.render([Fields(values: ["z", "a", "m"])]) == "zeta,alpha,\"mid, dle\"\r\nz,a,m\r\n")
    }

    @Test(.blockingWork) func anErrorFromAColumnStopsTheExport() {
        struct Bad: Error {}
        let w = CSVWriter<Int>(columns: [CSVColumn("n") { n in if n < 0 { throw Bad() }; return "\(n)" }])
        #expect(throws: Bad.self) { try w.render([1, -1, 2]) }
    }

    /// Python's `csv` module reads back exactly the fields written, whatever they contain.
    @Test(.blockingWork) func pythonReadsBackEveryFieldExactly() throws {
        let nasty = [
            "plain", "", " spaces ", "comma,inside", "\"quoted\"", "a \"b\" c", "\"", "\"\"", ",", "\n", "\r\n",
            "cr\ronly", "multi\nline\nmemo, with \"everything\"\r\n", "音楽プラス", "emoji 👨‍👩‍👧", "trailing,",
            "tab\tseparated", "=SUM(A1)",
        ]
        let rows = stride(from: 0, to: nasty.count, by: 3).map { i in
            Fields(values: (0..<3).map { nasty[(i + $0) % nasty.count] })
        }
        for lineEnding in CSVLineEnding.allCases {
            let file = dir.path + "/generic-\(lineEnding).csv"
            try writer(columns: 3, lineEnding: lineEnding).data(rows).write(to: URL(fileURLWithPath: file))
            let parsed = try pythonCSVRows(file)
            #expect(parsed == [["c0", "c1", "c2"]] + rows.map(\.values), "line ending \(lineEnding)")
        }
    }
}
