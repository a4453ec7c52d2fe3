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

/// The network between a device and its gateway: old TLS versions, RSA key exchange and CBC suites
/// offered by a client (`openssl s_client`), a certificate that names another host, plain HTTP, and
/// what a device is told when TLS fails.
@Suite(.serialized) struct TransportAttacks {
    /// `openssl s_client` against `port` with `arguments`: whether the handshake succeeded, and the
    /// cipher it agreed on.
    static func handshake(_ port: String, _ arguments: [String]) async throws -> (ok: Bool, cipher: String) {
        let result = try await offPool {
            try run("/usr/bin/openssl", ["s_client", "-connect", "127.0.0.1:\(port)", "-servername", "localhost"] + arguments,
                    stdin: "", timeout: 30)
        }
        let cipher = result.stdout.split(separator: "\n").first { $0.contains("Cipher is ") }
            .map { String($0.split(separator: " ").last ?? "") } ?? ""
        return (result.status == 0 && !cipher.isEmpty && cipher != "(NONE)", cipher)
    }

    @Test func tls12OffersOnlyForwardSecretAEADSuitesAndNothingOlderThan12() async throws {
        let pki = try await offPool { try TestPKI() }
        let rsa = try await offPool { try pki.certificate("rsa", names: "IP:127.0.0.1,DNS:localhost", rsa: true) }
        let arena = try await Arena("tls-suites", gatewayArguments: ["--tls-certificate", rsa.certificate, "--tls-key", rsa.key])
        let port = String(arena.url.split(separator: ":").last!)
        // The client offers what old servers took (security level 0, so that OpenSSL itself offers them).
        for (what, arguments) in [("RSA key exchange", ["-tls1_2", "-cipher", "AES128-SHA:AES256-GCM-SHA384:@SECLEVEL=0"]),
                                  ("CBC with SHA-1, even with ECDHE", ["-tls1_2", "-cipher", "ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA:@SECLEVEL=0"]),
                                  ("TLS 1.1", ["-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"]),
                                  ("TLS 1.0", ["-tls1", "-cipher", "DEFAULT:@SECLEVEL=0"])] {
            let result = try await Self.handshake(port, arguments)
            #expect(!result.ok, "\(what) was accepted (\(result.cipher))")
        }
        let modern = try await Self.handshake(port, ["-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256"])
        #expect(modern.ok && modern.cipher == "ECDHE-RSA-AES128-GCM-SHA256", "\(modern)")
        let chacha = try await Self.handshake(port, ["-tls1_2", "-cipher", "ECDHE-RSA-CHACHA20-POLY1305"])
        #expect(chacha.ok, "\(chacha)")
        let tls13 = try await Self.handshake(port, ["-tls1_3"])
        #expect(tls13.ok && tls13.cipher.hasPrefix("TLS_"), "\(tls13)")
    }

    /// A DNS name is checked against the certificate's DNS names only, and an IP address against its
    /// IP addresses: `https://localhost` with a certificate that names only 127.0.0.1 is refused.
    @Test func aCertificateIsCheckedForTheNameTheDeviceAskedFor() async throws {
        let pki = try await offPool { try TestPKI() }
        let ipOnly = try await offPool { try pki.certificate("ip-only", names: "IP:127.0.0.1") }
        let dnsOnly = try await offPool { try pki.certificate("dns-only", names: "DNS:localhost") }
        for (files, refusedHost, acceptedHost) in [(ipOnly, "localhost", "127.0.0.1"), (dnsOnly, "127.0.0.1", "localhost")] {
            let arena = try await Arena("tls-names", gatewayArguments: ["--tls-certificate", files.certificate, "--tls-key", files.key])
            let port = String(arena.url.split(separator: ":").last!)
            let token = try await arena.token(["--device", "d"])
            let device = try Device(group: arena.group)
            try device.put("v", "k")
            let file = device.directory.path + "/.token"
            try Data(token.utf8).write(to: URL(fileURLWithPath: file))
            func sync(_ host: String) async throws -> ProcessResult {
                try await device.kvtoolOffPool(["sync", "run", "--once", "--server", "https://\(host):\(port)", "--token-file", file,
                                                "--ca-file", pki.caCertificate])
            }
            let refused = try await sync(refusedHost)
            #expect(refused.status == 74 && refused.stderr.contains("certificate does not name \(refusedHost)"), "\(refused.stderr)")
            #expect(try await arena.log().isEmpty)
            let accepted = try await sync(acceptedHost)
            #expect(accepted.status == 0, "\(accepted.stderr)")
            #expect(try await arena.log().count == 1)
        }
    }

