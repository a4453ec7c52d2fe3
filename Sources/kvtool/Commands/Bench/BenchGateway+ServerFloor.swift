#if PostgreSQL
import Foundation
import PostgresTesting
#if canImport(Glibc)
import Glibc
#endif

extension Bench.GatewayScale {
    /// What the server alone spends on a row, for `COPY` and for the writes a push cannot do without
    /// (issue 51, part 5): PostgreSQL's CPU a row for the same rows written three ways, each in batches
    /// of the replicator's size, each batch its own transaction, through `psql`, with no device and no
    /// gateway on the cores. The batches' arrays are built in SQL; what building them costs is measured
    /// alone and taken off the three. Then `COPY` of the same rows into the state.
    ///
    /// - the bare log: one `INSERT … SELECT` from the arrays into `kvsync_changes`, no check at all;
    /// - the bare log and state: the same, and the rows inserted into `kvsync_state` too;
    /// - `kvsync_push` on the same arrays (as the owner: no row-level security).
    ///
    /// A push keeps a state row per key and answers every change from it, so the second is the least
    /// any push could write; `COPY` (timed by the caller) writes the log alone.
    struct ServerFloor {
        var arrays: Double
        var log: Double
        var logAndState: Double
        var push: Double
        /// `COPY` of the same rows into the state (the other row a push writes per change): its CPU a
        /// row, and rows a second.
        var copyState: Double
        var copyStateRate: Double
    }

