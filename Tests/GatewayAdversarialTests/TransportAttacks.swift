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
            try writeSecretFile(file, token)
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
        try writeSecretFile(file, token)
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

    /// A secret file another user can read (0644, as `echo secret > file` leaves it under the usual
    /// umask, or 0640) is refused before anything is started or sent, as `ssh` refuses such a key: the
    /// gateway's database URL, a device's token, a gateway login's password, a JWT signing secret, a
    /// TLS key (issue 46). Each refusal is one line, exit 65, naming the file, its mode and the chmod.
    @Test(.blockingWork) func secretFilesOthersCanReadAreRefusedAsSSHRefusesAKey() async throws {
        let arena = try await Arena("readable-secrets")
        let files = TemporaryDirectory()
        let owner = arena.cluster.tcpURL.description
        let login = "postgres://\(LocalPostgresCluster.gatewayLogin):pw@127.0.0.1:\(arena.cluster.port)/kv"
        func readable(_ name: String, _ contents: String, mode: mode_t = 0o644) throws -> String {
            let path = files.path + "/" + name
            try writeSecretFile(path, contents)
            #expect(chmod(path, mode) == 0)
            return path
        }
        func refusal(_ what: String, _ path: String, mode: String = "644") -> String {
            "kvtool: error: the \(what) file \(path) can be read or changed by its group or others (mode \(mode)), and a secret must be "
                + "readable by its owner only (or, owned by root, by its group too); it is not read: chmod 600 \(path)\n"
        }
        func expectRefused(_ arguments: [String], _ expected: String, by device: Device? = nil,
                           sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let r: ProcessResult
            if let device { r = try await device.kvtoolOffPool(arguments) } else { r = try await kvtoolRun(arguments) }
            #expect(r.status == 65 && r.stdout.isEmpty && r.stderr == expected, "\(arguments): \(r.stdout)\(r.stderr)",
                    sourceLocation: sourceLocation)
        }
        let url = try readable("database-url", login + "\n")
        try await expectRefused(["sync", "gateway", "--database-url-file", url, "--listen", "127.0.0.1:0", "--metrics-listen", "off"],
                                refusal("database URL", url))
        let groupReadable = try readable("database-url-640", login + "\n", mode: 0o640)
        try await expectRefused(["sync", "token", "list", "--database-url-file", groupReadable], refusal("database URL", groupReadable, mode: "640"))
        let password = try readable("password", "pw\n")
        try await expectRefused(["sync", "setup", "--database", owner, "--gateway-login", "another_login", "--gateway-password-file", password],
                                refusal("password", password))
        let secret = try readable("jwt-secret", "a shared secret of at least thirty-two bytes\n")
        try await expectRefused(["sync", "gateway", "--database", login, "--listen", "127.0.0.1:0", "--metrics-listen", "off",
                                 "--jwt-hs256-secret-file", secret], refusal("JWT secret", secret))
        let pki = try TestPKI()
        #expect(chmod(pki.serverKey, 0o644) == 0)
        try await expectRefused(["sync", "gateway", "--database", login, "--listen", "127.0.0.1:0", "--metrics-listen", "off",
                                 "--tls-certificate", pki.serverCertificate, "--tls-key", pki.serverKey], refusal("TLS key", pki.serverKey))
        let device = try Device(group: arena.group)
        try device.put("v", "k")
        let token = try readable("token", try await arena.token(["--device", "d"]) + "\n")
        try await expectRefused(["sync", "run", "--once", "--server", arena.url, "--token-file", token], refusal("token", token), by: device)
        #expect(try await arena.log().isEmpty)
        // The same token file, readable by its owner only, is read.
        #expect(chmod(token, 0o600) == 0)
        let synced = try await device.kvtoolOffPool(["sync", "run", "--once", "--server", arena.url, "--token-file", token])
        #expect(synced.status == 0, "\(synced.stderr)")
        #expect(try await arena.log().count == 1)
        // No role was made with the refused password.
        #expect(try arena.cluster.count("SELECT count(*) FROM pg_roles WHERE rolname = 'another_login'") == 0)
    }

    /// A secret given in a file (or the environment) is not on the command line, where `ps` shows it
    /// to every user of the machine: the gateway's database URL with its password, a device's token.
    @Test func secretsFromFilesStayOffTheCommandLine() async throws {
        let arena = try await Arena("secrets")
        let files = TemporaryDirectory()
        let urlFile = files.path + "/database-url"
        try writeSecretFile(urlFile, "postgres://\(LocalPostgresCluster.gatewayLogin):not-for-ps-eyes@127.0.0.1:\(arena.cluster.port)/kv\n")
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
        try writeSecretFile(tokenFile, token + "\n")
        let live = try device.kvtoolInBackground(["sync", "run", "--server", url, "--token-file", tokenFile, "--seconds", "60"])
        defer { live.kill(SIGKILL) }
        #expect(try await offPool { live.waitForLine(timeout: 60) { $0.hasPrefix("device ") } } != nil)
        #expect(try !commandLine(live.pid).contains(token))
        #expect(await eventuallyAsync(30) { ((try? await arena.log()) ?? []).count == 1 })
    }
}
#endif
