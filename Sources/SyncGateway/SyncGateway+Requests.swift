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
        var status: HTTPResponseStatus
        var line: String
        var retryAfter: Int?

        init(status: HTTPResponseStatus, line: String, retryAfter: Int? = nil) {
            (self.status, self.line, self.retryAfter) = (status, line, retryAfter)
        }

        init(_ refusal: GatewayRefusal) {
            self.init(status: HTTPResponseStatus(statusCode: refusal.status), line: refusal.line, retryAfter: refusal.retryAfter)
        }

        var response: GatewayResponse { .refusal(status, line, retryAfter: retryAfter) }
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
                                             maxBodyBytes: options.limits.maxBodyBytes)
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
            let principal = try await pool().withConnection { connection in
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
        try await connection.query("""
            SELECT set_config('kvsync.group', \(principal.group), true),
                   set_config('kvsync.device', \(principal.device ?? ""), true),
                   set_config('kvsync.read_only', \(principal.readOnly ? "on" : "off"), true),
                   set_config('role', \(ServerStatements.gatewayRole), true)
            """, logger: logger)
        return principal
    }

    /// The credential whose SHA-256 is `hash`, checked, as a request with install id `install` is
    /// recorded, with the transaction scoped to its group and device and running as the gateway's role
    /// from here on.
    static func authenticate(_ hash: [UInt8], install: String? = nil, on connection: PostgresConnection,
                             logger: Logger) async throws -> Principal {
        var found: (Int64, String, String?, Bool, ByteBuffer, Bool, Bool, Date?, String)?
        // The scope's device is ``InstallID/device(named:publicID:)`` of the credential's name, in SQL
        // (the name is known only here); the one computed below must be the same.
        let publicID = install.map(InstallID.publicID(of:))
        let rows = try await connection.query("""
            SELECT a.id, a.group_id, a.device, a.read_only, a.hash, a.expired, a.revoked, a.expires_at,
                   set_config('kvsync.group', a.group_id, true),
                   set_config('kvsync.device', CASE
                       WHEN \(publicID)::text IS NOT NULL
                            AND octet_length(coalesce(a.device, 'credential-' || a.id)) <= \(InstallID.maxNameBytesWithInstall)
                       THEN coalesce(a.device, 'credential-' || a.id) || \(InstallID.separator) || \(publicID)::text
                       ELSE coalesce(a.device, 'credential-' || a.id) END, true),
                   set_config('kvsync.read_only', CASE WHEN a.read_only THEN 'on' ELSE 'off' END, true),
                   set_config('role', \(ServerStatements.gatewayRole), true)
            FROM kvsync_authenticate(\(ByteBuffer(bytes: hash))) a
            """, logger: logger)
        for try await row in rows.decode((Int64, String, String?, Bool, ByteBuffer, Bool, Bool, Date?, String, String, String, String).self) {
            found = (row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.9)
        }
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

    /// Answers an admitted request in one transaction scoped to its credential's group and device.
    @inline(never)
    func respond(to request: Admitted, body: [UInt8], from source: SourceAddress) async -> GatewayResponse {
        var push: GatewayPushRequest?
        let reservation = Locked(0)
        // A resync waits for its turn (``ResyncQueue``) before it reserves anything: a credential's
        // resyncs one at a time, the groups' in turn. The turn's read ends with the transaction; the
        // turn itself once the answer is written (the response carries it to the writer).
        var turn: ResyncTurn?
        switch request.head.operation {
        case .state, .statePage:
            guard let granted = await resyncs.turn(group: request.head.group, credential: request.credential.queueKey) else {
                return .refusal(.tooManyRequests, "this credential already has a resync being answered and \(resyncs.maxWaitingPerCredential) waiting; read those first, or retry in 1 s",
                                retryAfter: 1)
            }
            turn = granted
        default:
            break
        }
        switch request.head.operation {
        case .push:
            do {
                push = try GatewayPushRequest(decoding: body, maxValueBytes: options.maxValueBytes)
            } catch {
                return .refusal(.badRequest, "the push is malformed: \(error)")
            }
            // A value no device can decode never reaches the log, nor a device (issue 47): the batch
            // is refused whole, with the reason, before any database work.
            do {
                try ServerStatements.refuseUndecodable(push!.changes)
            } catch {
                let reason = if case ReplicationError.undecodableValue(let reason) = error { reason } else { "\(error)" }
                var response = GatewayResponse.ok(GatewayPushResponse.undecodableValue(reason: reason).encoded())
                response.outcome = .refused(.undecodable)
                response.logLine = "the push holds a value no device can decode; the batch was refused"
                return response
            }
        case .changes, .statePage:
            // A page reserves the room its statement may fill before anything is read: a refusal
            // reads nothing from the database.
            guard let granted = reserveAnswer(upTo: options.limits.maxPageBytes) else { return busyWriting }
            reservation.withLock { $0 = granted }
        case .state:
            // The whole state (a device from before paged resyncs) reserves its size once it is known.
            guard answersHaveRoom() else { return busyWriting }
        case .hello, .live:
            break
        }
        // The room reserved for this answer in the budget, released unless the answer takes it over.
        defer { countAnswer(-reservation.withLock { $0 }) }
        // The read's permit goes back with the transaction (its answer may still be being written).
        defer { turn?.endRead() }
        do {
            let (maxValueBytes, maxClockSkew, maxAnswerBytes) = (options.maxValueBytes, options.maxClockSkew, options.limits.maxAnswerBytes)
            let logger = options.logger
            // The answer, and the changes it pushed or pulled, and how far ahead a refused push's clock
            // was, with the bound that refused it (milliseconds), or the budgets that refused it.
            typealias Answer = (bytes: [UInt8], pushed: Int, pulled: Int, ahead: (by: Int64, limit: Int64)?, refused: [PushRefusal])
            // Refused here, before a transaction, while the database is unreachable.
            let client = try pool()
            let started = ContinuousClock.now
            defer { metrics.transaction(ContinuousClock.now - started) }
            let (answer, pushed, pulled, ahead, refused): Answer = try await client.withTransaction(logger: logger) { [self] connection -> Answer in
                let principal = try await self.principal(of: request.credential, install: request.head.install, on: connection, logger: logger)
                if !request.counted { try check(principal, against: request.head) }
                let statements = ServerStatements(connection: connection, logger: logger, maxValueBytes: maxValueBytes)
                switch request.head.operation {
                case .hello:
                    return (GatewayHello(serverID: try await statements.serverID(), group: principal.group,
                                         device: principal.device, readOnly: principal.readOnly).encoded(), 0, 0, nil, [])
                case .push:
                    guard let device = principal.device, !principal.readOnly else {
                        throw Refusal(status: .forbidden, line: principal.device == nil
                            ? "the credential names no device: it pulls and never pushes"
                            : "the credential is read-only: it pulls and never pushes")
                    }
                    let request = push!
                    // Who pushes is the credential's to say: the body names nobody, or this device.
                    guard request.device.isEmpty || request.device == device else {
                        throw Refusal(status: .forbidden, line: "the push names another device, and this credential's device is \(device)")
                    }
                    // The budgets of the credential's device and of its group (the server's settings, never
                    // the request's), charged before anything is written: a push past one is refused whole.
                    let bytes = request.changes.reduce(0) { $0 + $1.key.count + ($1.value?.count ?? 0) }
                    let refusals = budgets.charge(device: principal.key, group: principal.group, changes: request.changes.count, bytes: bytes)
                    guard refusals.isEmpty else { return (GatewayPushResponse.refused(refusals).encoded(), 0, 0, nil, refusals) }
                    do {
                        let outcomes = try await statements.push(group: principal.group, device: device, changes: request.changes,
                                                                 maxClockSkew: maxClockSkew)
                        return (GatewayPushResponse.outcomes(outcomes).encoded(), request.changes.count, 0, nil, [])
                    } catch ReplicationError.clockAhead(let ahead, let limit) {
                        budgets.refund(device: principal.key, group: principal.group, changes: request.changes.count, bytes: bytes)
                        let (by, bound) = (ahead.wholeMilliseconds, limit.wholeMilliseconds)
                        return (GatewayPushResponse.clockAhead(milliseconds: by, limitMilliseconds: bound).encoded(), 0, 0, (by, bound), [])
                    } catch {
                        budgets.refund(device: principal.key, group: principal.group, changes: request.changes.count, bytes: bytes)
                        throw error
                    }
                case .changes(let after, let limit):
                    let page = try await statements.changes(group: principal.group, after: after, limit: limit,
                                                            maxBytes: reservation.withLock { $0 })
                    return (page.encoded(), 0, page.changes.count, nil, [])
                case .statePage(let after, let limit):
                    let page = try await statements.statePage(group: principal.group, after: after, limit: limit,
                                                              maxBytes: reservation.withLock { $0 })
                    return (page.encoded(), 0, page.rows.count, nil, [])
                case .state:
                    let (last, rows) = try await statements.currentState(group: principal.group) { size in
                        guard size <= Int64(maxAnswerBytes) else { throw Self.wholeStateTooLarge(size, budget: maxAnswerBytes) }
                        guard reserveAnswer(exactly: Int(size)) else {
                            throw Refusal(status: .serviceUnavailable, line: busyLine, retryAfter: 1)
                        }
                        reservation.withLock { $0 = Int(size) }
                    }
                    return (GatewayState(lastSequence: last, rows: rows).encoded(), 0, rows.count, nil, [])
                case .live:
                    throw Refusal(status: .badRequest, line: "a live stream is not a request")
                }
            }
            // A page or a state was counted as it was reserved: its reservation becomes its size, and the
            // writer releases it. Another answer (a push's outcomes) that would take the answers being
            // written past their budget is dropped now, rather than held for a device that may never
            // read it.
            var response = GatewayResponse.ok(answer)
            response.turn = turn
            let reserved = reservation.withLock { held -> Int in defer { held = 0 }; return held }
            if reserved > 0 {
                countAnswer(answer.count - reserved)
                response.reserved = answer.count
            } else if answer.count > Self.smallAnswer && answerBytes + answer.count > options.limits.maxAnswerBytes {
                return busyWriting
            }
            metrics.changes(pushed: pushed, pulled: pulled)
            if let ahead {
                // Answered (the device learns its skew), and counted and logged as a refusal.
                response.outcome = .refused(.skew)
                response.logLine = "the push's stamps are \(ahead.by) ms ahead of the server's clock, past the bound of \(ahead.limit) ms; the batch was refused"
            }
            if !refused.isEmpty {
                // Answered (the device learns which budget and its limit), and counted and logged as a refusal.
                response.outcome = .refused(.budget)
                response.logLine = "the push was refused whole, nothing applied: " + refused.map(\.description).joined(separator: "; ")
            }
            return response
        } catch {
            return refusal(for: error, from: source)
        }
    }

    /// Answers this small are written whatever the budget (a hello, a push's outcomes, a short page).
    static let smallAnswer = 64 << 10

    /// The refusal when the answers being written fill ``Limits/maxAnswerBytes``: it says what is full.
    var busyWriting: GatewayResponse { .refusal(.serviceUnavailable, busyLine, retryAfter: 1) }

    var busyLine: String {
        "the gateway's budget for answers being written (\(Self.mebibytes(options.limits.maxAnswerBytes))) is full with other devices' answers; try again"
    }

    /// The refusal of a whole state over what one answer may hold (a device from before paged resyncs
    /// asks for it): it cannot be answered, and the device is told why.
    static func wholeStateTooLarge(_ size: Int64, budget: Int) -> Refusal {
        Refusal(status: .badRequest, line: "the group's state is \(mebibytes(Int(size))), over the \(mebibytes(budget)) one answer may hold: this device's version asks for it whole; a newer version resyncs it a page at a time")
    }

    /// `128 MiB`, `1.5 MiB`.
    static func mebibytes(_ bytes: Int) -> String {
        let tenths = (bytes * 10 + (1 << 19)) >> 20
        return tenths % 10 == 0 ? "\(tenths / 10) MiB" : "\(tenths / 10).\(tenths % 10) MiB"
    }

    // MARK: - The database at start

    /// Checks that the database is ready for this gateway, and that this gateway's login is no more
    /// than a member of `kvsync_gateway`; returns the revocation log's cursor. The gateway never
    /// creates or migrates the schema: that is the owner's step (`kvtool sync setup`).
    /// A connection to the database, tried again with a backoff while nothing answers there, for up
    /// to ``Options/databaseTimeout`` (``Options/waitingForDatabase`` is told once). Other errors (a
    /// refused login, a database that does not exist) are thrown at once.
    func connectWaiting() async throws -> PostgresConnection {
        let configuration = try database.connectionConfiguration()
        let logger = options.logger
        let timeout = options.databaseTimeout
        let deadline = ContinuousClock.now + timeout
        let endpoint = database.shownEndpoint
        // Told once: when an attempt fails for want of an answer, or after a second without one.
        let told = Locked(false)
        let tell = { @Sendable [options] (reason: String?) in
            guard told.withLock({ let first = !$0; $0 = true; return first }) else { return }
            options.waitingForDatabase?("waiting for the database at \(endpoint)\(reason.map { " (\($0))" } ?? ""), for up to \(ReplicationError.seconds(timeout))…")
        }
        let notice = Task {
            try await Task.sleep(for: .seconds(1))
            tell(nil)
        }
        defer { notice.cancel() }
        var backoff: Duration = .milliseconds(100)
        var attempt: Duration = .seconds(2)
        while true {
            let limit = max(min(attempt, deadline - ContinuousClock.now), .milliseconds(100))
            let reason: String
            do {
                return try await withDeadline(limit, what: "the database") {
                    try await PostgresConnection.connect(configuration: configuration, id: 2, logger: logger)
                } abandoned: { late in
                    try? await late.close()
                }
            } catch let error as ReplicationError {
                guard case .server(let message) = error, message.hasPrefix("no answer from") else { throw error }
                reason = "no answer"
            } catch {
                guard let unreachable = unreachableReason(error) else { throw error }
                reason = unreachable
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else {
                throw ReplicationError.unreachable("cannot reach the database at \(endpoint) within \(ReplicationError.seconds(timeout)): \(reason); check that PostgreSQL is running there and that --database is right (--database-timeout waits longer)")
            }
            tell(reason)
            try await Task.sleep(for: min(backoff, left))
            backoff = min(backoff * 2, .seconds(2))
            attempt = min(attempt * 2, .seconds(15))
        }
    }

    func checkDatabase() async throws -> Int64 {
        let logger = options.logger
        let allowPrivileged = options.allowPrivilegedRole
        do {
            // A connection of its own, with a deadline: the pool would try a refused login again and
            // again, and the gateway would hang at its start instead of saying why it cannot.
            let connection = try await connectWaiting()
            defer { Task { try? await connection.close() } }
            return try await connection.withTransaction(logger: logger) { connection in
                try await ServerStatements.checkSchemaExists(connection, logger: logger)
                var role: (String, Bool, Bool, Bool, Bool, Bool, String)?
                for try await row in try await connection.query("""
                    SELECT r.rolname, r.rolsuper, r.rolbypassrls, r.rolcreaterole,
                           coalesce(pg_has_role(current_user, (SELECT g.oid FROM pg_roles g WHERE g.rolname = \(ServerStatements.gatewayRole)), 'MEMBER'), false),
                           EXISTS (SELECT FROM pg_class c WHERE c.relname IN ('kvsync_schema', 'kvsync_tokens', 'kvsync_changes')
                                   AND pg_has_role(current_user, c.relowner, 'MEMBER')),
                           coalesce((SELECT string_agg(g.rolname, ', ' ORDER BY g.rolname) FROM pg_roles g
                                     WHERE g.rolname <> \(ServerStatements.gatewayRole) AND g.oid <> r.oid
                                       AND pg_has_role(current_user, g.oid, 'MEMBER')), '')
                    FROM pg_roles r WHERE r.rolname = current_user
                    """, logger: logger).decode((String, Bool, Bool, Bool, Bool, Bool, String).self) {
                    role = row
                }
                guard let (name, superuser, bypassRLS, createRole, member, owner, others) = role else {
                    throw ReplicationError.server("cannot read this login's role")
                }
                guard member || superuser else {
                    throw ReplicationError.server("the login \(name) is not a member of \(ServerStatements.gatewayRole): run kvtool sync setup --database OWNER_URL --gateway-login \(name)")
                }
                var privileges: [String] = []
                if superuser { privileges.append("a superuser") }
                if bypassRLS { privileges.append("allowed to bypass row-level security") }
                if createRole { privileges.append("allowed to create roles") }
                if owner { privileges.append("the owner of the kvsync tables") }
                if !others.isEmpty && !superuser { privileges.append("a member of \(others)") }
                if !privileges.isEmpty && !allowPrivileged {
                    throw ReplicationError.server("the login \(name) is \(privileges.joined(separator: ", ")): a gateway logs in as a role that is only a member of \(ServerStatements.gatewayRole) (kvtool sync setup --gateway-login NAME makes one), or pass --allow-privileged-role")
                }
                try await connection.query("SELECT set_config('role', \(ServerStatements.gatewayRole), true)", logger: logger)
                try await ServerStatements.checkSchema(connection, logger: logger)
                return try await ServerStatements.revocationCursor(connection, logger: logger)
            }
        } catch let error as ReplicationError {
            throw error
        } catch let error as PostgresTransactionError {
            if let inner = error.closureError as? ReplicationError { throw inner }
            throw ReplicationError.server("cannot use the database \(database): \(ServerStatements.describe(error))")
        } catch {
            throw ReplicationError.server("cannot use the database \(database): \(ServerStatements.describe(error))")
        }
    }
}
#endif
