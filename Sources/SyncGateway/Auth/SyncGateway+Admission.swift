#if PostgreSQL
import Foundation
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import SyncKitPostgres
import SyncWire

extension SyncGateway {
    /// A refusal found while answering: rolls the request's transaction back.
    struct Refusal: Error {
        var status: GatewayStatus
        var line: String
        var retryAfter: Int?
        /// A blob's typed refusal (`too_large`, `chunk_too_large`), answered with its name and limit.
        var blobOutcome: BlobPutOutcome?

        init(status: GatewayStatus, line: String, retryAfter: Int? = nil) {
            (self.status, self.line, self.retryAfter) = (status, line, retryAfter)
        }

        init(_ refusal: GatewayRefusal) {
            self.init(status: refusal.gatewayStatus, line: refusal.line, retryAfter: refusal.retryAfter)
            blobOutcome = refusal.blobOutcome
        }

        var response: GatewayResponse { GatewayResponse.refusal(status, line, retryAfter: retryAfter).typed(blobOutcome) }
    }

    /// Who a verified credential is.
    struct Principal: Sendable {
        /// The token's row (0 for a JWT).
        var id: Int64
        var group: String
        /// The device id its pushes are recorded under: the name a token was issued to, else
        /// `credential-ID`; a JWT's `device` or `sub`; followed, for a request that sent an install id,
        /// by `#` and that install's public id (`InstallID`). `nil`: a JWT that names no device (pulls
        /// only).
        var device: String?
        var readOnly: Bool
        /// When it stops being valid (a live stream closes then).
        var expiresAt: Date?
        /// What its rate and its live streams are counted by: its group and device name, whatever the
        /// install (or, for a JWT without a device, its signed header and claims).
        var key: String

        /// This principal as a request with install id `install` (its secret) is recorded: under its
        /// device name and the install's public id. The limits' key stays the credential's.
        func installed(_ install: String?) -> Principal {
            guard let install, let device else { return self }
            var copy = self
            copy.device = InstallID.device(named: device, publicID: InstallID.publicID(of: install))
            return copy
        }
    }

    /// What a request presented: a token the database must check, or a JWT already verified.
    enum Credential: Sendable {
        case token(hash: [UInt8])
        case verified(Principal)

        /// What ``ResyncQueue`` holds one turn at a time for: the token (its hash), or the JWT's principal.
        var queueKey: String {
            switch self {
            case .token(let hash): "token " + Hex.encode(hash)
            case .verified(let principal): principal.key
            }
        }
    }

    /// A request admitted from its head: its operation and its credential (a token is looked up again
    /// in the request's own transaction, so that one revoked meanwhile is refused there).
    struct Admitted: Sendable {
        var head: GatewayRequestHead
        var credential: Credential
        /// Whether the principal's group and rate were checked already (a JWT, or a push's token).
        var counted: Bool
    }

    enum Admission {
        case admitted(Admitted)
        case refused(GatewayResponse)
        /// A token before a body, not verified in the last seconds: ``admit(_:hash:from:)`` looks it up.
        case lookUp(GatewayRequestHead, hash: [UInt8])
    }

