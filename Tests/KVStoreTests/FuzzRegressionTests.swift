import Foundation
import Testing
import TestSupport
@testable import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// One test per bug that the fuzz properties (fuzz/Properties/) found in KVStore. The inputs that
/// showed them are also kept in fuzz/corpus/ and replayed by FuzzCorpusReplayTests; these tests say
/// what each bug was in terms of the API.
@Suite("Fuzz regressions")
struct FuzzRegressionTests {
    // MARK: Paths: a slash followed by a combining mark

    // Swift groups "/" and a following combining mark (U+0301) into one Character, so
    // `split(separator: "/")`, `hasPrefix("/")` and `contains("/")` did not see that slash, while the
    // kernel does. SharedFiles.validate accepted "/\u{301}x" (an absolute path: writing it as root
    // created a file at the top of the file system) and returned "link/\u{301}x" as one component,
    // which openat resolved through the symbolic link `link` (so O_NOFOLLOW protected nothing).

    @Test("validate cuts paths at every slash byte, combining marks or not", .blockingWork)
    func combiningMarkAfterSlashIsStillASlash() throws {
        #expect(try SharedFiles.validate("a/\u{301}b") == ["a", "\u{301}b"])
        #expect(try SharedFiles.validate("a/\u{301}/b") == ["a", "\u{301}", "b"])
        expectRejectedPath("absolute") { _ = try SharedFiles.validate("/\u{301}etc/passwd") }
        expectRejectedPath("absolute") { _ = try SharedFiles.validate("/\u{301}") }
        expectRejectedPath("empty component") { _ = try SharedFiles.validate("a//\u{301}") }
        expectRejectedPath("ends with '/'") { _ = try SharedFiles.validate("a/\u{301}/") }
        expectRejectedPath("reserved for temporary files") { _ = try SharedFiles.validate(".kvtmp-\u{301}x") }
    }

    @Test("no write escapes through a slash with a combining mark", .blockingWork)
    func combiningMarkAfterSlashCannotEscape() throws {
        let fixture = try SharedFilesFixture()
        defer { fixture.remove() }
        let files = try fixture.files()
        try SharedFilesFixture.check(symlink(fixture.outside, fixture.filesPath + "/link"), "symlink")
        let before = fixture.snapshot()

        expectRejectedPath("'link' is a symbolic link") { try files.write(Data("evil".utf8), to: "link/\u{301}x") }
        expectRejectedPath("'link' is a symbolic link") { _ = try files.read("link/\u{301}secret") }
        let name = "\u{301}kvstore-fuzz-regression-\(getpid())"
        expectRejectedPath("absolute") { try files.write(Data("evil".utf8), to: "/" + name) }
        #expect(!SharedFilesFixture.exists("/" + name))
        #expect(!SharedFilesFixture.exists(fixture.outside + "/\u{301}x"))
        #expect(fixture.snapshot() == before)
        #expect(fixture.secretIsUntouched())
    }

    @Test("container roots are normalised as the kernel reads them", .blockingWork)
    func containerRootWithCombiningMark() throws {
        #expect(try ContainerRoot.resolve(explicit: "/\u{301}x", environment: [:]) == "/\u{301}x")
        #expect(ContainerRoot.normalize("/a/\u{301}/../b") == "/a/b")
        #expect(ContainerRoot.normalize("/a/\u{301}../b") == "/a/\u{301}../b")
    }

    // MARK: Keys

    // The catalog's key encoding is text read from the store; `KeyEncoding(_:)` parsed nested
    // `tuple(` recursively without a bound, so a corrupt or hostile catalog entry overflowed the stack.
    @Test("key encodings nest at most maxNesting tuples, without recursing on longer input", .blockingWork)
    func keyEncodingNestingIsBounded() {
        func nested(_ depth: Int) -> String {
            String(repeating: "tuple(", count: depth) + "int64" + String(repeating: ",int64)", count: depth)
        }
        #expect(KeyEncoding(nested(KeyEncoding.maxNesting))?.description == nested(KeyEncoding.maxNesting))
        #expect(KeyEncoding(nested(KeyEncoding.maxNesting + 1)) == nil)
        #expect(KeyEncoding(String(repeating: "tuple(", count: 1_000_000)) == nil)
    }

    // Date(timeIntervalSinceReferenceDate: -0.0) == Date(timeIntervalSinceReferenceDate: 0.0), but the
    // two encoded to different keys, so a collection could hold both as separate records.
    @Test("equal dates are one key: -0.0 is written as 0.0", .blockingWork)
    func negativeZeroDateKey() throws {
        let zero = Date(timeIntervalSinceReferenceDate: 0.0)
        let negativeZero = Date(timeIntervalSinceReferenceDate: -0.0)
        #expect(zero == negativeZero)
        #expect(negativeZero.encodedKey == zero.encodedKey)
        #expect(try Date.decodeKey(negativeZero.encodedKey) == zero)
    }

    // LogicalDay's description writes any Int32 day number ("-0001-12-31", "5881580-07-11"), but its
    // parser took only four-digit years from 0000 to 9999, so `kvtool` printed day keys (and CBOR values
    // held days) that it could not read back.
    @Test("every day number's text parses back to the same day", .blockingWork, arguments: [
        Int32.min, Int32.max, -719_529, -719_528, -1, 0, 20_413, 2_932_896, 2_932_897,
    ])
    func dayTextRoundTrips(_ number: Int32) throws {
        let day = LogicalDay(dayNumber: number)
        #expect(LogicalDay(day.description) == day, "\(day.description)")
        let key = day.encodedKey
        #expect(try KeyEncoding.day.parse(KeyEncoding.day.render(key).description) == key)
        #expect(try CBORDecoder().decode(LogicalDay.self, from: CBOREncoder().encode(day)) == day)
    }