    /// What a device is told when TLS fails is one line that says what to do, without BoringSSL's
    /// source paths; plain HTTP off this machine is refused before anything is sent.
    @Test func tlsFailuresSayWhatToDoAndPlainHTTPStaysOnThisMachine() async throws {
        let pki = try await offPool { try TestPKI() }
        let arena = try await Arena("tls-errors", gatewayArguments: ["--tls-certificate", pki.serverCertificate, "--tls-key", pki.serverKey])
        let token = try await arena.token(["--device", "d"])
        let device = try Device(group: arena.group)
        try device.put("v", "k")
        let file = device.directory.path + "/.token"
        try Data(token.utf8).write(to: URL(fileURLWithPath: file))
        let untrusted = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", arena.url, "--token-file", file])
        #expect(untrusted.status == 74 && untrusted.stderr.contains("not trusted: pass --ca-file FILE"), "\(untrusted.stderr)")
        #expect(untrusted.stderr.split(separator: "\n").count == 1 && !untrusted.stderr.contains(".cc:")
                && !untrusted.stderr.contains("OPENSSL_internal"), "\(untrusted.stderr)")
        let plain = try await device.kvtoolOffPool(["sync", "run", "--once", "--server",
                                                    arena.url.replacingOccurrences(of: "https://", with: "http://"), "--token-file", file])
        #expect(plain.status == 74 && plain.stderr.split(separator: "\n").count == 1, "\(plain.stderr)")
        // http:// to another machine: refused before connecting, unless the user says the network is trusted.
        let remote = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", "http://192.0.2.10:8390", "--token-file", file])
        #expect(remote.status == 65 && remote.stderr.contains("clear text"), "\(remote.stderr)")
        #expect(throws: ReplicationError.self) { try SyncGatewayURL("http://sync.example.com") }
        #expect(try SyncGatewayURL("http://sync.example.com", allowInsecureHTTP: true).allowsInsecureHTTP)
        for loopback in ["http://127.0.0.1:1", "http://localhost:1", "http://127.3.4.5:1", "http://[::1]:1"] {
            #expect(throws: Never.self) { _ = try SyncGatewayURL(loopback) }
        }
        #expect(try await arena.log().isEmpty)
    }

    /// A secret given in a file (or the environment) is not on the command line, where `ps` shows it
    /// to every user of the machine: the gateway's database URL with its password, a device's token.
    @Test func secretsFromFilesStayOffTheCommandLine() async throws {
        let arena = try await Arena("secrets")
        let files = TemporaryDirectory()
        let urlFile = files.path + "/database-url"
        try "postgres://\(LocalPostgresCluster.gatewayLogin):not-for-ps-eyes@127.0.0.1:\(arena.cluster.port)/kv\n"
            .write(toFile: urlFile, atomically: true, encoding: .utf8)
        let gateway = try BackgroundProcess(productsDirectory() + "/kvtool", ["sync", "gateway", "--database-url-file", urlFile,
                                                                              "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        defer { gateway.kill(SIGKILL) }
        let url = try #require(try await offPool { gateway.waitForLine(timeout: 60) { GatewayReadyLine($0) != nil } }.flatMap(GatewayReadyLine.init)).url
        func commandLine(_ pid: Int32) throws -> String {
            String(decoding: try Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline")), as: UTF8.self)
        }
        #expect(try !commandLine(gateway.pid).contains("not-for-ps-eyes"))
        let token = try await arena.token(["--device", "d"])
        let device = try Device(group: arena.group)
        try device.put("v", "k")
        let tokenFile = files.path + "/token"
        try (token + "\n").write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let live = try device.kvtoolInBackground(["sync", "run", "--server", url, "--token-file", tokenFile, "--seconds", "60"])
        defer { live.kill(SIGKILL) }
        #expect(try await offPool { live.waitForLine(timeout: 60) { $0.hasPrefix("device ") } } != nil)
        #expect(try !commandLine(live.pid).contains(token))
        #expect(await eventuallyAsync(30) { ((try? await arena.log()) ?? []).count == 1 })
    }
}
#endif