    func serverFloor(cluster: LocalPostgresCluster, rows: Int, batch: Int) throws -> ServerFloor {
        let hexValue = String(repeating: "76", count: valueSize)
        // Rows `offset + 1 …`: tokens, keys `key-%08d`, values of `valueSize` bytes, clocks now.
        func arrays(_ offset: Int, _ count: Int) -> String {
            """
            (SELECT array_agg(\(offset)::bigint + i ORDER BY i) FROM generate_series(1, \(count)) i) AS toks,
              array_fill('collection'::text, ARRAY[\(count)]) AS kinds, array_fill('bench'::text, ARRAY[\(count)]) AS names,
              (SELECT array_agg(convert_to('key-' || lpad((\(offset) + i)::text, 8, '0'), 'UTF8') ORDER BY i)
               FROM generate_series(1, \(count)) i) AS keys,
              array_fill(decode('\(hexValue)', 'hex'), ARRAY[\(count)]) AS vals, array_fill(false, ARRAY[\(count)]) AS dels,
              array_fill(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint << 16, ARRAY[\(count)]) AS hlcs,
              array_fill(0::bigint, ARRAY[\(count)]) AS bases
            """
        }
        let rowsOf = "unnest(a.toks, a.kinds, a.names, a.keys, a.vals, a.hlcs, a.bases) AS u(tok, kind, name, key, val, hlc, base)"
        let statements: [(String, (String, Int, Int) -> String)] = [
            ("arrays", { _, offset, count in
                "SELECT array_length(a.toks, 1) + array_length(a.keys, 1) + array_length(a.vals, 1) + array_length(a.hlcs, 1) FROM (SELECT \(arrays(offset, count))) a" }),
            ("log", { group, offset, count in
                """
                INSERT INTO kvsync_changes (seq, group_id, device, token, kind, name, key, value, hlc, base)
                SELECT nextval('kvsync_changes_seq_seq'), '\(group)', 'floor', u.tok, u.kind, u.name, u.key, u.val, u.hlc, u.base
                FROM (SELECT \(arrays(offset, count))) a, \(rowsOf)
                """ }),
            ("log and state", { group, offset, count in
                """
                WITH a AS (SELECT \(arrays(offset, count))),
                     u AS (SELECT nextval('kvsync_changes_seq_seq') AS seq, u.* FROM a, \(rowsOf)),
                     l AS (INSERT INTO kvsync_changes (seq, group_id, device, token, kind, name, key, value, hlc, base)
                           SELECT u.seq, '\(group)', 'floor', u.tok, u.kind, u.name, u.key, u.val, u.hlc, u.base FROM u)
                INSERT INTO kvsync_state (group_id, kind, name, key, value, version, hlc, device, token)
                SELECT '\(group)', u.kind, u.name, u.key, u.val, u.seq, u.hlc, 'floor', u.tok FROM u
                """ }),
            ("push", { group, offset, count in
                """
                SELECT count(*) FILTER (WHERE p.outcome = 'applied') FROM (SELECT \(arrays(offset, count))) a,
                  kvsync_push('\(group)', 'floor', a.toks, a.kinds, a.names, a.keys, a.vals, a.dels, a.hlcs, a.bases, 60000) p
                """ }),
        ]
        var perRow: [String: Double] = [:]
        // Each script is a file psql reads (`\i`): as one argument it could pass the kernel's 128 KiB
        // limit on an argument (a million rows, or values of 10,000 bytes).
        let directory = try Demo.temporaryDirectory("kvstore-bench-floor-")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        chmod(directory, 0o755)
        for (name, statement) in statements {
            let group = "group.bench.floor.\(name.replacingOccurrences(of: " ", with: "-"))"
            var script = ""
            for offset in stride(from: 0, to: rows, by: batch) {
                script += "BEGIN;\n\(statement(group, offset, min(batch, rows - offset)));\nCOMMIT;\n"
            }
            let file = directory + "/\(group).sql"
            try script.write(toFile: file, atomically: true, encoding: .utf8)
            // psql may run as the cluster's own user (postgres, when this is root).
            chmod(file, 0o644)
            var output = ""
            let (_, seconds) = try Self.serverCPU(cluster) { output = try cluster.psql("\\i '\(file)'") }
            perRow[name] = seconds * 1e6 / Double(rows)
            if name == "push" {
                let applied = output.split(separator: "\n").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }.reduce(0, +)
                guard applied == rows else { throw CLIError(.failure, "kvsync_push applied \(applied) of \(rows) rows in the server's floor") }
            }
        }
        // COPY into the state, as the caller's COPY into the log.
        let (copyStateRate, copyState) = try timedCopy(cluster: cluster, rows: rows,
                                                       into: "kvsync_state (group_id, kind, name, key, value, version, hlc, device, token)") { index, key in
            "group.bench.floor.copy-state,collection,bench,\\x\(key),\\x\(hexValue),\(index + 1),0,copier,\(index + 1)"
        }
        let built = perRow["arrays"] ?? 0
        return ServerFloor(arrays: built, log: (perRow["log"] ?? 0) - built,
                           logAndState: (perRow["log and state"] ?? 0) - built, push: (perRow["push"] ?? 0) - built,
                           copyState: copyState, copyStateRate: copyStateRate)
    }

    /// `COPY` of `rows` rows into `table` (with its column list) through psql's `\copy` of a CSV file,
    /// row `index` written by `line` (given the hex of `key-%08d`): rows a second, and the server's CPU
    /// a row.
    func timedCopy(cluster: LocalPostgresCluster, rows: Int, into table: String,
                   line: (_ index: Int, _ hexKey: String) -> String) throws -> (rate: Double, cpu: Double) {
        let directory = try Demo.temporaryDirectory("kvstore-bench-copy-")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/rows.csv"
        var csv = ""
        csv.reserveCapacity(rows * (2 * valueSize + 80))
        for index in 0..<rows {
            csv += line(index, String(format: "key-%08d", index).utf8.map { String(format: "%02x", $0) }.joined()) + "\n"
        }
        try csv.write(toFile: file, atomically: true, encoding: .utf8)
        // psql reads the file, and may run as the cluster's own user (postgres, when this is root).
        chmod(file, 0o644)
        chmod(directory, 0o755)
        let (wall, cpu) = try Self.serverCPU(cluster) { try cluster.psql("\\copy \(table) FROM '\(file)' WITH (FORMAT csv)") }
        return (Double(rows) / wall, cpu * 1e6 / Double(rows))
    }

    /// `body`'s wall time and the server's CPU time meanwhile, in seconds; psql's backend is counted
    /// once the postmaster has reaped it (within 5 s).
    static func serverCPU(_ cluster: LocalPostgresCluster, _ body: () throws -> Void) throws -> (wall: Double, cpu: Double) {
        let backends = { Set(children(of: cluster.serverProcessID ?? 0)) }
        let (before, childrenBefore) = (serverCPUSeconds(cluster), backends())
        let start = Bench.now()
        try body()
        let wall = Double(Bench.now() - start) / 1e9
        let reaped = ContinuousClock.now + .seconds(5)
        while !backends().isSubset(of: childrenBefore), ContinuousClock.now < reaped { usleep(10_000) }
        return (wall, serverCPUSeconds(cluster) - before)
    }
}
#endif
