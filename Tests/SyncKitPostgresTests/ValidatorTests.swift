#if PostgreSQL
import Foundation
import KVStore
import Logging
@testable import SyncKitPostgres
import PostgresTesting
import SyncKit
import SyncWire
import TestSupport
import SyncTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Validators per collection (issue 50, `kvsync_push` revision 6), against a real throwaway
/// PostgreSQL: a refusal is the outcome `rejected` with the validator's reason and the server's
/// current row, and the rest of the batch goes on, on the direct path and through a real
/// `kvtool sync gateway`; a validator that raises refuses with its message (and what it wrote is
/// rolled back); a collection without validators is untouched.
///
/// Each test makes one cluster; the SQL that registers validators runs through `psql` off the pool.
@Suite struct ValidatorTests {
    static func group(_ name: String) -> String { "group.com.example.validators.\(name)" }
    static let logger = Logger(label: "validator-tests")

    /// The owner's validator of `subscriptions`: refuses a key that starts with "b" from any device
    /// but "admin", and raises for a key that starts with "r" after writing a row of its own.
    static let validators = """
        CREATE TABLE validator_log (key bytea);
        CREATE FUNCTION refuse_b(p_group text, p_key bytea, p_new jsonb, p_old jsonb, p_device text) RETURNS text
        LANGUAGE plpgsql AS $$
        BEGIN
            IF get_byte(p_key, 0) = ascii('r') THEN
                INSERT INTO validator_log VALUES (p_key);
                RAISE EXCEPTION 'no key may start with r (%)', convert_from(p_key, 'UTF8');
            END IF;
            IF p_new IS NOT NULL AND coalesce(p_new->>'topic', '') = '' THEN
                RETURN 'a subscription needs a topic';
            END IF;
            IF get_byte(p_key, 0) = ascii('b') AND p_device <> 'admin' THEN
                RETURN 'only admin writes ' || convert_from(p_key, 'UTF8') || CASE WHEN p_old IS NULL THEN ' (new)' ELSE '' END;
            END IF;
            RETURN NULL;
        END $$;
        INSERT INTO kvsync_validators VALUES ('collection', 'subscriptions', 'refuse_b(text, bytea, jsonb, jsonb, text)');
        """

    static func change(_ key: String, _ value: String?, token: UInt64, name: String = "subscriptions", base: Int64 = 0) throws -> OutgoingChange {
        OutgoingChange(kind: "collection", name: name, key: Array(key.utf8), value: try value.map { try CBOREncoder().encode(["topic": $0]) },
                       clock: HybridTimestamp(date: Date()).rawValue + token, base: base, token: token)
    }

    static func state(_ cluster: LocalPostgresCluster, group: String) throws -> [String] {
        try cluster.psql("""
            SELECT name || '/' || convert_from(key, 'UTF8') || '@' || version || '/' || device
            FROM kvsync_state WHERE group_id = '\(group)' ORDER BY name, key
            """).split(separator: "\n").map(String.init)
    }

    /// The outcome's kind and reason, and the current row's version and device, for comparing.
    static func shown(_ outcome: PushOutcome) -> String {
        switch outcome {
        case .applied: "applied"
        case .conflict(let version, _, _, let device, _): "conflict \(version) \(device)"
        case .missingBlob: "missing blob"
        case .rejected(let reason, let version, let value, _, let device, let problem):
            "rejected \(reason) \(version.map(String.init) ?? "-") \(device ?? "-") \(value == nil ? "no value" : "value") \(problem ?? "")"
        }
    }

