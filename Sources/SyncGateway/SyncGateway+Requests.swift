#if PostgreSQL
import Foundation
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import SyncKitPostgres

extension SyncGateway {
    /// The protocol's operations.
    enum Operation: Equatable {
        case hello
        case push
        case changes(after: Int64, limit: Int)
        case state
        case live
    }

    /// A refusal found while answering: rolls the request's transaction back.
    struct Refusal: Error {
        var status: HTTPResponseStatus
        var line: String
        var retryAfter: Int?
    }

    /// Who a verified credential is.
    struct Principal: Sendable {
        var id: Int64
        var group: String
        var device: String?
        var readOnly: Bool
        /// When it stops being valid (a live stream closes then).
        var expiresAt: Date?
    }

    /// A request's credential as presented, its SHA-256 (the rate limit's key) and the group it
    /// names; or the refusal.
    struct Presented {
        var credential: Credential
        var hash: [UInt8]
        var group: String
    }

    static let maxPageChanges = 10_000

    /// What a request presented: a token the database must check, or a JWT already verified.
    enum Credential {
        case token(hash: [UInt8])
        case verified(Principal)
    }

    /// Scopes the transaction to a verified JWT's group, as the gateway's role from here on.
    static func scope(_ principal: Principal, on connection: PostgresConnection, logger: Logger) async throws -> Principal {
        try await connection.query("""
            SELECT set_config('kvsync.group', \(principal.group), true),
                   set_config('kvsync.read_only', \(principal.readOnly ? "on" : "off"), true),
                   set_config('role', \(ServerStatements.gatewayRole), true)
            """, logger: logger)
        return principal
    }

