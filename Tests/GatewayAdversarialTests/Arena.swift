#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import SyncTestSupport
import SyncWire
import PostgresTesting
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A real `kvtool sync gateway` process (logged in as a member of `kvsync_gateway` only) in front of
/// a throwaway PostgreSQL cluster, with honest devices of one group and the means to attack it through
/// the wire format: what every adversarial test starts from.
final class Arena: @unchecked Sendable {
    let cluster: LocalPostgresCluster
    let gateway: BackgroundProcess
    let url: String
    let group: String

    init(_ name: String, gatewayArguments: [String] = [], clusterOptions: [String] = [],
         gatewayEnvironment: [String: String] = [:]) async throws {
        group = "group.com.example.adversary.\(name)"
        cluster = try await offPool { try LocalPostgresCluster() }
        if !clusterOptions.isEmpty {
            cluster.serverOptions = clusterOptions
            try cluster.stop()
            try cluster.start()
        }
        (gateway, url) = try await startGateway(cluster, extra: gatewayArguments, environment: gatewayEnvironment)
    }

    deinit { gateway.kill(SIGKILL) }

    /// A credential of this group (`--device NAME`, `--read-only` and the like in `arguments`).
    func token(_ arguments: [String] = []) async throws -> String {
        try await issueToken(cluster, ["--group", group] + arguments)
    }

    /// The rows of the server's log, every group's: `device|token|key|value` (key and value as text).
    func log() async throws -> [String] {
        try await offPool { [cluster] in
            try cluster.psql("""
                SELECT group_id || '|' || device || '|' || token || '|' || convert_from(key, 'UTF8') || '|' || coalesce(encode(value, 'hex'), '-')
                FROM kvsync_changes ORDER BY seq
                """).split(separator: "\n").map(String.init)
        }
    }

    /// The headers a device of this group sends with `credential` (and `install`, its install id:
    /// `KVSync-Install`, as a device of issue 46 on sends it; none, as one before).
    func headers(_ credential: String, install: String? = nil) -> [String] {
        ["Authorization: Bearer \(credential)", "\(GatewayWire.groupHeader): \(group)"] + (install.map { ["\(InstallID.header): \($0)"] } ?? [])
    }

    /// A raw push of `changes` (key text → value text) as `device`, from `source`.
    func push(_ credential: String, device: String = "", install: String? = nil, skew: Int64 = 60_000, changes: [OutgoingChange],
              source: String? = nil) async throws -> RawHTTP.Answer {
        let body = GatewayPushRequest(device: device, maxClockSkewMilliseconds: skew, changes: changes).encoded()
        let url = self.url, headers = headers(credential, install: install)
        return try await offPool { try RawHTTP.request(url, "POST /v1/push", headers: headers, body: body, source: source) }
    }

    /// A raw request with `credential`.
    func get(_ target: String, _ credential: String, install: String? = nil, source: String? = nil) async throws -> RawHTTP.Answer {
        let url = self.url, headers = headers(credential, install: install)
        return try await offPool { try RawHTTP.request(url, "GET \(target)", headers: headers, source: source) }
    }

    /// `kvtool sync run --once` for `device` through the gateway with `credential` (in a file, as a
    /// device keeps it).
    func sync(_ device: Device, _ credential: String, _ extra: [String] = []) async throws -> ProcessResult {
        let file = device.directory.path + "/.token"
        try writeSecretFile(file, credential + "\n")
        return try await device.kvtoolOffPool(["sync", "run", "--once", "--server", url, "--token-file", file] + extra)
    }
}

/// A change of the `notes` collection, as a replicator sends it.
func note(_ key: String, _ value: String?, clock: UInt64 = HybridTimestamp(date: Date()).rawValue, base: Int64 = 0,
          token: UInt64) throws -> OutgoingChange {
    OutgoingChange(kind: "collection", name: "notes", key: Array(key.utf8), value: try value.map { try CBOREncoder().encode($0) },
                   clock: clock, base: base, token: token)
}
#endif
