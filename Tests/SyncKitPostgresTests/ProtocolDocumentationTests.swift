#if PostgreSQL
import Foundation
@testable import SyncGateway
import SyncWire
import Testing

/// Operating.md's metrics table is checked against what `/metrics` serves, so that a new endpoint,
/// status, refusal reason or metric fails here until the operators' page names it (issue 48). No
/// process and no database: the exposition is the gateway's own text.
@Suite struct ProtocolDocumentationTests {
    static var operating: String {
        get throws {
            try String(contentsOfFile: GatewayOperationsTests.repository + "/Sources/SyncGateway/Documentation.docc/Operating.md",
                       encoding: .utf8)
        }
    }

    /// The table's rows: `| NAME | TYPE | MEANING |` for every `kvsync_gateway_` metric.
    static func rows() throws -> [(names: [String], type: String, meaning: String)] {
        try operating.split(separator: "\n").compactMap { line in
            guard line.hasPrefix("| `kvsync_gateway_") else { return nil }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 4 else { return nil }
            let names = Self.quoted(cells[1]).map { String($0.prefix { $0 != "{" }) }
            return (names, cells[2], cells[3])
        }
    }

    /// The words between backticks in `text`, in order.
    static func quoted(_ text: some StringProtocol) -> [String] {
        text.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }

    /// The text of `row` from `start` to the first `end` after it.
    static func between(_ row: String, _ start: String, _ end: String) throws -> Substring {
        let from = try #require(row.range(of: start), "Operating.md's row has no '\(start)': \(row)")
        let to = try #require(row.range(of: end, range: from.upperBound..<row.endIndex), "no '\(end)' after '\(start)' in \(row)")
        return row[from.upperBound..<to.lowerBound]
    }

    /// Every family `/metrics` serves is a row of the table with its type, and every row is served.
    @Test func theMetricsTableNamesEveryFamilyTheGatewayServes() throws {
        let text = GatewayMetrics().exposition(connections: 0, inFlight: 0, liveStreams: 0, draining: false, databaseUp: true)
        var served: [String: String] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("# TYPE ") {
            let parts = line.split(separator: " ")
            served[String(parts[2])] = String(parts[3])
        }
        var documented: [String: String] = [:]
        for row in try Self.rows() {
            for name in row.names { documented[name] = row.type }
        }
        #expect(!served.isEmpty)
        #expect(documented == served, "Operating.md's metrics table and /metrics differ: only in the table \(documented.keys.filter { served[$0] == nil }.sorted()), only served \(served.keys.filter { documented[$0] == nil }.sorted()), types \(documented.filter { served[$0.key] != nil && served[$0.key] != $0.value })")
    }

    /// The table lists `requests_total`'s endpoints and statuses as the gateway labels them, and each
    /// refusal reason with the statuses a refusal for it has.
    @Test func theLabelsInTheTableAreTheGatewaysLabels() throws {
        let rows = try Self.rows()
        let requests = try #require(rows.first { $0.names == ["kvsync_gateway_requests_total"] }).meaning
        #expect(Self.quoted(try Self.between(requests, "by endpoint (", ") and status")) == GatewayMetrics.Endpoint.allCases.map(\.label))
        #expect(Self.quoted(try Self.between(requests, "and status (", ")")) == GatewayMetrics.statuses.map(String.init) + ["other"])

        let refusals = try #require(rows.first { $0.names == ["kvsync_gateway_refusals_total"] }).meaning
        #expect(Set(Self.quoted(refusals)) == Set(GatewayMetrics.RefusalReason.allCases.map(\.label)))
        for reason in GatewayMetrics.RefusalReason.allCases {
            // The statuses a refusal of this reason is answered with (an answer and a failure are none).
            let statuses = GatewayStatus.allCases.filter { status in
                status.meaning != .answered && status.meaning != .failure && GatewayMetrics.RefusalReason.of(status) == reason
            }.map(\.rawValue)
            guard !statuses.isEmpty else { continue }
            let listed = try Self.between(refusals, "`\(reason.label)` (", ")")
            let numbers = listed.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
            #expect(numbers == statuses, "Operating.md lists \(numbers) for \(reason.label); the gateway refuses with \(statuses)")
        }
    }
}
#endif
