#if PostgreSQL
import Foundation
import KVStore
import SyncKitPostgres
import SyncTestSupport
import Testing

/// What a replicator syncs with, as one value: checked when the replicator is made, and shown without
/// its secrets.
@Suite struct ReplicatorEndpointTests {
    static let token = SyncTokens.prefix + String(repeating: "A", count: 43)

    @Test func anEndpointShowsItsURLAndNeverItsSecrets() throws {
        let gateway = Replicator.Endpoint.gateway(try SyncGatewayURL("http://127.0.0.1:8080"), token: Self.token)
        let database = Replicator.Endpoint.database(try ServerURL("postgres://kv:secret@127.0.0.1:5432/kv"))
        #expect(gateway.description == "http://127.0.0.1:8080")
        #expect(!database.description.contains("secret"))
        for endpoint in [gateway, database] {
            var dumped = ""
            dump(endpoint, to: &dumped)
            #expect(!dumped.contains(Self.token) && !dumped.contains("secret"), "\(dumped)")
            #expect(!String(reflecting: endpoint).contains(Self.token))
        }
    }

    @Test func aReplicatorTakesItsEndpointAsOneValue() async throws {
        let device = try Device(group: "group.com.example.endpoint")
        #expect(throws: ReplicationError.self) {
            _ = try Replicator(container: device.container, endpoint: .gateway(try SyncGatewayURL("http://127.0.0.1:8080"), token: "nope"),
                               targets: device.targets)
        }
        let url = try SyncGatewayURL("http://127.0.0.1:8080")
        let through = try Replicator(container: device.container, endpoint: .gateway(url, token: Self.token), targets: device.targets)
        #expect(through.gateway == url && through.server == nil)
        #expect(through.endpoint == .gateway(url, token: Self.token))
        await through.close()
    }

    @Test func aReplicatorWithoutAnEndpointHasNoServer() async throws {
        let device = try Device(group: "group.com.example.endpoint.none")
        let replicator = try Replicator(container: device.container, endpoint: nil, targets: device.targets)
        await #expect(throws: ReplicationError.noServer) { try await replicator.sync() }
    }
}
#endif