    /// The request's credential (a token's form, or a JWT this gateway verifies), its group header and
    /// its rate; or the refusal.
    func presented(_ head: HTTPRequestHead) -> Result<Presented, Refusal> {
        guard let authorization = head.headers.first(name: "authorization") else {
            return .failure(Refusal(status: .unauthorized, line: "no credential: send Authorization: Bearer TOKEN"))
        }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            return .failure(Refusal(status: .unauthorized, line: "the credential is not a bearer token (Authorization: Bearer TOKEN)"))
        }
        let text = String(parts[1])
        guard let group = head.headers.first(name: GatewayWire.groupHeader), !group.isEmpty else {
            return .failure(Refusal(status: .badRequest, line: "no \(GatewayWire.groupHeader) header naming the group to sync"))
        }
        let hash = SyncTokens.hash(text)
        let credential: Credential
        if SyncTokens.isWellFormed(text) {
            credential = .token(hash: hash)
        } else if let jwt = options.jwt, SyncTokens.looksLikeJWT(text) {
            do {
                credential = .verified(try jwt.verify(text))
            } catch {
                return .failure(error)
            }
        } else {
            return .failure(Refusal(status: .unauthorized, line: options.jwt == nil
                ? "the credential is not a sync token (\(SyncTokens.prefix)…)"
                : "the credential is neither a sync token (\(SyncTokens.prefix)…) nor a JWT"))
        }
        if let wait = limiter.admit(hash) {
            return .failure(Refusal(status: .tooManyRequests, line: "too many requests for this credential; retry in \(wait) s", retryAfter: wait))
        }
        return .success(Presented(credential: credential, hash: hash, group: group))
    }

    /// The verified principal of `presented`, with the transaction on `connection` scoped to its group
    /// (and running as the gateway's role) from here on.
    static func principal(of presented: Presented, on connection: PostgresConnection, logger: Logger) async throws -> Principal {
        let principal = switch presented.credential {
        case .token(let hash): try await authenticate(hash, on: connection, logger: logger)
        case .verified(let principal): try await scope(principal, on: connection, logger: logger)
        }
        guard principal.group == presented.group else {
            throw Refusal(status: .forbidden, line: "the credential is for another group than \(presented.group)")
        }
        return principal
    }

    /// Checks the request's form, its credential and its rate, then answers it in one transaction
    /// scoped to the credential's group.
    func respond(to head: HTTPRequestHead, body: [UInt8]) async -> GatewayResponse {
        let operation: Operation
        let presented: Presented
        do {
            operation = try Self.operation(of: head)
            presented = try self.presented(head).get()
        } catch let refusal as Refusal {
            return .refusal(refusal.status, refusal.line, retryAfter: refusal.retryAfter)
        } catch {
            return .refusal(.badRequest, "\(error)")
        }
        var push: GatewayPushRequest?
        if operation == .push {
            do {
                push = try GatewayPushRequest(decoding: body, maxValueBytes: options.maxValueBytes)
            } catch {
                return .refusal(.badRequest, "the push is malformed: \(error)")
            }
        }
        do {
            let maxPageBytes = options.limits.maxPageBytes
            let logger = options.logger
            let maxValueBytes = options.maxValueBytes
            let answer: [UInt8] = try await client.withTransaction(logger: logger) { connection in
                let principal = try await Self.principal(of: presented, on: connection, logger: logger)
                let statements = ServerStatements(connection: connection, logger: logger, maxValueBytes: maxValueBytes)
                switch operation {
                case .hello:
                    return GatewayHello(serverID: try await statements.serverID(), group: principal.group,
                                        device: principal.device, readOnly: principal.readOnly).encoded()
                case .push:
                    guard !principal.readOnly else {
                        throw Refusal(status: .forbidden, line: "the credential is read-only: it pulls and never pushes")
                    }
                    let request = push!
                    do {
                        let outcomes = try await statements.push(group: principal.group, device: request.device, changes: request.changes,
                                                                 maxClockSkew: .milliseconds(request.maxClockSkewMilliseconds))
                        return GatewayPushResponse.outcomes(outcomes).encoded()
                    } catch ReplicationError.clockAhead(let ahead, _) {
                        return GatewayPushResponse.clockAhead(milliseconds: ahead.wholeMilliseconds).encoded()
                    }
                case .changes(let after, let limit):
                    return try await statements.changes(group: principal.group, after: after, limit: limit, maxBytes: maxPageBytes).encoded()
                case .state:
                    let (last, rows) = try await statements.currentState(group: principal.group)
                    return GatewayState(lastSequence: last, rows: rows).encoded()
                case .live:
                    throw Refusal(status: .badRequest, line: "a live stream is not a request")
                }
            }
            return .ok(answer)
        } catch let refusal as Refusal {
            return .refusal(refusal.status, refusal.line)
        } catch let error as PostgresTransactionError {
            if let refusal = error.closureError as? Refusal { return .refusal(refusal.status, refusal.line) }
            return .refusal(.serviceUnavailable, "the database: \(ServerStatements.describe(error))")
        } catch {
            return .refusal(.serviceUnavailable, "the database: \(ServerStatements.describe(error))")
        }
    }

    /// The credential whose SHA-256 is `hash`, checked, with the transaction scoped to its group and
    /// running as the gateway's role from here on.
    static func authenticate(_ hash: [UInt8], on connection: PostgresConnection, logger: Logger) async throws -> Principal {
        var found: (Int64, String, String?, Bool, ByteBuffer, Bool, Bool, Date?)?
        let rows = try await connection.query("""
            SELECT a.id, a.group_id, a.device, a.read_only, a.hash, a.expired, a.revoked, a.expires_at,
                   set_config('kvsync.group', a.group_id, true),
                   set_config('kvsync.read_only', CASE WHEN a.read_only THEN 'on' ELSE 'off' END, true),
                   set_config('role', \(ServerStatements.gatewayRole), true)
            FROM kvsync_authenticate(\(ByteBuffer(bytes: hash))) a
            """, logger: logger)
        for try await row in rows.decode((Int64, String, String?, Bool, ByteBuffer, Bool, Bool, Date?, String, String, String).self) {
            found = (row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7)
        }
        guard let found, SyncTokens.constantTimeEqual(Array(found.4.readableBytesView), hash) else {
            throw Refusal(status: .unauthorized, line: "the credential is not known here")
        }
        if found.6 { throw Refusal(status: .unauthorized, line: "the credential was revoked") }
        if found.5 { throw Refusal(status: .unauthorized, line: "the credential has expired") }
        return Principal(id: found.0, group: found.1, device: found.2, readOnly: found.3, expiresAt: found.7)
    }

    /// `/v1/hello`, `/v1/push`, `/v1/changes?after=N&limit=M`, `/v1/state`; another version is refused
    /// in one line that names both.
    static func operation(of head: HTTPRequestHead) throws -> Operation {
        let (path, query) = split(head.uri)
        let parts = path.split(separator: "/", omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].first == "v", let version = Int(parts[0].dropFirst()) else {
            throw Refusal(status: .notFound, line: "no such endpoint \(path.prefix(100)) (the sync protocol's are under /v\(GatewayWire.version)/)")
        }
        guard version == GatewayWire.version else {
            throw Refusal(status: .badRequest, line: "unsupported sync protocol version \(version): this gateway speaks version \(GatewayWire.version)")
        }
        switch (head.method, parts[1]) {
        case (.GET, "hello"): return .hello
        case (.POST, "push"): return .push
        case (.GET, "state"): return .state
        case (.GET, "live"): return .live
        case (.GET, "changes"):
            guard let after = query["after"].flatMap({ Int64($0) }), after >= 0 else {
                throw Refusal(status: .badRequest, line: "changes needs ?after=CURSOR, a sequence number")
            }
            let limit = query["limit"].flatMap { Int($0) } ?? 1_000
            guard (1...maxPageChanges).contains(limit) else {
                throw Refusal(status: .badRequest, line: "limit must be from 1 to \(maxPageChanges)")
            }
            return .changes(after: after, limit: limit)
        default:
            throw Refusal(status: .notFound, line: "no such endpoint: \(head.method) \(path.prefix(100))")
        }
    }

    static func split(_ uri: String) -> (path: String, query: [String: String]) {
        guard let mark = uri.firstIndex(of: "?") else { return (uri, [:]) }
        var query: [String: String] = [:]
        for pair in uri[uri.index(after: mark)...].split(separator: "&") {
            let halves = pair.split(separator: "=", maxSplits: 1)
            query[String(halves[0])] = halves.count > 1 ? String(halves[1]) : ""
        }
        return (String(uri[..<mark]), query)
    }
}

#endif
