#if PostgreSQL
import ArgumentParser
import Foundation
import HTTPServerKit
import KVStore
import SyncGateway
import SyncKitPostgres
#if canImport(Glibc)
import Glibc
#endif

extension SyncCommand {
    /// `--database URL` or `--database-url-file FILE`: the database (`$KVSTORE_SYNC_SERVER` by
    /// default). A URL with a password on the command line is visible to every user of the machine
    /// (`ps`), so the file, or the environment, is the way to give one.
    struct DatabaseOption: ParsableArguments {
        @Option(name: .long, help: "The database, postgres://USER@HOST:PORT/DATABASE (default: $KVSTORE_SYNC_SERVER). A password here is visible to `ps`: use --database-url-file.")
        var database: String?
        @Option(name: .customLong("database-url-file"), help: "A file holding the database's URL (with its password), instead of --database.")
        var databaseURLFile: String?

        func validate() throws {
            if database != nil && databaseURLFile != nil { throw ValidationError("pass --database or --database-url-file, not both") }
        }

        func url() throws -> ServerURL {
            let given = try databaseURLFile.map { try SyncCommand.secret(fromFile: $0, what: "database URL") } ?? database
            guard let text = SyncCommand.given(given, orEnvironment: "KVSTORE_SYNC_SERVER") else {
                throw CLIError(.usage, "no database: pass --database URL (or --database-url-file FILE) or set KVSTORE_SYNC_SERVER")
            }
            if SyncGatewayURL.isGateway(text) { throw CLIError(.usage, "--database takes a postgres:// URL, not a gateway's") }
            return try ServerURL(text)
        }
    }

