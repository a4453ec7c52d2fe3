#if PostgreSQL
import ArgumentParser
import Foundation
import KVStore
import SyncKitPostgres
import PostgresTesting
import Workloads

extension Bench {
    /// `kvtool bench json`: the server's CBOR→JSON function against PostgreSQL's own `jsonb` parse.
    struct JSON: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "json",
            abstract: "Time kvsync_cbor_to_jsonb per 1 KiB value against PostgreSQL's own jsonb parse of the same JSON text.",
            discussion: """
                Stores --values values of about 1 KiB (daily records, subscriptions and notification payloads \
                encoded as devices encode them) in a throwaway PostgreSQL cluster, then times, inside the server, \
                kvsync_cbor_to_jsonb over all of them and a cast of the same values' JSON text to jsonb, \
                alternately, --rounds times each (no parallel workers), and prints the medians per value and \
                per KiB with their ratio.
                """)

        @Option(help: "Values stored.") var values = 2_000
        @Option(help: "Timed passes over them, for each of the two.") var rounds = 7

        func validate() throws {
            guard (1...100_000).contains(values), (1...1_000).contains(rounds) else {
                throw ValidationError("--values must be 1 to 100000 and --rounds 1 to 1000")
            }
        }

        /// About 1 KiB of CBOR, from one of three workload types in turn: the record grows until its
        /// encoding reaches 1,024 bytes.
        static func value(_ index: Int) throws -> [UInt8] {
            var generator = SplitMix64(seed: UInt64(index))
            let encoder = CBOREncoder()
            let words = ["perceive", "think", "execute", "engage", "sustain"]
            var size = 1
            while true {
                let bytes: [UInt8]
                switch index % 3 {
                case 0:
                    var scores: [String: Int] = [:], memos: [String: String] = [:]
                    for item in 0 ..< size {
                        let key = "\(words[item % 5]).\(item / 5)"
                        scores[key] = Int.random(in: 0 ... 5, using: &generator)
                        if item % 4 == 0 { memos[key] = "memo \(item): ジム café" }
                    }
                    bytes = try encoder.encode(DailyRecord(day: LogicalDay(dayNumber: Int32(20_000 + index % 365)), scores: scores, memos: memos))
                case 1:
                    let start = Date(timeIntervalSince1970: 1_700_000_000 + Double(generator.next() % 10_000_000) / 1000)
                    bytes = try encoder.encode(Subscription(
                        id: UUID(), name: "Subscription \(index)", amount: Decimal(Int.random(in: 100 ... 20_000, using: &generator)) / 100,
                        category: "entertainment", firstBillingDate: LogicalDay(dayNumber: 19_000), billingCycle: .monthly(interval: 1),
                        memo: String(repeating: "a note about the plan, ", count: size), createdAt: start, updatedAt: start + 86_400))
                default:
                    var data: [String: CustomDataValue] = [:]
                    for item in 0 ..< size { data["field\(item)"] = item % 2 == 0 ? .double(Double(item) / 7) : .string("value \(item)") }
                    bytes = try encoder.encode(try NotificationPayload(title: "Practice reminder", body: "Time for today's session",
                                                                       imageUrl: "https://example.com/trainer.png", customData: data,
                                                                       categoryId: "CONFIRM_CATEGORY", badge: 3, sound: "default"))
                }
                if bytes.count >= 1024 { return bytes }
                size += 1
            }
        }

        func run() throws {
            let cluster = try LocalPostgresCluster()
            defer { try? cluster.stop() }
            let url = cluster.tcpURL
            try blocking { _ = try await SyncServerSetup.prepare(on: url) }
            var lines = ""
            var bytes = 0
            for index in 0 ..< values {
                let value = try Self.value(index)
                bytes += value.count
                lines += "\\\\x" + Hex.encode(value) + "\n"
            }
            let file = cluster.directory + "/bench-json-values"
            try lines.write(toFile: file, atomically: true, encoding: .utf8)
            _ = try cluster.psql("CREATE TABLE bench_json (v bytea, t text)")
            _ = try cluster.psql("\\copy bench_json (v) FROM '\(file)'")
            _ = try cluster.psql("UPDATE bench_json SET t = kvsync_cbor_to_jsonb(v)::text")
            let invalid = try cluster.psql("SELECT count(*) FROM bench_json WHERE t LIKE '{\"$invalid\"%'").trimmingCharacters(in: .whitespacesAndNewlines)
            guard invalid == "0" else { throw CLIError(.failure, "\(invalid) of the values did not convert") }
            print("PostgreSQL cluster on 127.0.0.1:\(cluster.port) (fsync=off); \(values) values, \(bytes / values) bytes of CBOR each on average")
            // Timed inside the server: each pass is one statement over the whole table.
            let answer = try cluster.psql("""
                SET max_parallel_workers_per_gather = 0;
                CREATE FUNCTION pg_temp.bench_json(rounds int) RETURNS text LANGUAGE plpgsql AS $$
                DECLARE
                    started timestamptz; n bigint; cbor float8[] := '{}'; parse float8[] := '{}';
                BEGIN
                    FOR i IN 1 .. rounds LOOP
                        started := clock_timestamp();
                        SELECT count(kvsync_cbor_to_jsonb(v)) INTO n FROM bench_json;
                        cbor := cbor || extract(epoch FROM clock_timestamp() - started)::float8;
                        started := clock_timestamp();
                        SELECT count(t::jsonb) INTO n FROM bench_json;
                        parse := parse || extract(epoch FROM clock_timestamp() - started)::float8;
                    END LOOP;
                    RETURN (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY x) FROM unnest(cbor) x) || ' '
                        || (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY x) FROM unnest(parse) x);
                END
                $$;
                SELECT pg_temp.bench_json(\(rounds));
                """).trimmingCharacters(in: .whitespacesAndNewlines)
            let medians = answer.split(separator: " ").compactMap { Double($0) }
            guard medians.count == 2 else { throw CLIError(.failure, "the timing query answered \(answer)") }
            let kib = Double(bytes) / 1024
            let (cbor, parse) = (medians[0] * 1e6 / kib, medians[1] * 1e6 / kib)
            print(String(format: "kvsync_cbor_to_jsonb: %.1f µs per KiB; PostgreSQL's jsonb parse of the same JSON text: %.1f µs per KiB; ratio %.1f× (medians of %d passes over %d values)",
                         cbor, parse, cbor / parse, rounds, values))
        }
    }
}
#endif
