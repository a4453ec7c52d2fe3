#if PostgreSQL
import Foundation
import KVStore
import Logging
import NIOCore
import PostgresNIO
@testable import SyncKitPostgres
import PostgresTesting
import SyncTestSupport
import TestSupport
import Testing
import Workloads

/// The server's CBOR→JSON function (`kvsync_cbor_to_jsonb`, PL/pgSQL) against Swift's
/// `JSONValue.projecting(_:)`, and its JSON→CBOR function (`kvsync_jsonb_to_cbor`) against
/// `CBOREncoder` and the workloads' decoders, on one throwaway cluster.
///
/// Agreement is exact on the `jsonb` text: the SQL function's `jsonb` printed, against Swift's JSON
/// text parsed by PostgreSQL as `jsonb` and printed (`jsonb` orders members and keeps numbers as
/// `numeric`, so the two texts are compared in the one form both reach). Values travel as bind
/// parameters, a batch of arrays per round trip.
@Suite struct CBORJSONSQLTests {
    static let logger = Logger(label: "cbor-json-sql-tests")

    /// The RFC 8949 Appendix A examples, every one (those Swift shows as null included).
    static let appendixA = """
        00 01 0a 17 1818 1819 1864 1903e8 1a000f4240 1b000000e8d4a51000 1bffffffffffffffff c249010000000000000000
        3bffffffffffffffff c349010000000000000000 20 29 3863 3903e7 f90000 f98000 f93c00 fb3ff199999999999a f93e00
        f97bff fa47c35000 fa7f7fffff fb7e37e43c8800759c f90001 f90400 f9c400 fbc010666666666666 f97c00 f97e00 f9fc00
        fa7f800000 fa7fc00000 faff800000 fb7ff0000000000000 fb7ff8000000000000 fbfff0000000000000 f4 f5 f6 f7 f0 f8ff
        c074323031332d30332d32315432303a30343a30305a c11a514b67b0 c1fb41d452d9ec200000 d74401020304 d818456449455446
        d82076687474703a2f2f7777772e6578616d706c652e636f6d 40 4401020304 60 6161 6449455446 62225c 62c3bc 63e6b0b4
        64f0908591 80 83010203 8301820203820405 98190102030405060708090a0b0c0d0e0f101112131415161718181819 a0
        a201020304 a26161016162820203 826161a161626163 a56161614161626142616361436164614461656145 5f42010243030405ff
        7f657374726561646d696e67ff 9fff 9f018202039f0405ffff 9f01820203820405ff 83018202039f0405ff 83019f0203ff820405
        9f0102030405060708090a0b0c0d0e0f101112131415161718181819ff bf61610161629f0203ffff 826161bf61626163ff
        bf6346756ef563416d7421ff
        """.split(whereSeparator: \.isWhitespace).map { Hex.decode($0.utf8)! }

    /// A cluster with the schema migrated, and a connection to it as its owner.
    static func server() async throws -> (LocalPostgresCluster, ServerConnection) {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let server = try await ServerConnection.connect(cluster.tcpURL, logger: logger, maxValueBytes: 16 << 20)
        try await server.migrate()
        return (cluster, server)
    }

    /// The SQL function's `jsonb` text of each value, and Swift's projection's text as `jsonb`
    /// (batches of 2,000 values a round trip).
    static func projections(_ values: [[UInt8]], on connection: PostgresConnection) async throws -> [(sql: String, swift: String)] {
        var out: [(sql: String, swift: String)] = []
        var start = 0
        while start < values.count {
            let batch = values[start ..< min(start + 2000, values.count)]
            let buffers = batch.map { ByteBuffer(bytes: $0) }
            let texts = try batch.map { try JSONWriter.cborCompact.render(JSONValue.projecting($0)) }
            let rows = try await connection.query("""
                SELECT kvsync_cbor_to_jsonb(v)::text, s::jsonb::text
                FROM unnest(\(buffers)::bytea[], \(texts)::text[]) WITH ORDINALITY AS u(v, s, i) ORDER BY i
                """, logger: logger)
            for try await (sql, swift) in rows.decode((String, String).self) { out.append((sql, swift)) }
            start += batch.count
        }
        return out
    }