    /// Checks a request's head: its form, the source address's failed authentications, and the
    /// credential (a JWT here; a token here too when a body follows, else in the request's own
    /// transaction), with the principal's rate. Nothing of the body has been read.
    ///
    /// Not `async`: the connection's task calls it for every request, and a task keeps for its whole
    /// life the memory its deepest call took (an async function's frame is allocated in its task,
    /// sized for every path of the function, the database's included). A live stream's task lives as
    /// long as the stream, so the database lookup before a body is ``admit(_:hash:from:)``'s, called
    /// only for a request that has one (its frame was 2.4 KiB of each live stream's memory).
    func admit(_ head: HTTPRequestHead, from source: SourceAddress) -> Admission {
        let request: GatewayRequestHead
        do {
            request = try GatewayRequestHead(method: head.method.rawValue, uri: head.uri, header: { head.headers[$0] },
                                             maxBodyBytes: options.limits.maxBodyBytes, maxFileBytes: options.limits.maxFileBytes)
        } catch {
            if error.status == 401 { _ = failures.admit(source) }
            return .refused(Refusal(error).response)
        }
        // The failed logins of an address limit what its unknown credentials may cost (a lookup, a
        // signature), never a credential that verified: one known (``KnownCredentials``) is checked
        // whatever its address's failures, which other clients behind it (a NAT) may have spent.
        // Past the budget, an unknown credential is still checked, at ``pastBudget``'s rate (1 a
        // second), so that a device new to this gateway is served in the end; the rest are refused
        // before they cost anything.
        let hash = SyncTokens.hash(request.credential)
        if !known.contains(hash), let wait = failures.check(source), let later = pastBudget.admit(source) {
            return .refused(.refusal(.tooManyRequests, Self.failedLoginsLine(source, wait: min(wait, later)), retryAfter: min(wait, later)))
        }
        do {
            if CredentialText.isToken(request.credential) {
                // A request without a body is checked in its own transaction, in one round trip.
                guard request.operation.hasBody else { return .admitted(Admitted(head: request, credential: .token(hash: hash), counted: false)) }
                // Before its body: the token as it was verified in the last seconds (a device's push
                // follows its hello), else looked up now (``admit(_:hash:from:)``), in one statement.
                // The push's own transaction looks it up again, so one revoked meanwhile is refused there.
                guard let principal = verified.recent(hash) else { return .lookUp(request, hash: hash) }
                try check(principal, against: request)
                return .admitted(Admitted(head: request, credential: .token(hash: hash), counted: true))
            }
            guard let jwt = options.jwt else {
                throw Refusal(status: .unauthorized, line: "the credential is not a sync token (\(SyncTokens.prefix)…): this gateway takes no JWT")
            }
            let principal: Principal
            do {
                principal = try jwt.verify(request.credential)
            } catch {
                known.forget(hash)
                throw error
            }
            known.remember(hash)
            try check(principal, against: request)
            return .admitted(Admitted(head: request, credential: .verified(principal), counted: true))
        } catch {
            return .refused(refusal(for: error, from: source))
        }
    }

    /// The rest of ``admit(_:from:)`` for a token before a body that was not verified in the last
    /// seconds: looked up in one statement, then checked like one that was.
    @inline(never)
    func admit(_ request: GatewayRequestHead, hash: [UInt8], from source: SourceAddress) async -> Admission {
        do {
            let logger = options.logger
            let principal = try await pool(for: request.group).withConnection { connection in
                try await Self.authenticate(hash, on: connection, logger: logger)
            }
            verified.remember(hash, principal)
            known.remember(hash)
            try check(principal, against: request)
            return .admitted(Admitted(head: request, credential: .token(hash: hash), counted: true))
        } catch {
            if (error as? Refusal)?.status == .unauthorized { known.forget(hash) }
            return .refused(refusal(for: error, from: source))
        }
    }

    /// The 429 of an address past its budget of failed logins: it names that budget, so that a device
    /// behind the address is not told that its own credential is limited.
    static func failedLoginsLine(_ source: SourceAddress, wait: Int) -> String {
        "too many failed logins from this device's address (\(source)), not this credential's; retry in \(wait) s"
    }

    /// `50`, `0.5`: a rate as a budget's line shows it.
    static func perSecond(_ rate: Double) -> String {
        rate == rate.rounded() && abs(rate) < 1e15 ? String(Int64(rate)) : String(rate)
    }

    /// The principal's group against the request's, and its rate.
    func check(_ principal: Principal, against request: GatewayRequestHead) throws(Refusal) {
        guard principal.group == request.group else {
            throw Refusal(status: .forbidden, line: "the credential is for another group than \(request.group)")
        }
        if let wait = limiter.admit(principal.key) {
            throw Refusal(status: .tooManyRequests, line: "too many requests for this credential (its budget is \(Self.perSecond(options.limits.requestsPerSecond)) a second); retry in \(wait) s", retryAfter: wait)
        }
    }