    /// A batch of three with the middle one refused answers applied, rejected, applied, on the direct
    /// path and through a gateway, and in either body of the push (a batch that repeats a key takes
    /// the loop); the rejection carries the reason and the server's current row (none for a key it
    /// never had); the refused change is not in the log and what follows it lands.
    @Test func aBatchOfThreeWithTheMiddleRejectedAnswersAppliedRejectedAppliedDirectAndThroughAGateway() async throws {
        let started = ContinuousClock.now
        let cluster = try await offPool { try LocalPostgresCluster() }
        let server = try await ServerConnection.connect(cluster.tcpURL, logger: Self.logger, maxValueBytes: 1 << 20)
        defer { Task { await server.close() } }
        try await server.migrate()
        _ = try await offPool { try cluster.psql(Self.validators) }
        let group = Self.group("three")
        // The owner's device writes b1 first: a later refusal of b1 comes back with that row.
        let first = try await server.push(group: group, device: "admin", changes: [try Self.change("b1", "x", token: 1)],
                                          maxClockSkew: .seconds(60))
        guard case .applied(let adminVersion) = first.first else { Issue.record("admin's write: \(first)"); return }

        // The set-based body: three distinct keys.
        let set = try await server.push(group: group, device: "d1", changes: [try Self.change("a", "1", token: 1),
                                                                              try Self.change("b1", "2", token: 2, base: adminVersion),
                                                                              try Self.change("c", "3", token: 3)],
                                        maxClockSkew: .seconds(60))
        #expect(set.map(Self.shown) == ["applied", "rejected only admin writes b1 \(adminVersion) admin value ", "applied"])
        // The loop: a batch that repeats a key; the refused key is one the server never had.
        let loop = try await server.push(group: group, device: "d1", changes: [try Self.change("e", "1", token: 4),
                                                                               try Self.change("b2", "2", token: 5),
                                                                               try Self.change("e", "3", token: 6)],
                                         maxClockSkew: .seconds(60))
        #expect(loop.map(Self.shown) == ["applied", "rejected only admin writes b2 (new) - - no value ", "applied"])
        // The new value as JSON: a change without a topic is refused, a delete is not.
        let shaped = try await server.push(group: group, device: "d1", changes: [try Self.change("h", "", token: 8),
                                                                                 try Self.change("e", nil, token: 9)],
                                           maxClockSkew: .seconds(60))
        #expect(shaped.map(Self.shown) == ["rejected a subscription needs a topic - - no value ", "applied"])
        // Another collection, without validators, takes b3 from anyone.
        let other = try await server.push(group: group, device: "d1", changes: [try Self.change("b3", "1", token: 7, name: "notes")],
                                          maxClockSkew: .seconds(60))
        #expect(other.map(Self.shown) == ["applied"])
        // The batch sent again: the applied are duplicates, the refused is refused again.
        let again = try await server.push(group: group, device: "d1", changes: [try Self.change("a", "1", token: 1),
                                                                                try Self.change("b1", "2", token: 2, base: adminVersion),
                                                                                try Self.change("c", "3", token: 3)],
                                          maxClockSkew: .seconds(60))
        #expect(again.map(Self.shown) == set.map(Self.shown))
        #expect(try Self.state(cluster, group: group).map { $0.replacingOccurrences(of: #"@\d+/"#, with: "/", options: .regularExpression) }
                == ["notes/b3/d1", "subscriptions/a/d1", "subscriptions/b1/admin", "subscriptions/c/d1", "subscriptions/e/d1"])
        #expect(try cluster.psql("SELECT value IS NULL FROM kvsync_state WHERE key = '\\x65'").trimmingCharacters(in: .whitespacesAndNewlines) == "t")
        #expect(try cluster.psql("SELECT count(*) FROM kvsync_changes WHERE key IN ('\\x6231', '\\x6232') AND device = 'd1'")
                .trimmingCharacters(in: .whitespacesAndNewlines) == "0")

        // Through a gateway: the same outcome reaches the device, unchanged.
        let (gateway, url) = try await startGateway(cluster)
        defer { gateway.kill(SIGKILL) }
        let token = try await issueToken(cluster, ["--group", group, "--device", "g"])
        let connection = try GatewayConnection(url: SyncGatewayURL(url), token: token, group: group, maxValueBytes: 1 << 20,
                                               operationTimeout: .seconds(60), connectTimeout: .seconds(10))
        let through = try await connection.push(group: group, device: "g", changes: [try Self.change("f", "1", token: 1),
                                                                                      try Self.change("b1", "2", token: 2, base: adminVersion),
                                                                                      try Self.change("g", "3", token: 3)],
                                                maxClockSkew: .seconds(60))
        #expect(through.map(Self.shown) == ["applied", "rejected only admin writes b1 \(adminVersion) admin value ", "applied"])
        guard case .rejected(_, _, let value, let clock, _, _) = through[1] else { return }
        #expect(value == (try CBOREncoder().encode(["topic": "x"])) && clock > 0)
        print("[validators] the batch of three, direct and through a gateway, in \(ContinuousClock.now - started)")
    }

    /// A validator that raises refuses the change with its message, and what it wrote is rolled back;
    /// a reason is cut to its bound; an error that says nothing about the change (a serialization
    /// failure) fails the push rather than refuse it; a function of the wrong shape is refused when it
    /// is registered; a removed validator refuses, naming it.
    @Test func aValidatorThatRaisesRefusesWithItsMessageAndNeverAccepts() async throws {
        let started = ContinuousClock.now
        let cluster = try await offPool { try LocalPostgresCluster() }
        let server = try await ServerConnection.connect(cluster.tcpURL, logger: Self.logger, maxValueBytes: 1 << 20)
        defer { Task { await server.close() } }
        try await server.migrate()
        _ = try await offPool { try cluster.psql(Self.validators) }
        let group = Self.group("raises")
        func push(_ changes: [OutgoingChange]) async throws -> [String] {
            try await server.push(group: group, device: "d1", changes: changes, maxClockSkew: .seconds(60)).map(Self.shown)
        }
        #expect(try await push([try Self.change("a", "1", token: 1), try Self.change("r1", "2", token: 2), try Self.change("c", "3", token: 3)])
                == ["applied", "rejected no key may start with r (r1) - - no value ", "applied"])
        #expect(try cluster.psql("SELECT count(*) FROM validator_log").trimmingCharacters(in: .whitespacesAndNewlines) == "0")

        // A long reason reaches the device cut to its bound.
        _ = try await offPool {
            try cluster.psql("""
                CREATE FUNCTION long_reason(p_group text, p_key bytea, p_new jsonb, p_old jsonb, p_device text) RETURNS text
                LANGUAGE sql AS $$ SELECT CASE WHEN get_byte(p_key, 0) = ascii('l') THEN repeat('é', 5000) END $$;
                INSERT INTO kvsync_validators VALUES ('collection', 'subscriptions', 'long_reason(text, bytea, jsonb, jsonb, text)');
                """)
        }
        let long = try await server.push(group: group, device: "d1", changes: [try Self.change("l", "1", token: 4)], maxClockSkew: .seconds(60))
        guard case .rejected(let reason, _, _, _, _, _)? = long.first else { Issue.record("not rejected: \(long)"); return }
        #expect(reason == String(repeating: "é", count: PushOutcome.maxReasonCharacters))

        // A serialization failure in a validator fails the batch (sent again later), nothing applied.
        _ = try await offPool {
            try cluster.psql("""
                CREATE FUNCTION transient(p_group text, p_key bytea, p_new jsonb, p_old jsonb, p_device text) RETURNS text
                LANGUAGE plpgsql AS $$ BEGIN
                    IF get_byte(p_key, 0) = ascii('t') THEN RAISE EXCEPTION 'try again' USING ERRCODE = '40001'; END IF;
                    RETURN NULL;
                END $$;
                INSERT INTO kvsync_validators VALUES ('collection', 'subscriptions', 'transient(text, bytea, jsonb, jsonb, text)');
                """)
        }
        await #expect(throws: (any Error).self) {
            _ = try await server.push(group: group, device: "d1", changes: [try Self.change("m", "1", token: 5), try Self.change("t", "1", token: 6)],
                                      maxClockSkew: .seconds(60))
        }
        #expect(try cluster.psql("SELECT count(*) FROM kvsync_state WHERE key = '\\x6d'").trimmingCharacters(in: .whitespacesAndNewlines) == "0")

        // The wrong shape is refused at registration, in one line naming it.
        let wrong = #expect(throws: (any Error).self) {
            try cluster.psql("INSERT INTO kvsync_validators VALUES ('collection', 'notes', 'length(text)')")
        }
        #expect("\(wrong.map { "\($0)" } ?? "")".contains("length(text) is not a function (p_group text, p_key bytea"))

        // A validator renamed after it was registered is still called (kvsync_validate's static call
        // names it by its old name: the way around finds it by its oid).
        _ = try await offPool { try cluster.psql("ALTER FUNCTION transient(text, bytea, jsonb, jsonb, text) RENAME TO transient_renamed") }
        await #expect(throws: (any Error).self) {
            _ = try await server.push(group: group, device: "d1", changes: [try Self.change("t", "1", token: 6)], maxClockSkew: .seconds(60))
        }

        // A validator dropped after it was registered refuses every change of its collection, also
        // when a function of the same name and arguments is made again (another function).
        _ = try await offPool { try cluster.psql("DROP FUNCTION long_reason(text, bytea, jsonb, jsonb, text)") }
        let dropped = try await push([try Self.change("n", "1", token: 7)])
        #expect(dropped.count == 1 && dropped[0].hasPrefix("rejected the validator ") && dropped[0].contains("no longer exists"))
        _ = try await offPool {
            try cluster.psql("""
                CREATE FUNCTION long_reason(p_group text, p_key bytea, p_new jsonb, p_old jsonb, p_device text) RETURNS text
                LANGUAGE sql AS $$ SELECT NULL::text $$
                """)
        }
        let remade = try await push([try Self.change("o", "1", token: 8)])
        #expect(remade.count == 1 && remade[0].hasPrefix("rejected the validator ") && remade[0].contains("no longer exists"))
        print("[validators] raises, bound, transient, shape, renamed, dropped in \(ContinuousClock.now - started)")
    }
}
#endif