    /// Expects the SQL function and Swift's projection to agree on every value, naming the first few that
    /// do not; returns how many were compared.
    @discardableResult
    static func expectAgreement(_ values: [[UInt8]], _ what: String, on connection: PostgresConnection,
                                sourceLocation: SourceLocation = #_sourceLocation) async throws -> Int {
        let results = try await projections(values, on: connection)
        #expect(results.count == values.count, "\(what): \(results.count) answers for \(values.count) values", sourceLocation: sourceLocation)
        var differing = 0
        for (value, result) in zip(values, results) where result.sql != result.swift {
            differing += 1
            if differing <= 5 {
                Issue.record("\(what): \(Hex.encode(value.prefix(200))): SQL \(result.sql.prefix(300)) ≠ Swift \(result.swift.prefix(300))",
                             sourceLocation: sourceLocation)
            }
        }
        #expect(differing == 0, "\(what): \(differing) of \(values.count) differ", sourceLocation: sourceLocation)
        return results.count
    }

    /// The function and the projection agree on 10,000 encoded workload values, on every example of
    /// RFC 8949 Appendix A, on random CBOR of every kind (floats of three widths, indefinite lengths,
    /// tags, non-text and repeated keys, deep nesting), on random bytes, and on workload values cut
    /// short or with a byte changed. A few well-known answers are checked as they stand, so that the
    /// two cannot agree by being wrong alike.
    @Test func theSQLFunctionAndSwiftsProjectionAgree() async throws {
        let clock = ContinuousClock()
        let started = clock.now
        let (cluster, server) = try await Self.server()
        defer { withExtendedLifetime(cluster) {} }
        let connection = server.connection

        let workloads = try CBORJSONSamples.workloadValues(count: 10_000, seed: 50)
        var compared = try await Self.expectAgreement(workloads.map(\.bytes), "workload values", on: connection)
        compared += try await Self.expectAgreement(Self.appendixA, "RFC 8949 Appendix A", on: connection)
        var generator = SplitMix64(seed: 8949)
        let structured = (0 ..< 3000).map { _ in CBORJSONSamples.randomItem(using: &generator) }
        compared += try await Self.expectAgreement(structured, "random CBOR", on: connection)
        let noise = (0 ..< 2000).map { _ in
            (0 ..< Int.random(in: 0 ... 40, using: &generator)).map { _ in UInt8.random(in: 0 ... 255, using: &generator) }
        }
        compared += try await Self.expectAgreement(noise, "random bytes", on: connection)
        let damaged = workloads.prefix(2000).map { sample -> [UInt8] in
            var bytes = sample.bytes
            if Bool.random(using: &generator) {
                bytes.removeLast(Int.random(in: 1 ... bytes.count, using: &generator))
            } else {
                bytes[Int.random(in: 0 ..< bytes.count, using: &generator)] = UInt8.random(in: 0 ... 255, using: &generator)
            }
            return bytes
        }
        compared += try await Self.expectAgreement(damaged, "truncated and mutated workload values", on: connection)

        // Answers as they stand (each text is jsonb's).
        let known: [(String, String)] = [
            ("c249010000000000000000", #""AQAAAAAAAAAA""#), ("c349010000000000000000", #""~AQAAAAAAAAAA""#),
            ("3bffffffffffffffff", "-18446744073709551616"), ("f93e00", "1.5"), ("f93c00", "1.0"), ("f97e00", "null"),
            ("fb7e37e43c8800759c", "1" + String(repeating: "0", count: 300)), ("f0", "null"), ("f7", "null"),
            ("c11a514b67b0", #""2013-03-21T20:04:00.000""#), ("c1fb41d452d9ec200000", #""2013-03-21T20:04:00.500""#),
            ("d74401020304", #""01020304""#), ("a201020304", #"{"1": 2, "3": 4}"#),
            ("d82550" + String(repeating: "ab", count: 16), #""ABABABAB-ABAB-ABAB-ABAB-ABABABABABAB""#),
            ("c482211904e2", "12.5"), ("a2016131613102", #"{"1": 2}"#),
            ("a20102", #"{"$invalid": "a20102"}"#), ("a201020103", #"{"$invalid": "a201020103"}"#),
            ("", #"{"$invalid": ""}"#), ("6100", #"{"$invalid": "6100"}"#), ("0101", #"{"$invalid": "0101"}"#),
            (String(repeating: "81", count: 65) + "00", #"{"$invalid": "\#(String(repeating: "81", count: 32))"}"#),
            (String(repeating: "81", count: 64) + "00", String(repeating: "[", count: 64) + "0" + String(repeating: "]", count: 64)),
        ]
        let results = try await Self.projections(known.map { Hex.decode($0.0.utf8)! }, on: connection)
        for ((hex, expected), result) in zip(known, results) {
            #expect(result.sql == expected, "\(hex)")
        }
        #expect(compared == 10_000 + Self.appendixA.count + 3000 + 2000 + 2000)
        print("CBORJSONSQLTests: \(compared) values compared (10,000 workload values, \(Self.appendixA.count) Appendix A vectors, "
              + "3,000 random items, 2,000 random byte strings, 2,000 damaged values) in \(clock.now - started)")
        await server.close()
    }

    /// `kvsync_jsonb_to_cbor` of the JSON the server shows for a workload value writes the bytes
    /// `CBOREncoder` writes for the same JSON held as Swift dictionaries and numbers, and those bytes
    /// decode into the type the value came from, equal to what `JSONDecoder` makes of the JSON and to
    /// the value itself. (Types with a `Date` are left out: their JSON has the date as text, which
    /// neither decoder reads as a `Date` without being told the format.)
    @Test func jsonBackToCBORIsWhatTheEncoderWrites() async throws {
        let clock = ContinuousClock()
        let started = clock.now
        let (cluster, server) = try await Self.server()
        defer { withExtendedLifetime(cluster) {} }
        var generator = SplitMix64(seed: 4_2_1)
        var samples: [CBORJSONSamples.Sample] = []
        for i in 0 ..< 1500 {
            samples.append(try CBORJSONSamples.dateless(i % 3, using: &generator))
        }
        let buffers = samples.map { ByteBuffer(bytes: $0.bytes) }
        let rows = try await server.connection.query("""
            SELECT kvsync_cbor_to_jsonb(v)::text, kvsync_jsonb_to_cbor(kvsync_cbor_to_jsonb(v))
            FROM unnest(\(buffers)::bytea[]) WITH ORDINALITY AS u(v, i) ORDER BY i
            """, logger: Self.logger)
        var answers: [(String, ByteBuffer)] = []
        for try await (json, cbor) in rows.decode((String, ByteBuffer).self) { answers.append((json, cbor)) }
        #expect(answers.count == samples.count)
        var checked = 0
        for (sample, (json, buffer)) in zip(samples, answers) {
            let cbor = Array(buffer.readableBytesView)
            var parser = JSONParser(Array(json.utf8), range: 0 ..< json.utf8.count)
            let plain = try CBORJSONSamples.Plain(try parser.parseValue())
            let expected = try CBOREncoder().encode(plain)
            guard cbor == expected else {
                Issue.record("\(json.prefix(300)): SQL \(Hex.encode(cbor.prefix(120))) ≠ CBOREncoder \(Hex.encode(expected.prefix(120)))")
                continue
            }
            #expect(try sample.decodesAlike(cbor, Array(json.utf8)), "\(json.prefix(300))")
            checked += 1
        }
        #expect(checked == samples.count)
        // The deterministic form as it stands: keys by their encoded bytes (shorter first), integers in
        // the shortest form, numbers with a fraction (or beyond 64 bits) as float64.
        for try await (hex) in try await server.connection.query("""
            SELECT encode(kvsync_jsonb_to_cbor('{"bb": [1, -1, 1.5, 1.0, 1e2, null, true], "a": {}, "c": 18446744073709551616}'), 'hex')
            """, logger: Self.logger).decode(String.self) {
            #expect(hex == "a3" + "6161a0" + "6163fb43f0000000000000"
                    + "62626287" + "0120" + "fb3ff8000000000000" + "fb3ff0000000000000" + "1864" + "f6f5", "\(hex)")
        }
        print("CBORJSONSQLTests: \(checked) values through kvsync_jsonb_to_cbor in \(clock.now - started)")
        await server.close()
    }
}
#endif