    @Test("day text is still strict", .blockingWork)
    func dayTextIsStrict() {
        for bad in ["+2026-01-01", "2026-1-01", "02026-01-01", "20260-13-01", "--2026-01-01", "2026-01-01-", " 2026-01-01", "１２３４-01-01"] {
            #expect(LogicalDay(bad) == nil, "\(bad)")
        }
        #expect(LogicalDay("-0001-12-31") == LogicalDay(year: -1, month: 12, day: 31))
        #expect(LogicalDay("10000-01-01") == LogicalDay(year: 10_000, month: 1, day: 1))
    }

    // Eight key bytes can hold any Double; `KeyEncoding.date` rendered those outside the years 1-9999
    // (and NaN) as a made-up ISO 8601 date ("-4712-01-01T12:00:00.000Z") that parse rejected.
    // Since issue 36 they render as their eight key bytes (`0x…`), which name the key exactly (seconds
    // since 1970 did not always: the conversion to the reference date rounds).
    @Test("dates outside ISO 8601's four-digit years render as their key bytes, which parse reads back", .blockingWork,
          arguments: [1e300, -1e300, -1e12, 253_402_300_800, .infinity, -.infinity, .nan])
    func dateKeyOutsideISORange(_ seconds: Double) throws {
        let key = Date(timeIntervalSince1970: seconds).encodedKey
        let text = try KeyEncoding.date.render(key).description
        #expect(text == "0x" + Hex.encode(key))
        #expect(try KeyEncoding.date.parse(text) == key)
        #expect(try KeyEncoding.date.render(KeyEncoding.date.parse(text)).description == text)
    }

    // Found by `make fuzz` (keys, first minute): Foundation's ISO8601FormatStyle rounds the fraction
    // without carrying into the seconds, so a date key at 23:59:59.9996 rendered as
    // "2000-12-31T23:59:59.1000Z", which parse read as 59.1 s.
    // Since issue 36 a date key is not rounded at all: it prints the digits that name it exactly (this
    // one, 0.0004 s before the reference date with a long binary fraction, needs more than 17, so it
    // prints as its key bytes), and a fraction of .9996 s (.9995999 as a Double) stays in its second.
    @Test("date keys render exactly, never carrying a rounded fraction into the next second", .blockingWork)
    func dateKeyMillisecondCarry() throws {
        let key = Date(timeIntervalSince1970: 978_307_199.9996).encodedKey
        let text = try KeyEncoding.date.render(key).description
        #expect(try KeyEncoding.date.parse(text) == key)
        #expect(try KeyEncoding.date.render(KeyEncoding.date.parse(text)).description == text)
        let later = Date(timeIntervalSince1970: 1_795_831_199.9996).encodedKey
        let laterText = try KeyEncoding.date.render(later).description
        #expect(laterText.hasPrefix("2026-11-28T01:59:59.999"), "\(laterText)")
        #expect(try KeyEncoding.date.parse(laterText) == later)
        #expect(try KeyEncoding.date.render(Date(timeIntervalSince1970: -62_135_596_800).encodedKey).description
                == "0001-01-01T00:00:00.000Z")
        #expect(try KeyEncoding.date.render(Date(timeIntervalSince1970: 1_709_263_815.25).encodedKey).description
                == "2024-03-01T03:30:15.250Z")
    }

    // Found by `make fuzz` (keys) after the fix above: render counts days in the proleptic Gregorian
    // calendar, but Foundation's ISO 8601 parser switches to the Julian calendar before 1582-10-15, so
    // "0020-06-15T08:53:20.000Z" parsed back as 0020-06-13.
    @Test("date keys before the Gregorian reform parse back to the same day", .blockingWork,
          arguments: ["0001-01-01T00:00:00.000Z", "0020-06-15T08:53:20.000Z", "1582-10-04T12:00:00.000Z",
                      "1582-10-10T00:00:00.500Z", "1582-10-15T00:00:00.000Z"])
    func dateKeyBeforeGregorianReform(_ text: String) throws {
        #expect(try KeyEncoding.date.render(KeyEncoding.date.parse(text)).description == text)
    }

    // `render` writes a nested tuple as a nested JSON array, but `parse` refused nested tuples, so the
    // keys of a collection keyed by Pair<Pair<…>, …> could be printed but not typed back.
    @Test("nested tuple keys parse from the nested arrays that render writes", .blockingWork)
    func nestedTupleKeysParse() throws {
        let key = Pair(Pair("k", LogicalDay(year: 2026, month: 11, day: 21)!), UInt64(12))
        let encoding = type(of: key).keyEncoding
        let text = try encoding.render(key.encodedKey).description
        #expect(text == "[[\"k\", \"2026-11-21\"], 12]")
        #expect(try encoding.parse(text) == key.encodedKey)
        #expect(throws: KeyDecodingError.self) { try encoding.parse("[\"k\", 12]") }
        #expect(throws: KeyDecodingError.self) { try encoding.parse("[[\"k\"], 12]") }
    }
}

/// Asserts that `body` throws `KVStoreError.invalidPath` whose reason contains `fragment`.
private func expectRejectedPath(_ fragment: String, sourceLocation: SourceLocation = #_sourceLocation,
                                _ body: () throws -> Void) {
    do {
        try body()
        Issue.record("expected invalidPath(\(fragment)), nothing was thrown", sourceLocation: sourceLocation)
    } catch KVStoreError.invalidPath(_, let reason) {
        #expect(reason.contains(fragment), "reason was: \(reason)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected invalidPath(\(fragment)), got \(error)", sourceLocation: sourceLocation)
    }
}
