#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import TestSupport
@testable import PostgresTesting
import SyncTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `kvtool sync`'s errors and its setup from the help alone (issue 36, items 6 and 7): real kvtool
/// processes, each with a timeout, against servers nobody listens on.
@Suite struct SyncCommandUsabilityTests {
    static func group(_ name: String) -> String { "group.com.example.usability.\(name)" }

    /// Nothing listens on port 1 of the loopback: every connection is refused at once.
    static let deadServer = "postgres://u@127.0.0.1:1/db"
    static let deadGateway = "http://127.0.0.1:1"
    /// A token of the form `kvtool sync token issue` prints (no gateway will ever see it).
    static let wellFormedToken = "kvs1_" + String(repeating: "A", count: 43)

    /// `kvtool ARGS` off the cooperative pool, killed (and the test failed) after `timeout` seconds.
    static func kvtool(_ arguments: [String], timeout: TimeInterval = 60) async throws -> ProcessResult {
        try await offPool { try run(productsDirectory() + "/kvtool", arguments, timeout: timeout) }
    }

    static func lines(_ text: String) -> [Substring] { text.split(separator: "\n", omittingEmptySubsequences: true) }

    @Test func onceAgainstADeadServerPrintsOneLineOnStandardErrorInOurWords() async throws {
        let device = try Device(group: Self.group("once"))
        let result = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", Self.deadServer])
        #expect(result.status == 74, "\(result.stderr)")
        #expect(result.stdout.isEmpty, "\(result.stdout)")
        #expect(Self.lines(result.stderr).count == 1, "\(result.stderr)")
        #expect(result.stderr.hasPrefix("kvtool: error: cannot reach the sync server at 127.0.0.1:1: connection refused; check that PostgreSQL is running"),
                "\(result.stderr)")
        #expect(!result.stderr.contains("SingleConnectionFailure") && !result.stderr.contains("errno"), "\(result.stderr)")