    /// `kvtool sync setup`.
    struct Setup: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "setup",
            abstract: "As the database's owner: create or migrate the schema, the role kvsync_gateway, and a login for gateways.",
            discussion: """
                The owner's step before a gateway serves devices (a gateway never creates or migrates the schema, and \
                refuses to log in as the owner). --gateway-login NAME creates a login role that is a member of \
                kvsync_gateway and of nothing else (or grants that role to an existing one that is not privileged); \
                run the gateway with it. --max-clock-skew sets the server's own clock bound: a push is refused when a \
                stamp is further ahead of the server's clock than the lower of this and its caller's bound. Safe to run again.
                """)
        @OptionGroup var database: DatabaseOption
        @Option(name: .customLong("gateway-login"), help: "A login role for gateways, a member of kvsync_gateway only.") var gatewayLogin: String?
        @Option(name: .customLong("gateway-password-file"), help: "A file holding that login's password (else it has none: trust, peer or certificate authentication).")
        var gatewayPasswordFile: String?
        @Option(name: .customLong("backend-login"), help: "A login role for an app's backend, a member of kvsync_backend only (sync backend grant gives it groups).")
        var backendLogin: String?
        @Option(name: .customLong("backend-password-file"), help: "A file holding that login's password.")
        var backendPasswordFile: String?
        @Option(name: .customLong("max-clock-skew"), help: "The server's clock bound, in seconds (60 at first).") var maxClockSkew: Double?
        @Flag(help: "One JSON object.") var json = false

        func validate() throws {
            if gatewayPasswordFile != nil && gatewayLogin == nil { throw ValidationError("--gateway-password-file goes with --gateway-login") }
            if backendPasswordFile != nil && backendLogin == nil { throw ValidationError("--backend-password-file goes with --backend-login") }
            if let maxClockSkew, !(maxClockSkew >= 0 && maxClockSkew <= 31_536_000) {
                throw ValidationError("--max-clock-skew must be from 0 to 31536000 seconds")
            }
        }

        func run() throws {
            let url = try database.url()
            let password = try gatewayPasswordFile.map { try SyncCommand.secret(fromFile: $0, what: "password") }
            let backendPassword = try backendPasswordFile.map { try SyncCommand.secret(fromFile: $0, what: "password") }
            let (login, backend, skew) = (gatewayLogin, backendLogin, maxClockSkew.map { Duration.milliseconds(Int64(($0 * 1000).rounded())) })
            let report = try blocking {
                try await SyncServerSetup.prepare(on: url, gatewayLogin: login, gatewayPassword: password, backendLogin: backend,
                                                  backendPassword: backendPassword, maxClockSkew: skew)
            }
            if json {
                print(try Output.line([
                    "schemaVersion": .integer(report.schemaVersion), "gatewayLogin": .string(orNull: report.gatewayLogin),
                    "createdLogin": .bool(report.createdLogin), "maxClockSkewMilliseconds": .integer(report.maxClockSkewMilliseconds),
                    "backendLogin": .string(orNull: report.backendLogin), "createdBackendLogin": .bool(report.createdBackendLogin),
                ]))
                return
            }
            print("schema version \(report.schemaVersion); role kvsync_gateway ready; clock bound \(Double(report.maxClockSkewMilliseconds) / 1000) s")
            if let login = report.gatewayLogin {
                print("\(report.createdLogin ? "created" : "granted") the gateway login \(login): kvtool sync gateway --database postgres://\(login)@HOST:PORT/DATABASE")
            }
            if let login = report.backendLogin {
                print("\(report.createdBackendLogin ? "created" : "granted") the backend login \(login): kvtool sync backend grant --login \(login) --group G")
            }
        }
    }

    /// `kvtool sync token issue|list|revoke`.
    struct Token: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "token",
            abstract: "Device credentials for a sync gateway: issue, list and revoke them (as the database's owner).",
            subcommands: [Issue.self, List.self, Revoke.self])

        /// `--group`, or `$KVSTORE_GROUP`, as every other command takes it.
        static func group(_ given: String?) throws -> String {
            guard let group = SyncCommand.given(given, orEnvironment: "KVSTORE_GROUP") else {
                throw CLIError(.usage, "no App Group given: pass --group ID or set KVSTORE_GROUP")
            }
            return group
        }

        struct Issue: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "issue",
                abstract: "Issue a credential for one group and print the token, and only the token (it is shown once).",
                discussion: """
                    A device that already has a live credential gets this one too, with a warning on standard error that \
                    names the others by id and issue time (revoke the one it replaces: sync token revoke --id ID). A new \
                    container under a name used before (the app installed again) syncs as an install of its own.
                    """)
            @OptionGroup var database: DatabaseOption
            @Option(help: "The group it syncs, and the only one it can read or write (default: $KVSTORE_GROUP).") var group: String?
            @Option(help: "The name of the device it is for (for list and revoke --device).") var device: String?
            @Flag(help: "Pull only: its pushes are refused.") var readOnly = false
            @Option(name: .customLong("expires-in"), help: "Seconds until it expires (default: never).") var expiresIn: Double?

            func validate() throws {
                if let expiresIn, !(expiresIn >= 1 && expiresIn <= 3_153_600_000) {
                    throw ValidationError("--expires-in must be from 1 second to 100 years")
                }
            }

            func run() throws {
                let url = try database.url()
                let group = try SyncCommand.Token.group(self.group)
                let (device, readOnly) = (self.device, self.readOnly)
                let lifetime = expiresIn.map { Duration.milliseconds(Int64($0 * 1000)) }
                let issued = try blocking {
                    try await SyncTokens.issue(on: url, group: group, device: device, readOnly: readOnly, expiresIn: lifetime)
                }
                print(issued.token)
                if let device, let warning = Self.warning(device: device, group: group, alsoLive: issued.alsoLive) {
                    Output.flush()
                    FileHandle.standardError.write(Data(("kvtool: warning: " + warning + "\n").utf8))
                }
            }

            /// Issued anyway (a rotation issues the new credential before it revokes the old one), but
            /// said: a device with two live credentials is often one that was meant to lose the first.
            /// The others are named by their id and issue time, never by anything secret.
            static func warning(device: String, group: String, alsoLive: [SyncCredential]) -> String? {
                guard !alsoLive.isEmpty else { return nil }
                let format = ISO8601DateFormatter()
                let named = alsoLive.map { "id \($0.id), issued \(format.string(from: $0.createdAt))" }.joined(separator: "; ")
                let shown = Escaping.escape(device, quoting: false, shortForms: true, style: .swift)
                if alsoLive.count == 1 {
                    return "device \(shown) of \(group) already has a live credential: \(named); the new one works beside it until one is "
                        + "revoked (kvtool sync token revoke --id \(alsoLive[0].id))"
                }
                return "device \(shown) of \(group) already has \(alsoLive.count) live credentials: \(named); the new one works beside them "
                    + "until they are revoked (kvtool sync token revoke --id ID)"
            }
        }

        struct List: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "list",
                abstract: "The credentials issued (never their tokens): id, group, device, read-only, created, expires, revoked.")
            @OptionGroup var database: DatabaseOption
            @Option(help: "Only this group's (default: $KVSTORE_GROUP; every group's when neither is given).") var group: String?
            @Flag(help: "One JSON array.") var json = false

            func run() throws {
                let url = try database.url()
                let group = SyncCommand.given(self.group, orEnvironment: "KVSTORE_GROUP")
                let credentials = try blocking { try await SyncTokens.list(on: url, group: group) }
                let format = ISO8601DateFormatter()
                if json {
                    print(try Output.line(.array(credentials.map { credential in
                        [
                            "id": .integer(credential.id), "group": .string(credential.group),
                            "device": .string(orNull: credential.device), "readOnly": .bool(credential.readOnly),
                            "createdAt": .string(format.string(from: credential.createdAt)),
                            "expiresAt": .string(orNull: credential.expiresAt.map(format.string(from:))),
                            "revokedAt": .string(orNull: credential.revokedAt.map(format.string(from:))),
                        ]
                    })))
                    return
                }
                if credentials.isEmpty { print("no credentials") }
                func shown(_ text: String) -> String { Escaping.escape(text, quoting: false, shortForms: true, style: .swift) }
                for credential in credentials {
                    let state = credential.revokedAt.map { "revoked \(format.string(from: $0))" }
                        ?? credential.expiresAt.map { ($0 <= Date() ? "expired " : "expires ") + format.string(from: $0) } ?? "no expiry"
                    print("\(credential.id)\t\(shown(credential.group))\t\(credential.device.map(shown) ?? "-")\t\(credential.readOnly ? "read-only" : "read-write")\t\(format.string(from: credential.createdAt))\t\(state)")
                }
            }
        }

        struct Revoke: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "revoke",
                abstract: "Revoke a credential (--id ID), or every one of a device (--device NAME --group G): refused at its next request.")
            @OptionGroup var database: DatabaseOption
            @Option(help: "The credential's id (sync token list).") var id: Int64?
            @Option(help: "Every credential issued to this device name (with --group).") var device: String?
            @Option(help: "The device's group (default: $KVSTORE_GROUP).") var group: String?

            func validate() throws {
                switch (id, device, group) {
                case (_?, nil, nil), (nil, _?, _): break
                default: throw ValidationError("pass --id ID, or --device NAME --group G")
                }
            }

            func run() throws {
                let url = try database.url()
                let (id, device) = (self.id, self.device)
                let group = try id == nil ? SyncCommand.Token.group(self.group) : nil
                let revoked = try blocking {
                    if let id { return try await SyncTokens.revoke(on: url, id: id) }
                    return try await SyncTokens.revoke(on: url, device: device!, group: group!)
                }
                guard revoked > 0 else { throw CLIError(.notFound, "no credential to revoke (none matches, or it was revoked before)") }
                print("revoked \(revoked) credential\(revoked == 1 ? "" : "s")")
            }
        }
    }

    /// `kvtool sync gateway`.
    struct Gateway: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "gateway",
            abstract: "Serve devices that sync with a credential (sync token issue) in front of the database.",
            discussion: """
                Each request runs in one database transaction as the role kvsync_gateway, scoped by PostgreSQL's \
                row-level security to the group of the credential presented; a push is recorded under the credential's \
                device, with this gateway's clock bound. --database names a login that is a member of kvsync_gateway \
                only (kvtool sync setup --gateway-login NAME makes one): the gateway refuses the owner, a superuser or a \
                role that bypasses row-level security. Prints `gateway listening on URL` first; while the database does \
                not answer, it says so on standard error and waits up to --database-timeout seconds, then fails \
                (exit 74). Listens on 127.0.0.1:8391 by default (kvtool serve's is 8390). GET /healthz (the process is up) \
                and GET /readyz (the database answers and its schema is current; 503 while draining) take no credential. \
                Prometheus metrics (GET /metrics), with /healthz and /readyz, are served on --metrics-listen, \
                127.0.0.1:9464 by default (`off`: none; a port in use stops the start with an error naming it); the \
                line `gateway metrics on URL` comes before the ready line. Each refusal and error is one line on standard \
                error (--log-format json: one JSON object; never a credential). SIGTERM or SIGINT drains it: requests in \
                flight finish, then it exits.
                """)
        @OptionGroup var database: DatabaseOption
        /// A hot standby for pulls (issue 51): its URL names a kvsync_gateway login, as --database's.
        @Option(name: .customLong("read-database-url"),
                help: "A hot standby of the database (postgres://USER@HOST:PORT/DATABASE) that pulls read from; pushes, credentials and LISTEN stay on --database.")
        var readDatabaseURL: String?
        @Option(help: "HOST:PORT to listen on (port 0: any free port).") var listen: String = "127.0.0.1:8391"
        @Option(name: .customLong("tls-certificate"), help: "PEM certificate chain: serve HTTPS.") var tlsCertificate: String?
        @Option(name: .customLong("tls-key"), help: "PEM private key of the certificate.") var tlsKey: String?
        @Option(name: .customLong("jwt-hs256-secret-file"),
                help: "Also accept JWTs an app's backend signs with HS256 and the secret in this file (at least 32 bytes).")
        var jwtSecretFile: String?
        @Option(name: .customLong("jwt-es256-public-key"),
                help: "Also accept JWTs signed with ES256 by the private key of this P-256 public key (PEM).")
        var jwtPublicKey: String?
        @Option(name: .customLong("jwt-audience"), help: "The aud a JWT must carry (without it, a JWT that carries an aud is refused).")
        var jwtAudience: String?
        @Option(name: .customLong("jwt-issuer"), help: "The iss a JWT must carry.") var jwtIssuer: String?
        @Option(name: .customLong("jwt-max-lifetime"), help: "The longest a JWT may live, in seconds (exp - iat, and exp - now).")
        var jwtMaxLifetime: Double = 86_400
        @Option(name: .customLong("max-clock-skew"),
                help: "How far ahead of the server's clock a pushed stamp may be, in seconds (within the server's own bound).")
        var maxClockSkew: Double = SyncGateway.Options().maxClockSkew.inSeconds
        @Flag(name: .customLong("allow-privileged-role"),
              help: "Start even when the database login is the schema's owner, a superuser, or bypasses row-level security.")
        var allowPrivilegedRole = false
        @Option(name: .customLong("request-timeout"), help: "Seconds a request's head and body may take to arrive.")
        var requestTimeout: Double = SyncGateway.Limits().requestTimeout.inSeconds
        @Option(name: .customLong("answer-timeout"), help: "Seconds an answer may go without progress before its connection is closed.")
        var answerTimeout: Double = SyncGateway.Limits().answerTimeout.inSeconds
        @Option(name: .customLong("rate"), help: "Requests per second per credential.") var rate: Double = SyncGateway.Limits().requestsPerSecond
        @Option(name: .customLong("max-connections"), help: "Open connections at most.") var maxConnections: Int = SyncGateway.Limits().maxConnections
        @Option(name: .customLong("max-connections-awaiting-request"),
                help: ArgumentHelp("Connections accepted in the last second that have not sent a request yet; at this many, the next waits to be accepted.",
                                   discussion: "Devices connecting all at once are then accepted as fast as their requests are read, which keeps the gateway's memory down."))
        var maxConnectionsAwaitingRequest: Int = SyncGateway.Limits().maxConnectionsAwaitingRequest
        @Option(name: .customLong("max-streams"), help: "Live streams open at once; past this, devices get 503 and poll.")
        var maxStreams: Int = SyncGateway.Limits().maxStreams
        @Option(name: .customLong("max-streams-per-credential"), help: "Live streams one credential may hold open.")
        var maxStreamsPerCredential: Int = SyncGateway.Limits().maxStreamsPerCredential
        @Option(name: .customLong("max-answer-bytes"),
                help: "Bytes of answers being written at once, over every device; a page that finds them full is refused 503 before it reads anything.")
        var maxAnswerBytes: Int = SyncGateway.Limits().maxAnswerBytes
        @Option(name: .customLong("max-page-bytes"), help: "Bytes of keys and values in a page of the log or of a resync, at most.")
        var maxPageBytes: Int = SyncGateway.Limits().maxPageBytes
        @Option(name: .customLong("max-push-changes"), help: "Changes one push may add; a push over it is refused whole, naming the budget.")
        var maxPushChanges: Int = SyncGateway.Limits().maxPushChanges
        @Option(name: .customLong("max-push-bytes"), help: "Bytes of keys and values one push may add.")
        var maxPushBytes: Int = SyncGateway.Limits().maxPushBytes
        @Option(name: .customLong("device-changes-per-minute"), help: "Changes one device (credential) may push a minute.")
        var deviceChangesPerMinute: Int = SyncGateway.Limits().deviceChangesPerMinute
        @Option(name: .customLong("device-bytes-per-minute"), help: "Bytes of keys and values one device may push a minute.")
        var deviceBytesPerMinute: Int = SyncGateway.Limits().deviceBytesPerMinute
        @Option(name: .customLong("group-changes-per-hour"), help: "Changes a whole group's devices may push an hour.")
        var groupChangesPerHour: Int = SyncGateway.Limits().groupChangesPerHour
        @Option(name: .customLong("group-bytes-per-hour"), help: "Bytes of keys and values a whole group's devices may push an hour.")
        var groupBytesPerHour: Int = SyncGateway.Limits().groupBytesPerHour
        @Option(name: .customLong("max-file-bytes"), help: "A file's largest size: an upload over it is refused (413 too_large) before its body is read.")
        var maxFileBytes: Int64 = SyncGateway.Limits().maxFileBytes
        @Option(name: .customLong("max-group-blob-bytes"), help: "Bytes of files one group may hold on the server: an upload past it is refused (507 quota_exceeded).")
        var maxGroupBlobBytes: Int64 = SyncGateway.Limits().maxGroupBlobBytes
        @Option(name: .customLong("database-timeout"), help: "Seconds to wait at the start for a database that does not answer, then fail.")
        var databaseTimeout: Double = SyncGateway.Options().databaseTimeout.inSeconds
        @Option(name: .customLong("metrics-listen"),
                help: "HOST:PORT for Prometheus metrics, /healthz and /readyz (port 0: any free port; off: none).")
        var metricsListen: String = "127.0.0.1:9464"
        @Option(name: .customLong("trusted-proxy"),
                help: "A proxy's address or CIDR block (repeatable) whose PROXY protocol header (v2 or v1, HAProxy's send-proxy-v2) names the client: limits, metrics and the log count that client's address. A header from any other peer is refused.")
        var trustedProxies: [String] = []
        @Option(name: .customLong("log-format"), help: "How refusals and errors are logged on standard error: text or json (one object a line).")
        var logFormat: String = "text"
        /// The other databases of the directory (issue 51): `NAME=URL`, or `NAME=FILE` holding the URL.
        @Option(name: .customLong("group-database"),
                help: "NAME=URL (repeatable): another database groups may live in, by its name in the directory (kvtool sync directory set --in NAME). A password here is visible to `ps`: use --group-database-file.")
        var groupDatabases: [String] = []
        @Option(name: .customLong("group-database-file"), help: "NAME=FILE (repeatable): as --group-database, the URL read from a secret file.")
        var groupDatabaseFiles: [String] = []
        /// Wake-ups after the commit (issue 51).
        @Option(name: .customLong("wake-poll-interval"),
                help: "Seconds between two reads of the newest sequence of the groups with live streams here: a wake-up lost costs at most this.")
        var wakePollInterval: Double = SyncGateway.Options().wakePollInterval.inSeconds

        func validate() throws {
            if (tlsCertificate == nil) != (tlsKey == nil) { throw ValidationError("--tls-certificate and --tls-key go together") }
            guard maxClockSkew >= 0 && maxClockSkew <= 31_536_000 else { throw ValidationError("--max-clock-skew must be from 0 to 31536000 seconds") }
            guard jwtMaxLifetime >= 1 && jwtMaxLifetime <= 2_592_000 else { throw ValidationError("--jwt-max-lifetime must be from 1 to 2592000 seconds") }
            guard requestTimeout >= 0.1 && requestTimeout <= 3_600, answerTimeout >= 0.1 && answerTimeout <= 3_600 else {
                throw ValidationError("--request-timeout and --answer-timeout must be from 0.1 to 3600 seconds")
            }
            if (jwtAudience != nil || jwtIssuer != nil) && jwtSecretFile == nil && jwtPublicKey == nil {
                throw ValidationError("--jwt-audience and --jwt-issuer go with a JWT key (--jwt-hs256-secret-file or --jwt-es256-public-key)")
            }
            guard ((1 << 20)...(1 << 40)).contains(maxAnswerBytes) else {
                throw ValidationError("--max-answer-bytes must be from 1048576 (1 MiB) to 1099511627776 (1 TiB)")
            }
            guard ((64 << 10)...(1 << 30)).contains(maxPageBytes) else {
                throw ValidationError("--max-page-bytes must be from 65536 (64 KiB) to 1073741824 (1 GiB)")
            }
            for (name, value) in [("--max-push-changes", maxPushChanges), ("--max-push-bytes", maxPushBytes),
                                  ("--device-changes-per-minute", deviceChangesPerMinute), ("--device-bytes-per-minute", deviceBytesPerMinute),
                                  ("--group-changes-per-hour", groupChangesPerHour), ("--group-bytes-per-hour", groupBytesPerHour)]
            where !(1...(1 << 50)).contains(value) {
                throw ValidationError("\(name) must be from 1 to 1125899906842624, got \(value)")
            }
            for (name, value) in [("--max-file-bytes", maxFileBytes), ("--max-group-blob-bytes", maxGroupBlobBytes)]
            where !(0...(Int64(1) << 50)).contains(value) {
                throw ValidationError("\(name) must be from 0 to 1125899906842624, got \(value)")
            }
            guard databaseTimeout >= 0 && databaseTimeout <= 86_400 else { throw ValidationError("--database-timeout must be from 0 to 86400 seconds") }
            guard rate > 0 && rate <= 1_000_000 else { throw ValidationError("--rate must be from 0 to 1000000") }
            guard (1...1_000_000).contains(maxConnections) else { throw ValidationError("--max-connections must be from 1 to 1000000") }
            guard (1...1_000_000).contains(maxConnectionsAwaitingRequest) else {
                throw ValidationError("--max-connections-awaiting-request must be from 1 to 1000000")
            }
            guard (1...1_000_000).contains(maxStreams) else { throw ValidationError("--max-streams must be from 1 to 1000000") }
            guard (1...1_000_000).contains(maxStreamsPerCredential) else {
                throw ValidationError("--max-streams-per-credential must be from 1 to 1000000")
            }
            _ = try hostAndPort()
            _ = try metricsHostAndPort()
            _ = try proxies()
            guard logFormat == "text" || logFormat == "json" else { throw ValidationError("--log-format takes text or json, got '\(logFormat)'") }
            guard wakePollInterval >= 0.01 && wakePollInterval <= 3_600 else {
                throw ValidationError("--wake-poll-interval must be from 0.01 to 3600 seconds")
            }
        }

        /// `--group-database` and `--group-database-file`, by name (the files read).
        func namedDatabases() throws -> [String: ServerURL] {
            var named: [String: ServerURL] = [:]
            for (option, given, isFile) in groupDatabases.map({ ("--group-database", $0, false) }) + groupDatabaseFiles.map({ ("--group-database-file", $0, true) }) {
                guard let equals = given.firstIndex(of: "="), case let name = String(given[..<equals]), SyncDirectory.isValidName(name) else {
                    throw CLIError(.usage, "\(option) takes NAME=\(isFile ? "FILE" : "URL"), NAME 1 to 63 letters, digits, - and _")
                }
                guard name != SyncDirectory.home else { throw CLIError(.usage, "\(option): the name home is the home database's (--database)") }
                guard named[name] == nil else { throw CLIError(.usage, "\(option): the name \(name) is given twice") }
                let value = String(given[given.index(after: equals)...])
                let text = isFile ? try SyncCommand.secret(fromFile: value, what: "database URL") : value
                if SyncGatewayURL.isGateway(text) { throw CLIError(.usage, "\(option) takes a postgres:// URL, not a gateway's") }
                do { named[name] = try ServerURL(text) } catch { throw CLIError(.usage, "\(option) \(name): \(error)") }
            }
            return named
        }

        /// `--trusted-proxy`'s blocks.
        func proxies() throws -> [ProxyNetwork] {
            try trustedProxies.map { text in
                do { return try ProxyNetwork(text) } catch { throw ValidationError("--trusted-proxy: \(error)") }
            }
        }

        func hostAndPort() throws -> (String, Int) {
            try Self.hostAndPort(listen, option: "--listen")
        }

        /// Where metrics are served, or `nil` for `--metrics-listen off`.
        func metricsHostAndPort() throws -> (String, Int)? {
            metricsListen == "off" ? nil : try Self.hostAndPort(metricsListen, option: "--metrics-listen")
        }

        static func hostAndPort(_ text: String, option: String) throws -> (String, Int) {
            let more = option == "--metrics-listen" ? ", or off" : ""
            guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65_535).contains(port) else {
                throw ValidationError("\(option) takes HOST:PORT\(more), got '\(text)'")
            }
            var host = String(text[..<colon])
            if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            guard !host.isEmpty else { throw ValidationError("\(option) takes HOST:PORT\(more), got '\(text)'") }
            return (host, port)
        }

        func run() throws {
            let url = try database.url()
            let (host, port) = try hostAndPort()
            var options = SyncGateway.Options()
            options.tlsCertificate = tlsCertificate
            options.tlsKey = tlsKey
            options.limits.requestsPerSecond = rate
            options.limits.burst = max(rate * 4, 1)
            options.limits.maxConnections = maxConnections
            options.limits.maxConnectionsAwaitingRequest = maxConnectionsAwaitingRequest
            options.limits.maxStreams = maxStreams
            options.limits.maxStreamsPerCredential = maxStreamsPerCredential
            options.limits.maxAnswerBytes = maxAnswerBytes
            options.limits.maxPageBytes = maxPageBytes
            options.limits.maxPushChanges = maxPushChanges
            options.limits.maxPushBytes = maxPushBytes
            options.limits.deviceChangesPerMinute = deviceChangesPerMinute
            options.limits.deviceBytesPerMinute = deviceBytesPerMinute
            options.limits.groupChangesPerHour = groupChangesPerHour
            options.limits.groupBytesPerHour = groupBytesPerHour
            options.limits.maxFileBytes = maxFileBytes
            options.limits.maxGroupBlobBytes = maxGroupBlobBytes
            options.limits.requestTimeout = .milliseconds(Int64(requestTimeout * 1000))
            options.limits.answerTimeout = .milliseconds(Int64(answerTimeout * 1000))
            options.trustedProxies = try proxies()
            options.groupDatabases = try namedDatabases()
            options.maxClockSkew = .milliseconds(Int64((maxClockSkew * 1000).rounded()))
            options.allowPrivilegedRole = allowPrivilegedRole
            options.databaseTimeout = .milliseconds(Int64(databaseTimeout * 1000))
            if let readDatabaseURL {
                if SyncGatewayURL.isGateway(readDatabaseURL) { throw CLIError(.usage, "--read-database-url takes a postgres:// URL, not a gateway's") }
                options.readDatabase = try ServerURL(readDatabaseURL)
            }
            options.wakePollInterval = .milliseconds(Int64((wakePollInterval * 1000).rounded()))
            options.waitingForDatabase = { line in
                Output.flush()
                FileHandle.standardError.write(Data("kvtool: \(line)\n".utf8))
            }
            if let (metricsHost, metricsPort) = try metricsHostAndPort() {
                options.metricsHost = metricsHost
                options.metricsPort = metricsPort
                options.metricsListening = { url in
                    print("gateway metrics on \(url)")
                    Output.flush()
                }
            }
            // One line per refusal or error on standard error, written whole (one write each).
            let json = logFormat == "json"
            options.log = { event in
                FileHandle.standardError.write(Data(((json ? event.jsonLine : "kvtool gateway: " + event.textLine) + "\n").utf8))
            }
            var keys: [JWTVerifier.Key] = []
            // The TLS key is read by the gateway (which checks it as a secret file too); checked here
            // first, so that a key others can read exits 65 as every other secret file does.
            if let tlsKey { _ = try SyncCommand.secretBytes(fromFile: tlsKey, what: "TLS key", maxBytes: SyncGateway.maxTLSKeyBytes) }
            if let jwtSecretFile {
                // A trailing newline (echo > file) is not part of the secret.
                var bytes = try SyncCommand.secretBytes(fromFile: jwtSecretFile, what: "JWT secret")
                while bytes.last == 0x0A || bytes.last == 0x0D { bytes.removeLast() }
                keys.append(.hs256(secret: bytes))
            }
            if let jwtPublicKey {
                guard let pem = try? String(contentsOfFile: jwtPublicKey, encoding: .utf8) else {
                    throw CLIError(.notFound, "cannot read the JWT public key \(jwtPublicKey)")
                }
                keys.append(.es256(publicKeyPEM: pem))
            }
            if !keys.isEmpty {
                options.jwt = try JWTVerifier(keys: keys, audience: jwtAudience, issuer: jwtIssuer,
                                              maxLifetime: .milliseconds(Int64(jwtMaxLifetime * 1000)))
            }
            let gateway = try SyncGateway(database: url, options: options)
            // SIGTERM and SIGINT drain: the listener closes, requests in flight finish.
            signal(SIGTERM, SIG_IGN)
            signal(SIGINT, SIG_IGN)
            let sources = [SIGTERM, SIGINT].map { number in
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler { gateway.shutdown() }
                source.resume()
                return source
            }
            defer { sources.forEach { $0.cancel() } }
            do {
                try blocking {
                    try await gateway.run(host: host, port: port) { url in
                        print(GatewayReadyLine(url: "\(url)"))
                        Output.flush()
                    }
                }
            } catch let error as ReplicationError {
                throw error
            } catch let error as GatewayListenError {
                throw CLIError(.failure, error.description)
            } catch {
                if isAddressInUse(error) {
                    throw CLIError(.failure, "\(listen) is in use: pass --listen HOST:PORT, or port 0 for any free port")
                }
                throw CLIError(.failure, "the gateway stopped: \(error)")
            }
            print("gateway drained and stopped")
        }
    }
}
#endif
