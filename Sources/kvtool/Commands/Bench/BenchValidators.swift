#if PostgreSQL
import ArgumentParser
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import PostgresTesting

extension Bench {
    /// `kvtool bench validators`: pushes with one validator on the collection against none (issue 50).
    struct Validators: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "validators",
            abstract: "Time pushes with one validator on the collection against none, in one run, and print the ratio.",
            discussion: """
                Starts its own cluster (fsync=off, loopback). Each round, a new device pushes --changes changes \
                of its collection (in batches, as a replicator does), then --single pushes of one change each, \
                once with no validator on the collection and once with one (an SQL function that reads the new \
                value as JSON: kvsync_cbor_to_jsonb of the new and the old value, and kvsync_validate's call, \
                are in the time). Prints each median of --rounds and the ratio with / without (the goal is 0.7 \
                or more). Client and server share this machine.
                """)

        @Option(help: "Changes each timed push sends.") var changes = 5_000
        @Option(help: "Pushes of one change each, timed apart.") var single = 200
        @Option(help: "Rounds of each (the median is printed).") var rounds = 3
        @Option(help: "Value bytes.") var valueSize = 100

        /// The validator of the timed collection: a value must be a JSON string (every value the bench
        /// writes is one, so that all are applied and counted).
        static let validator = """
            CREATE OR REPLACE FUNCTION bench_text_only(p_group text, p_key bytea, p_new jsonb, p_old jsonb, p_device text)
            RETURNS text LANGUAGE sql AS $$
                SELECT CASE WHEN p_new IS NOT NULL AND jsonb_typeof(p_new) <> 'string' THEN 'a bench value is text' END
            $$
            """

        func validate() throws {
            guard (1...1_000_000).contains(changes), (1...100_000).contains(single), (1...99).contains(rounds),
                  (1...10_000).contains(valueSize) else {
                throw ValidationError("--changes, --single, --rounds and --value-size must be positive (and not huge)")
            }
        }

        func run() throws {
            let cluster = try LocalPostgresCluster()
            defer { try? cluster.stop() }
            print("PostgreSQL cluster on 127.0.0.1:\(cluster.port) (fsync=off); values of \(valueSize) bytes, \(rounds) rounds")
            let value = String(repeating: "v", count: valueSize)
            var batch: [Bool: [Double]] = [:], one: [Bool: [Double]] = [:]
            for round in 0..<rounds {
                // Alternating which goes first: a trend of the machine (or of the cluster's caches) is
                // not taken for the validator's cost.
                for validated in round % 2 == 0 ? [false, true] : [true, false] {
                    let device = try BenchDevice(group: "group.bench.validators.\(round).\(validated)", .database(cluster.tcpURL))
                    _ = try blocking { try await device.replicator.sync() }   // connected, schema made: not timed
                    if validated {
                        try cluster.psql(Self.validator + ";\nINSERT INTO kvsync_validators VALUES ('collection', 'bench', 'bench_text_only(text, bytea, jsonb, jsonb, text)') ON CONFLICT DO NOTHING")
                    } else {
                        try cluster.psql("DELETE FROM kvsync_validators")
                    }
                    try device.write((0..<changes).map { (String(format: "key-%08d", $0), value) })
                    let start = Bench.now()
                    let pushed = try blocking { try await device.replicator.push().pushed }
                    batch[validated, default: []].append(Double(changes) / (Double(Bench.now() - start) / 1e9))
                    var singles = 0
                    let singleStart = Bench.now()
                    for index in 0..<single {
                        try device.write([(String(format: "one-%08d", index), value)])
                        singles += try blocking { try await device.replicator.push().pushed }
                    }
                    one[validated, default: []].append(Double(single) / (Double(Bench.now() - singleStart) / 1e9))
                    _ = try? blocking { await device.replicator.close() }
                    guard pushed == changes, singles == single else {
                        throw CLIError(.failure, "the server took \(pushed) of \(changes) and \(singles) of \(single) changes (a rejection?)")
                    }
                }
            }
            func median(_ values: [Double]?) -> Double {
                let sorted = (values ?? []).sorted()
                return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
            }
            let (none, with) = (median(batch[false]), median(batch[true]))
            let (noneOne, withOne) = (median(one[false]), median(one[true]))
            print(String(format: "push %d changes, no validator: %.0f changes/s", changes, none))
            print(String(format: "push %d changes, one validator: %.0f changes/s", changes, with))
            print(String(format: "%d pushes of one change, no validator: %.0f pushes/s", single, noneOne))
            print(String(format: "%d pushes of one change, one validator: %.0f pushes/s", single, withOne))
            print(String(format: "ratio with / without: %.2f in batches, %.2f one change a push (goal: 0.70 or more)",
                         with / none, withOne / noneOne))
        }
    }
}
#endif