        let gateway = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", Self.deadGateway, "--token", Self.wellFormedToken])
        #expect(gateway.status == 74, "\(gateway.stderr)")
        #expect(gateway.stdout.isEmpty, "\(gateway.stdout)")
        #expect(Self.lines(gateway.stderr).count == 1, "\(gateway.stderr)")
        #expect(gateway.stderr.hasPrefix("kvtool: error: cannot connect to the sync gateway at 127.0.0.1:1: connection refused; check that the gateway is running"),
                "\(gateway.stderr)")
    }

    @Test func aLiveRunThatNeverReachesItsServerExits74WithItsErrorOnce() async throws {
        let device = try Device(group: Self.group("live"))
        let result = try await offPool { try device.kvtool(["sync", "run", "--seconds", "3", "--server", Self.deadServer], timeout: 60) }
        #expect(result.status == 74, "\(result.stdout)\(result.stderr)")
        // The same error each round: printed once, whatever the number of rounds.
        #expect(Self.lines(result.stderr).count == 1, "\(result.stderr)")
        #expect(result.stderr.hasPrefix("kvtool: error: cannot reach the sync server at 127.0.0.1:1"), "\(result.stderr)")
        #expect(!result.stdout.contains("error"), "\(result.stdout)")
    }

    @Test func syncRunWithNothingEnabledSaysHowToEnableAndExits64() async throws {
        // A container with nothing enabled (with no container at all, sync run says "no container").
        let root = TemporaryDirectory()
        let group = Self.group("nothing")
        _ = try SharedContainer(groupIdentifier: group, root: root.path)
        let result = try await Self.kvtool(["sync", "run", "--once", "--server", Self.deadServer, "--root", root.path, "--group", group])
        #expect(result.status == 64, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.isEmpty, "\(result.stdout)")
        #expect(Self.lines(result.stderr).count == 1, "\(result.stderr)")
        #expect(result.stderr.contains("nothing replicates") && result.stderr.contains("kvtool sync enable COLLECTION"), "\(result.stderr)")
    }

    @Test func enableRefusesASuiteThatDoesNotExistAndPrintsWhatItChangedInJSON() async throws {
        let device = try Device(group: Self.group("enable"))
        let nope = try await device.kvtoolOffPool(["sync", "enable", "--suite", "nope"])
        #expect(nope.status == 1, "\(nope.stdout)\(nope.stderr)")
        #expect(nope.stderr == "kvtool: error: no defaults suite named 'nope' (kvtool collections lists them)\n", "\(nope.stderr)")
        #expect(try Replication.declaredTargets(in: device.container.store).contains(.defaults("nope")) == false)
        #expect(try device.container.store.catalog().contains { $0.name == "nope" } == false)
        let missing = try await device.kvtoolOffPool(["sync", "enable", "nope"])
        #expect(missing.status == 1 && Self.lines(missing.stderr).count == 1, "\(missing.stderr)")

        _ = try device.container.store.collection("more", key: String.self, value: String.self)
        let enabled = try await device.kvtoolOffPool(["sync", "enable", "more", "--json"])
        #expect(enabled.status == 0, "\(enabled.stderr)")
        #expect(enabled.stdout == #"{"enabled":"more","kind":"collection","changed":true,"created":false}"# + "\n", "\(enabled.stdout)")
        let again = try await device.kvtoolOffPool(["sync", "enable", "--suite", "settings", "--json"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout == #"{"enabled":"settings","kind":"defaults","changed":false,"created":false}"# + "\n", "\(again.stdout)")
    }

    @Test func pruneOffersNoGatewayOptionsAndRefusesAGatewayInOneLine() async throws {
        let prune = try await Self.kvtool(["sync", "prune", "--help"])
        #expect(prune.status == 0)
        for option in ["--token", "--token-file", "--ca-file", "--allow-insecure-http"] {
            #expect(!prune.stdout.contains(option), "\(option) in \(prune.stdout)")
        }
        let run = try await Self.kvtool(["sync", "run", "--help"])
        #expect(run.stdout.contains("--token-file") && run.stdout.contains("--ca-file"), "\(run.stdout)")

        let device = try Device(group: Self.group("prune"))
        let refused = try await device.kvtoolOffPool(["sync", "prune", "--server", Self.deadGateway, "--older-than", "1"])
        #expect(refused.status == 64 && Self.lines(refused.stderr).count == 1 && refused.stderr.contains("needs the database"), "\(refused.stderr)")
        let token = try await device.kvtoolOffPool(["sync", "prune", "--server", Self.deadServer, "--older-than", "1", "--token", "x"])
        #expect(token.status == 64 && Self.lines(token.stderr).count == 1, "\(token.stderr)")
    }

    @Test func statusPrintsDatesInISO8601InTextAndJSON() async throws {
        let device = try Device(group: Self.group("status"))
        // A failed round records its error and when.
        _ = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", Self.deadServer])
        let iso = #"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z"#
        let text = try await device.kvtoolOffPool(["sync", "status"])
        #expect(text.status == 0, "\(text.stderr)")
        let errorLine = Self.lines(text.stdout).first { $0.hasPrefix("last error ") }.map(String.init) ?? ""
        #expect(errorLine.range(of: " at " + iso + "$", options: .regularExpression) != nil, "\(text.stdout)")
        #expect(!text.stdout.contains("+0000"), "\(text.stdout)")
        let json = try await device.kvtoolOffPool(["sync", "status", "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        let at = object?["lastErrorAt"] as? String ?? ""
        #expect(at.range(of: "^" + iso + "$", options: .regularExpression) != nil, "\(json.stdout)")
        #expect(object?["lastSyncAt"] is NSNull, "\(json.stdout)")
    }

    @Test func aGatewayWhoseDatabaseNeverAnswersSaysWhatItWaitsForThenFails() async throws {
        let result = try await Self.kvtool(["sync", "gateway", "--database", Self.deadServer, "--database-timeout", "2",
                                          "--listen", "127.0.0.1:0"], timeout: 60)
        #expect(result.status == 74, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.isEmpty, "\(result.stdout)")
        let lines = Self.lines(result.stderr)
        #expect(lines.count == 2, "\(result.stderr)")
        #expect(lines.first?.hasPrefix("kvtool: waiting for the database at 127.0.0.1:1 (connection refused)") == true, "\(result.stderr)")
        #expect(lines.last?.hasPrefix("kvtool: error: cannot reach the database at 127.0.0.1:1 within 2 s: connection refused") == true,
                "\(result.stderr)")

        // A database that accepts the connection and never answers (a server hung at its start).
        let (fd, port) = try GatewayTests.listeningSocket()
        defer { close(fd) }
        let silent = try await Self.kvtool(["sync", "gateway", "--database", "postgres://u@127.0.0.1:\(port)/db", "--database-timeout", "3",
                                          "--listen", "127.0.0.1:0"], timeout: 60)
        #expect(silent.status == 74, "\(silent.stdout)\(silent.stderr)")
        let told = Self.lines(silent.stderr)
        #expect(told.count == 2, "\(silent.stderr)")
        #expect(told.first?.hasPrefix("kvtool: waiting for the database at 127.0.0.1:\(port)") == true, "\(silent.stderr)")
        #expect(told.last?.hasPrefix("kvtool: error: cannot reach the database at 127.0.0.1:\(port) within 3 s: no answer") == true,
                "\(silent.stderr)")
    }

    @Test func theGatewaysDefaultPortIsNotServes() async throws {
        let gateway = try await Self.kvtool(["sync", "gateway", "--help"])
        #expect(gateway.stdout.contains("127.0.0.1:8391"), "\(gateway.stdout)")
        #expect(!gateway.stdout.contains("127.0.0.1:8390"), "\(gateway.stdout)")
        #if Serve
        // (`kvtool serve` exists with the Serve trait, which the sanitizer builds leave out.)
        let serve = try await Self.kvtool(["serve", "--help"])
        #expect(serve.stdout.contains("8390"), "\(serve.stdout)")
        #endif
    }

    /// Device A has a collection with data, enables it and syncs; device B, a fresh container that has
    /// never opened the collection, joins from the command line alone and receives the data. A third
    /// container with a collection of that name and other encodings is refused.
    @Test func aSecondDeviceJoinsACollectionFromTheCommandLineAlone() async throws {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let url = cluster.tcpURL.description
        let group = Self.group("join")
        let a = try Device(group: group)
        let recipes = try a.container.store.collection("recipes", key: String.self, value: String.self)
        try a.write { tx in
            try recipes.put("flour, water", forKey: "bread", in: tx)
            try recipes.put("eggs", forKey: "omelette", in: tx)
        }
        let enabledA = try await a.kvtoolOffPool(["sync", "enable", "recipes", "--json"])
        #expect(enabledA.status == 0, "\(enabledA.stderr)")
        #expect(enabledA.stdout == #"{"enabled":"recipes","kind":"collection","changed":true,"created":false}"# + "\n", "\(enabledA.stdout)")
        let pushed = try await a.kvtoolOffPool(["sync", "run", "--once", "--server", url])
        #expect(pushed.status == 0, "\(pushed.stderr)")

        // B: never opened recipes. Without a server it is told how to join.
        let b = TemporaryDirectory()
        func kvtoolB(_ arguments: [String]) async throws -> ProcessResult {
            try await Self.kvtool(arguments + ["--root", b.path, "--group", group], timeout: 120)
        }
        let alone = try await kvtoolB(["sync", "enable", "recipes"])
        #expect(alone.status == 1 && Self.lines(alone.stderr).count == 1 && alone.stderr.contains("kvtool sync enable recipes --server URL"),
                "\(alone.stderr)")
        let joined = try await kvtoolB(["sync", "enable", "recipes", "--server", url, "--json"])
        #expect(joined.status == 0, "\(joined.stderr)")
        #expect(joined.stdout == #"{"enabled":"recipes","kind":"collection","changed":true,"created":true}"# + "\n", "\(joined.stdout)")
        let pulled = try await kvtoolB(["sync", "run", "--once", "--server", url])
        #expect(pulled.status == 0, "\(pulled.stderr)")
        let container = try SharedContainer(groupIdentifier: group, root: b.path)
        let received = try container.store.collection("recipes", key: String.self, value: String.self)
        #expect(try received.entries().map { "\($0.key)=\($0.value)" } == ["bread=flour, water", "omelette=eggs"])
        #expect(try container.store.catalogEntry(forCollection: "recipes")?.keyEncoding == a.container.store.catalogEntry(forCollection: "recipes")?.keyEncoding)
        let status = try await kvtoolB(["sync", "status", "--json"])
        #expect(status.stdout.contains(#""targets":["collection 'recipes'"]"#), "\(status.stdout)")

        // D joins the same way through a sync gateway, with a credential of the group.
        let (gateway, gatewayURL) = try await startGateway(cluster)
        defer { gateway.kill(SIGKILL) }
        let token = try await issueToken(cluster, ["--group", group, "--device", "d"])
        let d = TemporaryDirectory()
        func kvtoolD(_ arguments: [String]) async throws -> ProcessResult {
            try await Self.kvtool(arguments + ["--server", gatewayURL, "--token", token, "--root", d.path, "--group", group], timeout: 120)
        }
        let joinedD = try await kvtoolD(["sync", "enable", "recipes"])
        #expect(joinedD.status == 0 && joinedD.stdout.hasPrefix("created collection 'recipes'"), "\(joinedD.stdout)\(joinedD.stderr)")
        let pulledD = try await kvtoolD(["sync", "run", "--once"])
        #expect(pulledD.status == 0, "\(pulledD.stderr)")
        let containerD = try SharedContainer(groupIdentifier: group, root: d.path)
        #expect(try containerD.store.collection("recipes", key: String.self, value: String.self).entries().map { "\($0.key)=\($0.value)" }
                == ["bread=flour, water", "omelette=eggs"])

        // C: a recipes of its own, keyed by integers: refused, and nothing is declared.
        let c = try Device(group: group)
        _ = try c.container.store.collection("recipes", key: Int64.self, value: String.self)
        let clash = try await c.kvtoolOffPool(["sync", "enable", "recipes", "--server", url])
        #expect(clash.status == 65 && Self.lines(clash.stderr).count == 1 && clash.stderr.contains("cannot replicate together"), "\(clash.stderr)")
        #expect(try Replication.declaredTargets(in: c.container.store).contains(.collection("recipes")) == false)

        // A collection nobody published.
        let unknown = try await kvtoolB(["sync", "enable", "nothing-here", "--server", url])
        #expect(unknown.status == 1 && Self.lines(unknown.stderr).count == 1 && unknown.stderr.contains("no device has published"), "\(unknown.stderr)")
    }
}
#endif