    /// The answer to `error`: a refusal as it is (a refused credential counted against `source`), or
    /// 503 with the database's one line.
    func refusal(for error: any Error, from source: SourceAddress) -> GatewayResponse {
        var found = error as? Refusal
        if found == nil, let error = error as? PostgresTransactionError { found = error.closureError as? Refusal }
        if let refusal = found {
            // Only a credential that did not authenticate counts against its address: a verified one
            // refused for what it asked (another group, a push as another device) is its own principal's
            // to answer for, and must not throttle the other devices behind the same address.
            if refusal.status == .unauthorized { _ = failures.admit(source) }
            return refusal.response
        }
        let inner = (error as? PostgresTransactionError)?.closureError ?? error
        if let replication = inner as? ReplicationError, case .deviceInUse(let reason) = replication {
            return .refusal(.conflict, reason)
        }
        // The database unreachable, or gone mid-request: said in the gateway's words, never the
        // library's (the watch has its reason when it knows, else the connection's).
        let cause = (error as? PostgresTransactionError).map { $0.closureError ?? $0.beginError ?? $0.commitError ?? error } ?? error
        if let unreachable = cause as? DatabaseLink.Unreachable { return Self.unreachable(unreachable.reason) }
        if Self.isConnectionFailure(cause) {
            let status = link.status
            return Self.unreachable(status.up ? Self.unreachableWords(cause) : status.reason)
        }
        return .failure("the database: \(ServerStatements.describe(error))")
    }

    /// The verified principal of `credential`, as a request with install id `install` is recorded,
    /// with the transaction on `connection` scoped to its group and device (and running as the
    /// gateway's role) from here on.
    func principal(of credential: Credential, install: String? = nil, on connection: PostgresConnection,
                   logger: Logger) async throws -> Principal {
        switch credential {
        case .token(let hash):
            let principal: Principal
            do {
                principal = try await Self.authenticate(hash, install: install, on: connection, logger: logger)
            } catch let refusal as Refusal where refusal.status == .unauthorized {
                known.forget(hash)
                throw refusal
            }
            verified.remember(hash, principal)
            known.remember(hash)
            return principal
        case .verified(let principal):
            return try await Self.scope(principal.installed(install), on: connection, logger: logger)
        }
    }

    /// Scopes the transaction to a verified principal's group and device, as the gateway's role from
    /// here on.
    static func scope(_ principal: Principal, on connection: PostgresConnection, logger: Logger) async throws -> Principal {
        try await ServerStatements.scope(group: principal.group, device: principal.device, readOnly: principal.readOnly,
                                         on: connection, logger: logger)
        return principal
    }

    /// The credential whose SHA-256 is `hash`, checked, as a request with install id `install` is
    /// recorded, with the transaction scoped to its group and device and running as the gateway's role
    /// from here on.
    static func authenticate(_ hash: [UInt8], install: String? = nil, on connection: PostgresConnection,
                             logger: Logger) async throws -> Principal {
        // The scope's device is ``InstallID/device(named:publicID:)`` of the credential's name, in SQL
        // (the name is known only here); the one computed below must be the same.
        let publicID = install.map(InstallID.publicID(of:))
        let found = try await ServerStatements.authenticate(hash, publicID: publicID, on: connection, logger: logger)
        guard let found, SyncTokens.constantTimeEqual(Array(found.4.readableBytesView), hash) else {
            throw Refusal(status: .unauthorized, line: "the credential is not known here")
        }
        if found.6 { throw Refusal(status: .unauthorized, line: "the credential was revoked") }
        if found.5 { throw Refusal(status: .unauthorized, line: "the credential has expired") }
        let name = found.2 ?? SyncTokens.derivedDevice(credential: found.0)
        // (No token is issued with such a name; one written into the table by hand would be another
        // device's install.)
        guard !InstallID.endsWithPublicID(name) else {
            throw Refusal(status: .forbidden, line: "the credential's device name ends like an install's id (\(InstallID.separator) and \(InstallID.publicIDLength) hexadecimal digits), which is reserved: issue one under another name")
        }
        let device = InstallID.device(named: name, publicID: publicID)
        guard device == found.8 else { throw Refusal(status: .internalServerError, line: "the gateway scoped the transaction to another device than its own") }
        return Principal(id: found.0, group: found.1, device: device, readOnly: found.3, expiresAt: found.7,
                         key: "device \(found.1)\u{0}\(name)")
    }
}
#endif
